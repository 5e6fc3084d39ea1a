"""The shipped examples run against real git runs of tests/fixtures/tiny, as the script mode runs them.

The page's validator (examples/validator.py), its shorter snippet exactly as written
(examples/minimal_validator.py) and the by-hand one (examples/by_hand.py) are each
executed as a subprocess through their shebang and run bit, on a context printed by
``trysquare context`` for the run, so a document's example cannot go stale.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from trysquare.testing.builders import run_from_folders

from tests.conftest import run_in_process

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TINY = ROOT / "tests" / "fixtures" / "tiny"
PYTHON = sys.executable
# The interpreter running these tests is the one `#!/usr/bin/env python3` must find,
# as it is under `uv run`.
ENV = {**os.environ, "PATH": f"{Path(PYTHON).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def make_run(
    tmp_path: Path,
    *,
    change: bool = True,
    ran_suite: bool = True,
    extra: dict[str, str] | None = None,
    validator: str = "validator.py",
    metrics: tuple[str, ...] = ("delivered", "in_scope", "tests"),
    test_command: str | None = f"{PYTHON} -m unittest",
) -> Path:
    """A real run of the tiny task and the context ``trysquare context`` prints for it."""
    run = run_from_folders(
        tmp_path / "runs" / "a1",
        TINY / "base",
        TINY / "change" if change else None,
        commands=[[PYTHON, "-m", "unittest", "-q"]] if ran_suite else [],
        cell="fix",
    )
    if extra:
        run.repo.write_files(extra)
    lines = ["[task]", 'artefacts = ["__pycache__"]']
    if test_command is not None:
        lines.append(f"test_command = {json.dumps(test_command)}")
    lines += [
        "[[validation]]",
        'mode = "script"',
        f"command = {json.dumps(str(EXAMPLES / validator))}",
        f"metrics = {json.dumps(list(metrics))}",
    ]
    scenario = tmp_path / "scenario.toml"
    scenario.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run_in_process(["context", str(scenario), str(run.path)], cwd=None, env=ENV)
    assert done.returncode == 0, done.stderr
    context = tmp_path / "context.json"
    context.write_text(done.stdout, encoding="utf-8")
    return context


def score(script: str, context: Path, tmp_path: Path) -> tuple[int, dict[str, Any] | None, str]:
    """Run an example the way the script mode does: executed, one argument, a scratch cwd."""
    scratch = tmp_path / "cwd"
    scratch.mkdir(exist_ok=True)
    done = subprocess.run(
        [str(EXAMPLES / script), str(context)],
        cwd=scratch,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
        check=False,
    )
    printed = json.loads(done.stdout) if done.returncode == 0 else None
    return done.returncode, printed, done.stderr


@pytest.mark.parametrize(
    "script", ["validator.py", "minimal_validator.py", "by_hand.py", "process_validator.py"]
)
def test_examples_are_executable_scripts(script: str) -> None:
    path = EXAMPLES / script
    assert os.access(path, os.X_OK), f"{script} lost its run bit"
    assert path.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")


def test_an_agent_that_checked_itself_is_in_scope(tmp_path: Path) -> None:
    context = make_run(tmp_path)
    touched = set(json.loads(context.read_text())["touched"])
    # The precondition of the page's warning: the agent's own test run left bytecode.
    assert any("__pycache__/" in path for path in touched), touched
    code, printed, err = score("validator.py", context, tmp_path)
    assert code == 0, err
    assert printed == {
        "metrics": {
            "delivered": True,
            "in_scope": True,
            "tests": True,
            "touched": sorted(touched),  # recorded whole: the filter only decides verdicts
        },
        "reasons": {},
    }


def test_work_outside_the_scope_is_named(tmp_path: Path) -> None:
    context = make_run(tmp_path, extra={"README.md": "# rewritten\n", "notes/plan.md": "x\n"})
    code, printed, err = score("validator.py", context, tmp_path)
    assert code == 0, err
    assert printed is not None
    assert printed["metrics"]["in_scope"] is False
    assert printed["metrics"]["delivered"] is True
    assert printed["reasons"] == {"in_scope": "also touched README.md, notes/plan.md"}


def test_bytecode_alone_is_not_a_delivery(tmp_path: Path) -> None:
    # The agent only ran the suite: its by-products are all it left.
    context = make_run(tmp_path, change=False)
    assert json.loads(context.read_text())["touched"]  # something was touched...
    code, printed, err = score("validator.py", context, tmp_path)
    assert code == 0, err
    assert printed is not None
    assert printed["metrics"]["delivered"] is False  # ...but nothing was delivered
    assert printed["metrics"]["in_scope"] is True
    assert printed["metrics"]["tests"] is False
    assert "test_remove_unseen_word_stays_at_zero" in printed["reasons"]["tests"]
    assert set(printed["reasons"]) == {"tests"}


def test_the_short_snippet_as_written_counts_bytecode_as_work(tmp_path: Path) -> None:
    # The page's shorter snippet does not subtract artefacts: on a run whose agent
    # checked itself, it lands on the failure the page warns about.
    context = make_run(tmp_path)
    code, printed, err = score("minimal_validator.py", context, tmp_path)
    assert code == 0, err
    assert printed is not None
    assert printed["metrics"]["in_scope"] is False
    assert printed["reasons"]["in_scope"].startswith("also touched __pycache__/")
    assert (printed["metrics"]["delivered"], printed["metrics"]["tests"]) == (True, True)


def test_the_short_snippet_as_written_on_a_clean_run(tmp_path: Path) -> None:
    context = make_run(tmp_path, ran_suite=False)
    code, printed, err = score("minimal_validator.py", context, tmp_path)
    assert code == 0, err
    assert printed == {
        "metrics": {"delivered": True, "in_scope": True, "tests": True, "touched": ["counter.py"]},
        "reasons": {},
    }


def test_the_by_hand_validator(tmp_path: Path) -> None:
    context = make_run(tmp_path, validator="by_hand.py", metrics=("has_readme",))
    code, printed, err = score("by_hand.py", context, tmp_path)
    assert code == 0, err
    assert printed == {"metrics": {"has_readme": True}, "reasons": {}}
    (Path(json.loads(context.read_text())["repo"]) / "README.md").unlink()
    assert score("by_hand.py", context, tmp_path)[1] == {
        "metrics": {"has_readme": False},
        "reasons": {},
    }


def test_a_declared_metric_the_example_lacks_is_refused(tmp_path: Path) -> None:
    context = make_run(tmp_path, metrics=("delivered", "in_scope", "tests", "note_usable"))
    done = subprocess.run(
        [str(EXAMPLES / "validator.py"), str(context)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "'note_usable'" in done.stderr


def test_no_declared_suite_is_refused_not_guessed(tmp_path: Path) -> None:
    context = make_run(tmp_path, test_command=None, metrics=("delivered", "in_scope"))
    code, printed, err = score("validator.py", context, tmp_path)
    assert code == 1 and printed is None
    assert "declares no test_command" in err


PROCESS = ("note_words", "fixed_first", "wrote_counter")


def test_the_process_example_leaves_unknown_inputs_unjudged(tmp_path: Path) -> None:
    # No response and no session were recorded: each metric reading them is unjudged, with
    # why, and the run stays valid (the example has no None check to forget).
    context = make_run(tmp_path, validator="process_validator.py", metrics=PROCESS)
    code, printed, err = score("process_validator.py", context, tmp_path)
    assert code == 0, err
    assert printed is not None
    assert printed["metrics"] == {"note_words": None, "fixed_first": None, "wrote_counter": None}
    assert printed["reasons"]["note_words"] == "no response was recorded"
    # A response recorded is read as it is.
    note = tmp_path / "response.md"
    note.write_text("Fixed the counter; the suite passes.\n", encoding="utf-8")
    data = json.loads(context.read_text(encoding="utf-8"))
    context.write_text(json.dumps({**data, "response": str(note)}), encoding="utf-8")
    assert score("process_validator.py", context, tmp_path)[1]["metrics"]["note_words"] == 6
