"""A matrix of several cells, built with real git, and the helpers a human's edits need.

Cell names and run ids are made of words that cannot turn up by accident in a
diff, a response, a hex id or a form's prose, so finding one is a leak.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import attrs
import pytest
from trysquare.testing import build_matrix

from tests.helpers import write_scenario, write_script

CELLS = ("quokkacell / high", "quokkacell / low", "wombatcell")
RUNS_PER_CELL = 2
FORM_METRICS = ("readable_in_class", "note_usable_human")

SCENARIO = """\
[scenario]
name = "form-matrix"

[[validation]]
mode = "script"
command = "score.py"
metrics = ["delivered", "in_scope"]

[[validation]]
name = "human"
mode = "form"
pieces = ["diff", "response", "prompt"]
metrics = ["readable_in_class", "note_usable_human"]

[verdict]
criteria = ["in_scope"]
"""

SCORE = """\
import json, sys
context = json.load(open(sys.argv[1]))
json.dump({"metrics": {"delivered": bool(context["touched"]), "in_scope": True}, "reasons": {}}, sys.stdout)
"""


@attrs.frozen
class Matrix:
    root: Path  # the experiment folder: PATH on the command line
    scenario: Path
    runs: dict[str, str]  # run id -> cell
    out: Path  # where forms are written: outside the experiment

    def run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    def result(self, run_id: str, name: str = "human") -> dict | None:
        path = self.run_dir(run_id) / "validation" / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def key(self, form: Path) -> dict:
        """The form's key: named after the export id the form carries (its stem, for a form
        without one)."""
        import tomllib

        form_id = tomllib.loads(form.read_text(encoding="utf-8-sig")).get("form", form.stem)
        return json.loads((self.root / ".trysquare" / "forms" / f"{form_id}.key.json").read_text())

    def opaque_of(self, form: Path) -> dict[str, str]:
        """run id -> opaque id, read from the key (as the tests' oracle only)."""
        key = self.key(form)
        return {entry["id"]: opaque for opaque, entry in key["runs"].items()}

    def measures(self) -> dict[str, dict]:
        rows = json.loads((self.root / "measures.json").read_text())
        return {row["id"]: row for row in rows}


def _id(cell: str, repetition: int) -> str:
    animal = cell.split()[0].removesuffix("cell")
    level = cell.split()[-1] if "/" in cell else "flat"
    return f"runid-{animal}-{level}-{repetition}"


@pytest.fixture
def matrix(tmp_path: Path) -> Matrix:
    return build_form_matrix(tmp_path)


def build_form_matrix(tmp_path: Path) -> Matrix:
    """The matrix's experiment (``exp``), scenario (``scn``) and form folder (``out``) under ``tmp_path``."""
    root = tmp_path / "exp"
    runs = {
        _id(cell, repetition): cell for cell in CELLS for repetition in range(1, RUNS_PER_CELL + 1)
    }
    # Each run's diff and response are its own: a form that mixed two runs up would show.
    build_matrix(
        root,
        [(run_id, cell, int(run_id.rsplit("-", 1)[1])) for run_id, cell in runs.items()],
        base={"counter.py": "def add(a, b):\n    return a - b\n"},
        changes=lambda _id, cell, repetition: {
            "counter.py": f"def add(a, b):\n    return a + b  # variant {CELLS.index(cell)}{repetition}\n"
        },
        response=lambda _id, _cell, repetition: (
            f"I fixed add() in counter.py (attempt {repetition}).\n"
        ),
        prompt="Fix the counter.\n",
    )
    scenario = write_scenario(tmp_path / "scn", SCENARIO)
    write_script(tmp_path / "scn", "score.py", SCORE)
    out = tmp_path / "out"
    out.mkdir()
    return Matrix(root=root, scenario=scenario, runs=runs, out=out)


def copy_matrix(matrix: Matrix, tmp_path: Path) -> Matrix:
    """A copy of a built (and perhaps validated) matrix under ``tmp_path``, laid out as
    :func:`build_form_matrix` lays it out: its clones, results and records are copied whole
    (a copy of a real run is a real run), so a test may change it freely."""
    top = matrix.root.parent
    for name in ("exp", "scn", "out"):
        shutil.copytree(top / name, tmp_path / name, symlinks=True)
    return Matrix(
        root=tmp_path / "exp",
        scenario=tmp_path / "scn" / matrix.scenario.name,
        runs=dict(matrix.runs),
        out=tmp_path / "out",
    )


def fill(form: Path, opaque: str, *lines: str) -> None:
    """Edit the form as a human would: write answer lines inside one run's table.

    A line whose metric has a commented hint replaces that hint; any other line
    (a hand-added key) goes at the end of the table.
    """
    text = form.read_text(encoding="utf-8").splitlines()
    start = text.index(f"[run.{opaque}]")
    end = next((i for i in range(start + 1, len(text)) if text[i].startswith("[")), len(text))
    block = text[start:end]
    for line in lines:
        metric = line.split("=")[0].strip()
        hint = next(
            (i for i, l in enumerate(block) if re.match(rf"# {re.escape(metric)} = ", l)), None
        )
        if hint is None:
            while block and block[-1] == "":
                block.pop()
            block += [line, ""]
        else:
            block[hint] = line
    text[start:end] = block
    form.write_text("\n".join(text) + "\n", encoding="utf-8")


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout
