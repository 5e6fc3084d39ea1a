"""``trysquare form ingest``: answers land with provenance, refusals stay per entry."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pytest

from tests.conftest import Cli, _cli_env
from tests.form.conftest import Matrix, build_form_matrix, copy_matrix, fill

TOTAL = 6 * 2  # runs x form metrics


def validate_matrix(cli, matrix: Matrix) -> Matrix:
    done = cli("validate", matrix.scenario, matrix.root, "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    # Nothing filled yet: every run waits for a human, and none of them is invalid.
    assert done.stdout.strip().splitlines()[-1] == "6 runs: 6 pending"
    return matrix


@pytest.fixture(scope="module")
def validated_once(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    """The matrix validated once for the module (about a second of git and validators);
    each test gets its own copy (:func:`validated`)."""
    tmp = tmp_path_factory.mktemp("validated")
    return validate_matrix(Cli(_cli_env(tmp)), build_form_matrix(tmp))


@pytest.fixture
def validated(validated_once: Matrix, tmp_path: Path) -> Matrix:
    """A validated matrix of this test's own, under ``tmp_path``: a copy, whose clones are new
    folders (their work records' stat pictures are refreshed at the next look)."""
    return copy_matrix(validated_once, tmp_path)


@pytest.fixture
def validated_in_place(cli, matrix: Matrix) -> Matrix:
    """A matrix validated where it was built, for the test of reuse: a validator's context names
    its run's files by absolute path, so the results of a copy are measured again."""
    return validate_matrix(cli, matrix)


def export(cli, matrix: Matrix, name: str = "FORM.toml", seed: str = "5") -> Path:
    form = matrix.out / name
    done = cli("form", "export", matrix.scenario, matrix.root, "-o", form, "--seed", seed)
    assert done.returncode == 0, done.stderr
    return form


def ingest(cli, matrix: Matrix, form: Path, *extra: str, env: dict[str, str] | None = None):
    return cli("form", "ingest", matrix.scenario, matrix.root, form, *extra, env=env)


def summary(done) -> tuple[int, int, int]:
    found = re.search(
        r"(\d+) merged(?:, \d+ unchanged)?, (\d+) still pending, (\d+) refused", done.stdout
    )
    assert found, done.stdout + done.stderr
    return tuple(int(n) for n in found.groups())  # type: ignore[return-value]


def test_a_partly_filled_form_merges_what_is_there_and_leaves_the_rest_pending(
    cli, validated: Matrix
) -> None:
    matrix = validated
    form = export(cli, matrix)
    first, second = sorted(matrix.runs)[:2]
    ids = matrix.opaque_of(form)
    fill(form, ids[first], "readable_in_class = true", "note_usable_human = false")
    fill(form, ids[second], "note_usable_human = true")
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)

    done = ingest(cli, matrix, form, "--by", "ana")
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary(done) == (3, TOTAL - 3, 0)

    whole = matrix.result(first)
    assert whole["metrics"] == {"readable_in_class": True, "note_usable_human": False}
    assert whole["state"] == "valid"
    assert whole["validator"]["mode"] == "form" and whole["validator"]["name"] == "human"
    assert set(whole["provenance"]) == {"readable_in_class", "note_usable_human"}
    for origin in whole["provenance"].values():
        assert origin["by"] == "ana"
        at = datetime.datetime.fromisoformat(origin["at"])
        assert at.tzinfo is not None and at >= before
    part = matrix.result(second)
    assert part["metrics"] == {"note_usable_human": True}
    assert part["state"] == "pending"
    assert part["provenance"]["note_usable_human"]["by"] == "ana"

    rows = matrix.measures()
    assert rows[first]["state"] == "valid"
    assert rows[first]["metrics"]["readable_in_class"] is True
    assert rows[first]["metrics"]["delivered"] is True  # the script's, untouched
    assert rows[second]["state"] == "pending" and rows[second]["pending"] == ["readable_in_class"]
    for other in sorted(matrix.runs)[2:]:
        assert rows[other]["state"] == "pending"
        assert rows[other]["pending"] == ["note_usable_human", "readable_in_class"]
    assert "measures.json: 6 runs: 1 valid, 5 pending" in done.stdout


def test_each_bad_entry_is_refused_alone_and_a_measured_metric_is_never_overwritten(
    cli, validated: Matrix
) -> None:
    matrix = validated
    form = export(cli, matrix)
    target = min(matrix.runs)
    script_before = (matrix.run_dir(target) / "validation" / "script.json").read_bytes()
    assert json.loads(script_before)["metrics"]["delivered"] is True
    ids = matrix.opaque_of(form)
    fill(
        form,
        ids[target],
        "readable_in_class = true",  # good: lands
        'note_usable_human = "yes"',  # wrong type
        "delivered = false",  # the script measures it
        "colour = true",  # no validator declares it
    )
    with form.open("a") as handle:
        handle.write("\n[run.deadbeef]\nreadable_in_class = true\n")

    done = ingest(cli, matrix, form, "--by", "ana")
    assert done.returncode == 1
    assert summary(done) == (1, TOTAL - 1, 4)
    opaque = ids[target]
    lines = [line for line in done.stdout.splitlines() if line.startswith("refused: ")]
    assert len(lines) == 4
    assert (
        f"refused: run.{opaque}.note_usable_human: expected true or false, not the string 'yes'"
        in lines
    )
    assert any(
        line.startswith(
            f"refused: run.{opaque}.delivered: 'delivered' is measured by validator 'script'"
        )
        for line in lines
    )
    assert any(line.startswith(f"refused: run.{opaque}.colour: unknown metric") for line in lines)
    assert "refused: run.deadbeef: unknown id: this form's key has no such run" in lines

    # The script's value and file are exactly as the script left them.
    assert (matrix.run_dir(target) / "validation" / "script.json").read_bytes() == script_before
    assert matrix.measures()[target]["metrics"]["delivered"] is True
    result = matrix.result(target)
    assert result["metrics"] == {"readable_in_class": True}
    assert "delivered" not in result["metrics"] and "colour" not in result["metrics"]


def test_correcting_a_manual_value_keeps_the_history(cli, validated: Matrix) -> None:
    matrix = validated
    form = export(cli, matrix)
    target = max(matrix.runs)
    opaque = matrix.opaque_of(form)[target]
    fill(form, opaque, "readable_in_class = true")
    assert ingest(cli, matrix, form, "--by", "ana").returncode == 0
    history = matrix.run_dir(target) / "validation" / "human.history.jsonl"
    lines_before = history.read_text().splitlines() if history.exists() else []

    # The same form again changes nothing, and adds nothing to the history.
    again = ingest(cli, matrix, form, "--by", "ana")
    assert f"0 merged, 1 unchanged, {TOTAL - 1} still pending, 0 refused" in again.stdout
    assert (history.read_text().splitlines() if history.exists() else []) == lines_before

    text = form.read_text().replace("readable_in_class = true", "readable_in_class = false")
    form.write_text(text)
    done = ingest(cli, matrix, form, "--by", "bea")
    assert done.returncode == 0, done.stdout
    result = matrix.result(target)
    assert result["metrics"]["readable_in_class"] is False
    assert result["provenance"]["readable_in_class"]["by"] == "bea"
    replaced = [json.loads(line) for line in history.read_text().splitlines()]
    assert len(replaced) == len(lines_before) + 1
    assert replaced[-1]["metrics"]["readable_in_class"] is True
    assert replaced[-1]["provenance"]["readable_in_class"]["by"] == "ana"


def test_re_validating_never_loses_an_ingested_value(cli, validated_in_place: Matrix) -> None:
    matrix = validated_in_place
    form = export(cli, matrix)
    target = sorted(matrix.runs)[1]
    fill(
        form,
        matrix.opaque_of(form)[target],
        "readable_in_class = false",
        "note_usable_human = true",
    )
    assert ingest(cli, matrix, form, "--by", "ana").returncode == 0
    recorded = matrix.result(target)

    done = cli("validate", matrix.scenario, matrix.root, "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        done.stdout.strip().splitlines()[-1]
        == "6 runs: 1 valid, 5 pending; 12 results unchanged (reused)"
    )
    assert matrix.result(target) == recorded  # up to date: not even re-run

    done = cli("validate", matrix.scenario, matrix.root, "--no-progress", "--force")
    assert done.returncode == 0, done.stdout + done.stderr
    after = matrix.result(target)
    for field in ("metrics", "provenance", "reasons", "state"):
        assert after[field] == recorded[field], field

    # The run changes under the human's answer: no longer the recorded work, so refused
    # (named) — and the answer is kept.
    with (matrix.run_dir(target) / "repo" / "counter.py").open("a") as handle:
        handle.write("# a late change\n")
    done = cli("validate", matrix.scenario, matrix.root, "--no-progress", "--only", "human")
    assert done.returncode == 1 and "(changed counter.py)" in done.stdout, done.stdout + done.stderr
    assert matrix.result(target)["metrics"] == recorded["metrics"]
    # Measured again on purpose (its record removed): the form validator runs again, and keeps it.
    (matrix.run_dir(target) / ".trysquare" / "work.json").unlink()
    done = cli("validate", matrix.scenario, matrix.root, "--no-progress", "--only", "human")
    assert done.returncode == 0, done.stdout + done.stderr
    after = matrix.result(target)
    assert after["context_digest"] != recorded["context_digest"]
    assert after["metrics"] == {"readable_in_class": False, "note_usable_human": True}
    assert after["provenance"] == recorded["provenance"]
    assert after["state"] == "valid"
    assert matrix.measures()[target]["state"] == "valid"


def test_pending_runs_are_reported_as_pending_not_invalid(cli, validated: Matrix) -> None:
    matrix = validated
    rows = matrix.measures()
    assert {row["state"] for row in rows.values()} == {"pending"}
    for row in rows.values():
        assert row["errors"] == []
        assert "readable_in_class" not in row["metrics"]  # unfilled is absent, never false
        assert row["pending"] == ["note_usable_human", "readable_in_class"]
    # The verdict rests on the script's metrics: waiting for a human blocks nothing.
    done = cli("report", matrix.scenario, matrix.root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not publishable" not in done.stdout
    assert "pending" in done.stdout.lower()
    assert not re.search(r"\b0/[1-9]", done.stdout)  # an unfilled metric is never counted as false


def test_a_form_that_does_not_parse_is_one_sentence_naming_the_line(cli, validated: Matrix) -> None:
    matrix = validated
    form = export(cli, matrix)
    opaque = matrix.opaque_of(form)[min(matrix.runs)]
    fill(form, opaque, "readable_in_class = tru")
    line = form.read_text().splitlines().index("readable_in_class = tru") + 1
    done = ingest(cli, matrix, form, "--by", "ana")
    assert done.returncode == 2
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1
    assert message.startswith(f"trysquare: {form}: not valid TOML")
    assert f"line {line}" in message
    assert matrix.result(min(matrix.runs)) == json.loads(
        (matrix.run_dir(min(matrix.runs)) / "validation" / "human.json").read_text()
    )
    assert matrix.result(min(matrix.runs))["metrics"] == {}


def test_a_form_without_its_key_is_refused(cli, validated: Matrix) -> None:
    matrix = validated
    stray = matrix.out / "stray.toml"
    stray.write_text("[run.0123abcd]\nreadable_in_class = true\n")
    done = ingest(cli, matrix, stray, "--by", "ana")
    assert done.returncode == 2
    assert "stray.toml has no key under" in done.stderr


def test_by_defaults_to_the_login_name(cli, validated: Matrix) -> None:
    matrix = validated
    form = export(cli, matrix)
    target = min(matrix.runs)
    fill(form, matrix.opaque_of(form)[target], "readable_in_class = true")
    done = ingest(cli, matrix, form, env={"LOGNAME": "carla-from-env", "USER": "carla-from-env"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert matrix.result(target)["provenance"]["readable_in_class"]["by"] == "carla-from-env"


def test_the_python_api_exports_and_ingests(
    validated: Matrix, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trysquare.runs import discover
    from trysquare.scenario import load_scenario

    from trysquare_form import export_form, ingest_form

    matrix = validated
    scenario = load_scenario(matrix.scenario)
    (experiment,) = discover([matrix.root])
    exported = export_form(scenario, experiment, matrix.out / "api.toml", seed=9)
    assert [t.opaque for t in exported.runs] == matrix.key(exported.form)["order"]
    assert exported.blinding.startswith("form: blind over 3 cells")
    first = exported.runs[0]
    fill(exported.form, first.opaque, "readable_in_class = true", "note_usable_human = true")
    report = ingest_form(scenario, experiment, exported.form, by="demo")
    assert report.summary == f"2 merged, {TOTAL - 2} still pending, 0 refused"
    assert report.exit_code == 0 and report.written == (first.run.id,)
    assert matrix.result(first.run.id)["state"] == "valid"
