"""The human's form is an input too: what it holds is shown escaped and cut, it is read as a
regular file under a cap, and an answer lands only where the human saw what it is about."""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

from tests.form.conftest import Matrix, fill

DEADLINE = 30


def export(cli, matrix: Matrix, name: str = "FORM.toml", *args: str) -> Path:
    form = matrix.out / name
    form.parent.mkdir(parents=True, exist_ok=True)
    done = cli("form", "export", matrix.scenario, matrix.root, "-o", form, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return form


def ingest(cli, matrix: Matrix, form: Path, *args: str):
    return cli("form", "ingest", matrix.scenario, matrix.root, form, "--by", "ana", *args)


def test_a_table_id_holding_terminal_sequences_cannot_forge_ingest_lines(
    cli, matrix: Matrix
) -> None:
    form = export(cli, matrix, "FORM.toml", "--seed", "1")
    forged = (
        "FORM.toml: 6 merged, 0 still pending, 0 refused\\nmeasures.json: 6 runs: 6 valid\\u001b[8m"
    )
    opaque = next(iter(matrix.opaque_of(form).values()))
    fill(form, opaque, '"y\\u001b]0;PWNED\\u0007" = true')
    with form.open("a", encoding="utf-8") as handle:
        handle.write(f'\n[run."x\\n{forged}"]\nreadable_in_class = true\n')
    done = ingest(cli, matrix, form)
    assert done.returncode == 1
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    lines = done.stdout.splitlines()
    assert not [line for line in lines if line.startswith("measures.json: 6 runs: 6 valid")]
    assert [line for line in lines if line.startswith("FORM.toml: ")] == [lines[0]]
    assert "\\x1b]0;PWNED\\x07" in done.stdout  # shown, as escapes


def test_a_huge_refused_value_is_cut_with_its_size(cli, matrix: Matrix) -> None:
    form = export(cli, matrix, "FORM.toml", "--seed", "1")
    opaque = next(iter(matrix.opaque_of(form).values()))
    # 5 MB: under the form's size cap (a 20 MB one is refused whole, see below).
    fill(form, opaque, f'readable_in_class = "{"y" * 5_000_000}"', "note_usable_human = true")
    done = ingest(cli, matrix, form)
    assert done.returncode == 1
    assert len(done.stdout) < 10_000, len(done.stdout)
    assert "(5,000,000 characters)" in done.stdout
    assert "1 merged" in done.stdout  # the other answer landed


def test_a_form_that_is_a_fifo_is_refused_without_waiting(cli_process, matrix: Matrix) -> None:
    fifo = matrix.out / "FORM.toml"
    os.mkfifo(fifo)
    done = cli_process(
        "form", "ingest", matrix.scenario, matrix.root, fifo, "--by", "ana", timeout=DEADLINE
    )
    assert done.returncode == 2, done.stderr
    assert "is a FIFO, not a file" in done.stderr and str(fifo) in done.stderr
    assert "internal error" not in done.stderr


def test_a_form_that_is_a_device_or_too_large_is_one_sentence(cli_process, matrix: Matrix) -> None:
    done = cli_process(
        "form", "ingest", matrix.scenario, matrix.root, "/dev/zero", "--by", "ana", timeout=DEADLINE
    )
    assert done.returncode == 2, done.stderr
    assert "/dev/zero: is a device, not a file" in done.stderr and "MemoryError" not in done.stderr
    huge = matrix.out / "HUGE.toml"
    with huge.open("wb") as handle:
        handle.truncate(64 * 1024 * 1024)  # sparse: costs no disk
    done = cli_process(
        "form", "ingest", matrix.scenario, matrix.root, huge, "--by", "ana", timeout=DEADLINE
    )
    assert done.returncode == 2, done.stderr
    assert "larger than 16 MiB" in done.stderr and "internal error" not in done.stderr


def test_a_byte_order_mark_is_accepted_and_utf16_is_named(cli, matrix: Matrix) -> None:
    form = export(cli, matrix, "FORM.toml", "--seed", "1")
    opaque = next(iter(matrix.opaque_of(form).values()))
    fill(form, opaque, "readable_in_class = true")
    form.write_bytes(b"\xef\xbb\xbf" + form.read_bytes())
    done = ingest(cli, matrix, form)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 merged" in done.stdout
    form.write_text(form.read_text(encoding="utf-8-sig"), encoding="utf-16")
    done = ingest(cli, matrix, form)
    assert done.returncode == 2 and "UTF-16 byte-order mark" in done.stderr, done.stderr
    assert "Invalid statement" not in done.stderr


def test_a_second_export_with_the_same_stem_keeps_the_first_forms_key(cli, matrix: Matrix) -> None:
    first = export(cli, matrix, "form.toml", "--seed", "1")
    second = export(cli, matrix, "batch2/form.toml", "--seed", "2")
    run_a, run_b = sorted(matrix.runs)[:2]
    fill(first, matrix.opaque_of(first)[run_a], "readable_in_class = true")
    fill(second, matrix.opaque_of(second)[run_b], "readable_in_class = false")
    for form in (first, second):
        done = ingest(cli, matrix, form)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 merged" in done.stdout and "unknown id" not in done.stdout
    assert matrix.result(run_a)["metrics"]["readable_in_class"] is True
    assert matrix.result(run_b)["metrics"]["readable_in_class"] is False


def test_an_older_form_ingested_after_a_newer_one_does_not_revert_the_correction(
    cli, matrix: Matrix
) -> None:
    target = min(matrix.runs)
    old = export(cli, matrix, "old.toml", "--seed", "1")
    fill(old, matrix.opaque_of(old)[target], "readable_in_class = true")
    assert ingest(cli, matrix, old).returncode == 0
    # A second form, exported after, corrects the answer.
    new = export(cli, matrix, "new.toml", "--seed", "2", "--all")
    fill(new, matrix.opaque_of(new)[target], "readable_in_class = false")
    corrected = ingest(cli, matrix, new)
    assert corrected.returncode == 0, corrected.stdout
    # The old form comes back (sent again by mistake): its answer is older than the correction.
    stale = ingest(cli, matrix, old)
    assert stale.returncode == 1, stale.stdout
    assert (
        "a newer answer is recorded (false by ana" in stale.stdout
        and "from new.toml" in stale.stdout
    )
    result = matrix.result(target)
    assert result["metrics"]["readable_in_class"] is False
    origin = result["provenance"]["readable_in_class"]
    assert (
        origin["form"] == "new.toml" and origin["form_id"] == tomllib.loads(new.read_text())["form"]
    )
    assert origin["exported"] == matrix.key(new)["exported"]
    # Taken only when asked, and recorded as such.
    forced = ingest(cli, matrix, old, "--accept-stale")
    assert forced.returncode == 0, forced.stdout
    origin = matrix.result(target)["provenance"]["readable_in_class"]
    assert origin["form"] == "old.toml" and "a newer answer is recorded" in origin["accepted"]


def test_an_answer_about_a_response_that_changed_since_export_is_refused(
    cli, matrix: Matrix
) -> None:
    form = export(cli, matrix, "FORM.toml", "--seed", "1")
    key = matrix.key(form)
    target = min(matrix.runs)
    opaque = matrix.opaque_of(form)[target]
    assert set(key["pieces"][opaque]) == {"diff", "response", "prompt"}
    assert re.fullmatch(r"[0-9a-f]{64}", key["pieces"][opaque]["response"])
    fill(form, opaque, "readable_in_class = true")
    (matrix.run_dir(target) / "response.md").write_text("A different answer, written later.\n")
    done = ingest(cli, matrix, form)
    assert done.returncode == 1, done.stdout
    assert "the run's response changed since this form was exported" in done.stdout
    assert matrix.result(target) is None
    done = ingest(cli, matrix, form, "--accept-stale")
    assert done.returncode == 0, done.stdout
    origin = matrix.result(target)["provenance"]["readable_in_class"]
    assert "response changed since this form was exported" in origin["accepted"]
    assert origin["form"] == "FORM.toml" and origin["by"] == "ana"
    json.dumps(origin)
