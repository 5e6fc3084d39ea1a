"""`trysquare try` (one validator on one run, nothing recorded) and `trysquare init`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from trysquare.testing import build_run

from tests.helpers import pytest_in, write_scenario, write_script

BASE = {"app.py": "x = 1\n", "README.md": "hello\n"}

SCORER = """\
import json, sys
context = json.load(open(sys.argv[1]))
print("looked at", len(context["touched"]), "paths", file=sys.stderr)
touched = sorted(context["touched"])
print(json.dumps({
    "metrics": {"in_scope": touched == ["app.py"], "changed": len(touched)},
    "reasons": {"in_scope": "touched " + ", ".join(touched)},
}))
"""


def snapshot(folder: Path) -> dict[str, tuple[str, int, str]]:
    """Every path below ``folder`` (the clone and its .git included): kind, mode, content."""
    found = {}
    for current, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(current, name)
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                content = "link:" + os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                content = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                content = "folder"
            found[str(path.relative_to(folder))] = (content, st.st_mode, "")
    return found


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    """A scenario with one script validator, and one finished run."""
    write_script(tmp_path / "scn", "score.py", SCORER)
    scenario = write_scenario(
        tmp_path / "scn",
        """
        [[validation]]
        name = "scope"
        mode = "script"
        command = "score.py"
        metrics = ["in_scope", "changed"]

        [[validation]]
        name = "broken"
        mode = "script"
        command = "broken.py"
        metrics = ["ok"]
    """,
    )
    write_script(
        tmp_path / "scn",
        "broken.py",
        "import sys\nprint('it went wrong', file=sys.stderr)\nsys.exit(3)\n",
    )
    run = build_run(
        tmp_path / "exp" / "r1", base=BASE, changes={"app.py": "x = 2\n"}, response="Done.\n"
    )
    return scenario, run.path


def test_try_prints_the_result_and_stderr_and_leaves_the_run_folder_byte_identical(
    cli, project
) -> None:
    scenario, run = project
    before = snapshot(run)
    done = cli("try", scenario, run, "--validator", "scope")
    assert done.returncode == 0, done.stderr
    assert (
        "validator 'scope' (script) on run 'r1' (cell 'default', repetition 1): valid"
        in done.stdout
    )
    assert "in_scope  true  -- touched app.py" in done.stdout
    assert "changed   1" in done.stdout
    assert "looked at 1 paths" in done.stderr  # the validator's stderr, shown
    assert f"nothing was recorded in {run}" in done.stdout
    # No result, history, stderr, archive, diff.patch, .trysquare/ state or lock: nothing at all.
    assert snapshot(run) == before


def test_try_reports_an_invalid_result_with_exit_1_and_records_nothing(cli, project) -> None:
    scenario, run = project
    before = snapshot(run)
    done = cli("try", scenario, run, "--validator", "broken")
    assert done.returncode == 1
    assert ": invalid" in done.stdout
    assert "it went wrong" in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("trysquare: validator 'broken' could not score run 'r1': ")
    assert "code 3" in last
    assert snapshot(run) == before


def test_try_json_and_the_default_validator(cli, project) -> None:
    scenario, run = project
    done = cli("try", scenario, run, "--json")  # default: the first validator
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["validator"] == "scope" and shown["recorded"] is False
    assert shown["metrics"] == {"in_scope": True, "changed": 1}
    assert shown["state"] == "valid" and "looked at 1 paths" in shown["stderr"]


def test_try_on_a_validated_run_keeps_its_records_and_still_guards_the_clone(cli, project) -> None:
    scenario, run = project
    assert cli("validate", scenario, run, "--only", "scope", "--no-progress").returncode == 0
    before = snapshot(run)
    assert cli("try", scenario, run, "--validator", "scope").returncode == 0
    assert snapshot(run) == before  # results, history, work record: as validate left them
    # The clone changed after its first measurement: try refuses it as validate would.
    (run / "repo" / "app.py").write_text("x = 3\n", encoding="utf-8")
    before = snapshot(run)
    done = cli("try", scenario, run, "--validator", "scope")
    assert done.returncode == 1
    assert (
        "changed since its work was recorded at first measurement (changed app.py)" in done.stderr
    )
    assert "trysquare-try-" not in done.stderr  # never the scratch copy
    assert snapshot(run) == before


def test_try_catches_a_validator_writing_into_the_clone(cli, project, tmp_path: Path) -> None:
    scenario, run = project
    write_script(
        tmp_path / "scn",
        "score.py",
        (
            "import json, pathlib, sys\n"
            "context = json.load(open(sys.argv[1]))\n"
            "pathlib.Path(context['repo'], 'stray.txt').write_text('oops')\n"
            "print(json.dumps({'metrics': {'in_scope': True, 'changed': 0}}))\n"
        ),
    )
    # Detection is what is shown (with Landlock the write fails at the write instead).
    done = cli("try", scenario, run, env={"TRYSQUARE_SANDBOX": "off"})
    assert done.returncode == 1
    assert "the measured clone changed during validation (added stray.txt)" in done.stderr
    assert not (run / "validation").exists() and not (run / ".trysquare").exists()


def test_try_refuses_what_it_cannot_run_in_one_sentence(cli, project, tmp_path: Path) -> None:
    scenario, run = project
    unknown = cli("try", scenario, run, "--validator", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (
        "trysquare: scenario.toml has no validator named 'nope' (it has: scope, broken)"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = cli("try", scenario, empty)
    assert missing.returncode == 2 and "no run.toml here" in missing.stderr
    # A planted symlink among trysquare's own files is refused by name, never followed.
    (run / ".trysquare").mkdir()
    (run / ".trysquare" / "work.json").symlink_to(tmp_path / "elsewhere.json")
    planted = cli("try", scenario, run)
    assert planted.returncode == 1
    assert "work.json" in planted.stderr and "Traceback" not in planted.stderr
    assert len(planted.stderr.strip().splitlines()) == 1


def test_try_a_form_shows_what_is_still_to_fill(cli, project, tmp_path: Path) -> None:
    _, run = project
    write_scenario(
        tmp_path / "scn",
        """
        [[validation]]
        mode = "form"
        pieces = ["diff"]
        metrics = ["clear"]
    """,
        name="form.toml",
    )
    before = snapshot(run)
    done = cli("try", tmp_path / "scn" / "form.toml", run)
    assert done.returncode == 0, done.stderr
    assert (
        "validator 'form' (form) on run 'r1' (cell 'default', repetition 1): pending" in done.stdout
    )
    assert "not yet filled: clear" in done.stdout
    assert snapshot(run) == before


def test_init_writes_a_project_whose_test_and_check_pass(cli, tmp_path: Path) -> None:
    target = tmp_path / "mine"
    done = cli("init", target)
    assert done.returncode == 0, done.stderr
    for name in ("scenario.toml", "validator.py", "test_validator.py"):
        assert f"wrote {target / name}" in done.stdout
    assert os.access(target / "validator.py", os.X_OK)
    assert cli("check", target / "scenario.toml").returncode == 0
    # The generated test runs in a pytest of its own: its fixtures come from the installed plugin.
    tests = pytest_in(target, tmp_path / "cache")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "3 passed" in tests.stdout


@pytest.mark.skipif(
    shutil.which("node") is None,
    reason="node is not installed: the Node project's suite cannot run",
)
def test_init_node_writes_a_node_project_whose_test_and_check_pass(cli, tmp_path: Path) -> None:
    target = tmp_path / "mine"
    done = cli("init", "--node", target)
    assert done.returncode == 0, done.stderr
    scenario = (target / "scenario.toml").read_text(encoding="utf-8")
    assert 'test_command = "node --test"' in scenario and "__pycache__" not in scenario
    assert 'SCOPE = frozenset({"src/add.js"})' in (target / "validator.py").read_text()
    assert os.access(target / "validator.py", os.X_OK)
    assert cli("check", target / "scenario.toml").returncode == 0
    tests = pytest_in(target, tmp_path / "cache")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "3 passed" in tests.stdout  # the `npm test`-redefining run among them


def test_init_python_is_the_default(cli, tmp_path: Path) -> None:
    assert cli("init", "--python", tmp_path / "a").returncode == 0
    assert cli("init", tmp_path / "b").returncode == 0
    for name in ("scenario.toml", "validator.py", "test_validator.py"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert "python3 -m unittest" in (tmp_path / "a" / "scenario.toml").read_text()


def test_init_refuses_to_replace_a_file_and_writes_nothing(cli, tmp_path: Path) -> None:
    (tmp_path / "validator.py").write_text("mine\n", encoding="utf-8")
    done = cli("init", cwd=tmp_path)  # DIR defaults to the current folder
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "trysquare: validator.py exists already; init never replaces a file "
        "(move it, or name another folder)"
    )
    assert (tmp_path / "validator.py").read_text(encoding="utf-8") == "mine\n"
    assert not (tmp_path / "scenario.toml").exists()


MULTILINE = """\
import json, sys
reason = "2 tests failed:\\nFAILED test_a.py::test_one\\n  assert 1 == 2\\x1b[31m"
print(json.dumps({"metrics": {"suite_ok": False}, "reasons": {"suite_ok": reason}}))
"""


def test_try_keeps_a_reasons_line_breaks(cli, tmp_path: Path) -> None:
    # Issue 30: a pytest traceback as a reason reads as lines, not as one line of \\x0a.
    write_script(tmp_path / "scn", "suite.py", MULTILINE)
    scenario = write_scenario(
        tmp_path / "scn",
        """
        [[validation]]
        name = "suite"
        mode = "script"
        command = "suite.py"
        metrics = ["suite_ok"]
    """,
    )
    run = build_run(tmp_path / "exp" / "r1", base=BASE, changes={"app.py": "x = 2\n"})
    done = cli("try", scenario, run.path)
    assert done.returncode == 0, done.stderr
    assert "\\x0a" not in done.stdout
    assert (
        "  suite_ok  false  -- 2 tests failed:\n      FAILED test_a.py::test_one\n" in done.stdout
    )
    assert "        assert 1 == 2\\x1b[31m\n" in done.stdout  # other controls still escaped
