"""``form export --cell/--run``: a form for some cells only (issue 16.2)."""

from __future__ import annotations

from tests.form.conftest import Matrix


def test_export_only_the_chosen_runs(cli, matrix: Matrix) -> None:
    form = matrix.out / "quokka.toml"
    done = cli(
        "form",
        "export",
        matrix.scenario,
        matrix.root,
        "-o",
        form,
        "--seed",
        "1",
        "--cell",
        "quokkacell / *",
    )
    assert done.returncode == 0, done.stderr
    exported = {entry["id"] for entry in matrix.key(form)["runs"].values()}
    assert exported == {
        run for run, cell in matrix.runs.items() if cell.startswith("quokkacell / ")
    }
    assert len(exported) == 4

    one = min(matrix.runs)
    done = cli(
        "form", "export", matrix.scenario, matrix.root, "-o", matrix.out / "one.toml", "--run", one
    )
    assert done.returncode == 0, done.stderr
    assert [entry["id"] for entry in matrix.key(matrix.out / "one.toml")["runs"].values()] == [one]

    wrong = cli(
        "form",
        "export",
        matrix.scenario,
        matrix.root,
        "-o",
        matrix.out / "x.toml",
        "--run",
        "nope*",
    )
    assert wrong.returncode == 2 and "--run nope*: matches no run" in wrong.stderr
    assert not (matrix.out / "x.toml").exists()
