"""The suite is paid once: run.tests() outcomes recorded per run and reused under validate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from trysquare import _suitecache
from trysquare.testing.builders import run_from_folders

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
PYTHON = sys.executable

VALIDATOR = f"""#!{PYTHON}
from trysquare.assay import validator

@validator
def evaluate(run):
    return {{"tests": run.tests}}

if __name__ == "__main__":
    evaluate.cli()
"""


def make_matrix(root: Path, *, fixed: bool = True, validator: str = VALIDATOR) -> tuple[Path, Path]:
    """A scenario whose one script validator calls run.tests(), and one real tiny run."""
    run = run_from_folders(root / "runs" / "r1", TINY / "base", TINY / "change" if fixed else None)
    score = root / "score.py"
    score.write_text(validator, encoding="utf-8")
    score.chmod(0o755)
    scenario = root / "scenario.toml"
    scenario.write_text(
        f"[task]\ntest_command = {json.dumps(PYTHON + ' -m unittest')}\n\n"
        "[[validation]]\nname = 'score'\nmode = 'script'\ncommand = 'score.py'\nmetrics = ['tests']\n",
        encoding="utf-8",
    )
    return scenario, run.path


def result(run_dir: Path) -> dict:
    return json.loads((run_dir / "validation" / "score.json").read_text(encoding="utf-8"))


def reused(document: dict) -> bool:
    return any("reused the suite's outcome" in note for note in document.get("notes", []))


def test_a_replay_and_an_edited_validator_reuse_the_suite_and_say_so(tmp_path: Path, cli) -> None:
    scenario, run_dir = make_matrix(tmp_path)
    first = cli("validate", scenario, run_dir.parent, "--no-progress")
    assert first.returncode == 0, first.stderr
    assert result(run_dir)["metrics"] == {"tests": True}
    assert not reused(result(run_dir))
    assert len(list((run_dir / ".trysquare" / "suite").glob("*.json"))) == 1

    again = cli("validate", scenario, run_dir.parent, "--no-progress", "--replay", "--force")
    assert again.returncode == 0, again.stderr
    assert result(run_dir)["metrics"] == {"tests": True}
    assert reused(result(run_dir))

    # Fixing the validator's own code (not the suite's inputs) reuses the suite too.
    score = scenario.parent / "score.py"
    score.write_text(score.read_text(encoding="utf-8") + "# a fixed signature\n", encoding="utf-8")
    edited = cli("validate", scenario, run_dir.parent, "--no-progress")
    assert edited.returncode == 0, edited.stderr
    assert reused(result(run_dir))

    forced = cli("validate", scenario, run_dir.parent, "--no-progress", "--rerun-suite")
    assert forced.returncode == 0, forced.stderr
    assert result(run_dir)["metrics"] == {"tests": True}
    assert not reused(result(run_dir))


def test_the_key_follows_the_clone_content_and_the_suite() -> None:
    work = {"base": "a" * 40, "touched": {"counter.py": "sha256:1:-"}}
    context = {
        "test_command": "python -m unittest",
        "prepare": [],
        "etalon": {"tag": "v1", "checkout": "/e"},
    }
    key = _suitecache.suite_key(work, context, ())
    assert key == _suitecache.suite_key(dict(work), dict(context), ())
    changed_file = {**work, "touched": {"counter.py": "sha256:2:-"}}
    new_file = {**work, "touched": {**work["touched"], "extra.py": "sha256:3:-"}}
    other_base = {**work, "base": "b" * 40}
    others = [
        _suitecache.suite_key(changed_file, context, ()),
        _suitecache.suite_key(new_file, context, ()),
        _suitecache.suite_key(other_base, context, ()),
        _suitecache.suite_key(work, {**context, "test_command": "pytest"}, ()),
        _suitecache.suite_key(work, {**context, "prepare": ["make"]}, ()),
        _suitecache.suite_key(work, {**context, "etalon": {"tag": "v2", "checkout": "/e"}}, ()),
        _suitecache.suite_key(work, context, ("NPM_TOKEN",)),
    ]
    assert key not in others
    assert len(set(others)) == len(others)
