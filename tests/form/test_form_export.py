"""``trysquare form export``: one blind, shuffled table per run, and the key kept apart."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.form.conftest import CELLS, FORM_METRICS, Matrix

LEAKS = ("quokka", "wombat", "runid", *CELLS)


def export(cli, matrix: Matrix, name: str = "FORM.toml", *extra: str):
    form = matrix.out / name
    done = cli("form", "export", matrix.scenario, matrix.root, "-o", form, *extra)
    return form, done


def test_export_writes_one_table_per_run_that_parses_before_anything_is_filled(
    cli, matrix: Matrix
) -> None:
    form, done = export(cli, matrix, "FORM.toml", "--seed", "7")
    assert done.returncode == 0, done.stderr
    assert "form: blind over 3 cells (pieces: diff, response, prompt)" in done.stdout
    text = form.read_text()
    parsed = tomllib.loads(text)
    assert set(parsed) == {"form", "run"}  # which export it is, and the tables
    assert re.fullmatch(r"FORM-[0-9a-f]{12}", parsed["form"])
    assert len(parsed["run"]) == len(matrix.runs)
    for opaque, table in parsed["run"].items():
        assert re.fullmatch(r"[0-9a-f]{8}", opaque)
        # Only the pieces: every metric is an absent key until a human writes it.
        assert table == {
            "diff": f"FORM.d/{opaque}/diff.patch",
            "response": f"FORM.d/{opaque}/response.md",
            "prompt": f"FORM.d/{opaque}/prompt.md",
        }
        for piece in table.values():
            assert (form.parent / piece).is_file()
        block = text.split(f"[run.{opaque}]\n", 1)[1].split("\n[", 1)[0]
        for metric in FORM_METRICS:
            assert f"# {metric} = true|false" in block
    # Every line is a comment, the export's id, a table header, a piece key or blank: prose
    # is commented.
    for line in text.splitlines():
        assert (
            not line
            or line.startswith("#")
            or re.fullmatch(r'form = "FORM-[0-9a-f]{12}"', line)
            or re.fullmatch(r"\[run\.[0-9a-f]{8}\]", line)
            or re.fullmatch(
                r'(diff|response|prompt) = "FORM\.d/[0-9a-f]{8}/[a-z]+\.(patch|md)"', line
            )
        ), line
    # The seed stays in the key (amendment of 2026-11-30): the form never names it.
    assert "seed = 7" not in text and "--seed 7" not in text


def test_the_key_goes_under_the_experiment_and_never_into_the_form(cli, matrix: Matrix) -> None:
    form, done = export(cli, matrix, "FORM.toml", "--seed", "3")
    assert done.returncode == 0, done.stderr
    key = matrix.key(form)
    assert key["validation"] == "human"
    assert key["seed"] == 3
    assert sorted(e["id"] for e in key["runs"].values()) == sorted(matrix.runs)
    assert {e["id"]: e["cell"] for e in key["runs"].values()} == matrix.runs
    assert list(tomllib.loads(form.read_text())["run"]) == key["order"]
    assert not list(form.parent.glob("*.json"))
    assert not list((form.parent / "FORM.d").rglob("*.json"))


def test_no_cell_name_and_no_run_id_anywhere_in_the_form_or_its_pieces(cli, matrix: Matrix) -> None:
    form, done = export(cli, matrix)
    assert done.returncode == 0, done.stderr
    texts = {form: form.read_text()}
    pieces = [p for p in (form.parent / "FORM.d").rglob("*")]
    assert pieces
    for path in pieces:
        if path.is_file():
            texts[path] = path.read_text()
    for path, text in texts.items():
        where = f"{path.relative_to(form.parent)}\n{text}"
        for leak in LEAKS:
            assert leak not in where, f"{leak!r} leaks in {path}"
    # The pieces are the runs' own: the diff a human reads is the one the run left.
    key = matrix.key(form)
    for opaque, entry in key["runs"].items():
        run = matrix.run_dir(entry["id"])
        assert (form.parent / "FORM.d" / opaque / "diff.patch").read_text() == (
            run / "diff.patch"
        ).read_text()
        assert "+    return a + b" in (form.parent / "FORM.d" / opaque / "diff.patch").read_text()
        assert (form.parent / "FORM.d" / opaque / "response.md").read_text() == (
            run / "response.md"
        ).read_text()
        assert (form.parent / "FORM.d" / opaque / "prompt.md").read_text() == "Fix the counter.\n"


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_one_seed_gives_one_form_two_seeds_two_orders(cli, matrix: Matrix) -> None:
    first, _ = export(cli, matrix, "first.toml", "--seed", "11")
    again, _ = export(cli, matrix, "again.toml", "--seed", "11")
    other, _ = export(cli, matrix, "other.toml", "--seed", "12")
    # The same form but for its export id: each export has its own key.
    without_id = lambda form: re.sub(r'(?m)^form = ".*"$', "", form.read_text())
    assert without_id(first).replace("again", "first") == without_id(again).replace(
        "again", "first"
    )
    assert matrix.key(first)["form_id"] != matrix.key(again)["form_id"]
    assert _tree(matrix.out / "first.d") == _tree(matrix.out / "again.d")
    assert matrix.key(first)["order"] == matrix.key(again)["order"]
    order = lambda form: [matrix.key(form)["runs"][o]["id"] for o in matrix.key(form)["order"]]
    assert order(first) == order(again)
    assert order(first) != order(other)
    assert set(matrix.key(first)["runs"]).isdisjoint(matrix.key(other)["runs"])
    # Not merely sorted: the order is a shuffle of the runs.
    assert order(first) != sorted(matrix.runs) or order(other) != sorted(matrix.runs)


def test_same_seed_same_name_is_byte_identical_and_the_default_seed_is_recorded(
    cli, matrix: Matrix
) -> None:
    form, done = export(cli, matrix)
    assert done.returncode == 0, done.stderr
    seed = str(matrix.key(form)["seed"])  # recorded in the key, never in the form
    before = form.read_bytes(), _tree(matrix.out / "FORM.d"), matrix.key(form)["order"]
    refused = cli("form", "export", matrix.scenario, matrix.root, "-o", form, "--seed", seed)
    assert refused.returncode == 2
    assert "exists already" in refused.stderr and "--force" in refused.stderr
    _, done = export(cli, matrix, "FORM.toml", "--seed", seed, "--force")
    assert done.returncode == 0, done.stderr
    assert (form.read_bytes(), _tree(matrix.out / "FORM.d"), matrix.key(form)["order"]) == before


def test_only_runs_with_something_pending_unless_all(cli, matrix: Matrix) -> None:
    from tests.form.conftest import fill

    form, _ = export(cli, matrix, "FORM.toml", "--seed", "1")
    done_id = min(matrix.runs)
    opaque = matrix.opaque_of(form)[done_id]
    fill(form, opaque, "readable_in_class = true", "note_usable_human = false")
    assert cli("form", "ingest", matrix.scenario, matrix.root, form, "--by", "ana").returncode == 0

    rest, done = export(cli, matrix, "rest.toml", "--seed", "1")
    assert done.returncode == 0, done.stderr
    ids = {e["id"] for e in matrix.key(rest)["runs"].values()}
    assert ids == set(matrix.runs) - {done_id}

    every, _ = export(cli, matrix, "every.toml", "--seed", "1", "--all")
    opaque = matrix.opaque_of(every)[done_id]
    block = every.read_text().split(f"[run.{opaque}]\n", 1)[1].split("\n[", 1)[0]
    assert "# readable_in_class = true|false    (recorded: true;" in block
    assert "# note_usable_human = true|false    (recorded: false;" in block
    assert tomllib.loads(every.read_text())["run"][opaque].keys() == {"diff", "response", "prompt"}


def test_a_prompt_that_names_the_treatment_is_said(cli, tmp_path: Path, make_run) -> None:
    from tests.helpers import write_scenario

    for cell, prompt in (("a", "Fix it.\n"), ("b", "Fix it, and run the suite first.\n")):
        builder = make_run(f"r{cell}", cell=cell, prompt=prompt)
        builder.base({"x.py": "x = 1\n"})
        builder.repo.write("x.py", "x = 2\n")
        builder.finish(response="done\n")
    scenario = write_scenario(
        tmp_path / "scn",
        """\
        [[validation]]
        mode = "form"
        pieces = ["prompt", "diff"]
        metrics = ["clear"]
    """,
    )
    done = cli("form", "export", scenario, tmp_path / "exp", "-o", tmp_path / "f.toml")
    assert done.returncode == 0, done.stderr
    assert "! form is only partially blind: prompt varies between cells" in done.stdout


def test_refusals_at_export(cli, matrix: Matrix, tmp_path: Path) -> None:
    from tests.helpers import write_scenario

    done = cli(
        "form",
        "export",
        matrix.scenario,
        matrix.root,
        "-o",
        matrix.out / "f.toml",
        "--only",
        "script",
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "trysquare: validator 'script' of scenario.toml is a script, not a form"
    )
    done = cli(
        "form",
        "export",
        matrix.scenario,
        matrix.root,
        "-o",
        matrix.out / "f.toml",
        "--only",
        "nope",
    )
    assert done.returncode == 2 and "no form validator named 'nope'" in done.stderr
    done = cli(
        "form", "export", matrix.scenario, tmp_path / "empty-nowhere", "-o", matrix.out / "f.toml"
    )
    assert done.returncode == 2
    bad = write_scenario(
        tmp_path / "bad",
        """\
        [[validation]]
        mode = "form"
        pieces = ["diff", "transcript"]
        metrics = ["clear"]
    """,
    )
    done = cli("check", bad)
    assert done.returncode == 2
    assert "pieces: unknown piece 'transcript'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (matrix.out / "f.toml").exists()
