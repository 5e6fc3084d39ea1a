"""The clone guard alone (the sandbox switched off): every stray write is found and named.

Each test is one attack on the measured clone by a validator, the agent's test
code, or a process left behind; with ``TRYSQUARE_SANDBOX=off`` nothing prevents
the write, so the run must come out invalid with the path named — and the stray
write must never become part of the agent's work.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from trysquare import clone_guard

from tests.helpers import write_scenario, write_script
from tests.security.guard_fixtures import attempts, build_run, result, run_validate, scenario

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.clone_guard",)


@pytest.fixture(autouse=True)
def _detection_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRYSQUARE_SANDBOX", "off")
    # The jail would hide the etalon cache from the agent's test altogether (test_jail.py).
    monkeypatch.setenv("TRYSQUARE_JAIL", "off")


def _invalid_naming(tmp_path: Path, body: str, *paths: str) -> str:
    run = build_run(tmp_path)
    summary, out = run_validate(scenario(tmp_path / "s", body), run.path.parents[1])
    assert set(attempts(run).values()) == {"wrote"}  # nothing prevented it here
    recorded = result(run)
    assert recorded["state"] == "invalid", out
    for path in paths:
        assert path in recorded["error"] and path in out
    assert summary.exit_code == 1
    return recorded["error"]


def test_guard_validator_appending_to_a_file_the_agent_changed(tmp_path: Path) -> None:
    # `git status` says "M counter.py" before and after: only the picture sees it.
    error = _invalid_naming(
        tmp_path,
        'attempt("append", lambda: append(os.path.join(repo, "counter.py")))\n',
        "counter.py",
    )
    assert "changed during validation (changed counter.py)" in error


def test_guard_validator_writing_an_ignored_file(tmp_path: Path) -> None:
    _invalid_naming(
        tmp_path,
        'attempt("ignored", lambda: append(os.path.join(repo, "debug.log")))\n',
        "added debug.log",
    )


def test_guard_validator_editing_git_config(tmp_path: Path) -> None:
    body = 'attempt("config", lambda: append(os.path.join(repo, ".git", "config"), "[core]\\n\\tfsmonitor = evil\\n"))\n'
    _invalid_naming(tmp_path, body, "changed .git/config")


def test_guard_validator_adding_a_hook(tmp_path: Path) -> None:
    body = 'attempt("hook", lambda: append(os.path.join(repo, ".git", "hooks", "post-checkout"), "#!/bin/sh\\n"))\n'
    _invalid_naming(tmp_path, body, "added .git/hooks/post-checkout")


def test_guard_setsid_grandchild_writing_after_the_validator_exits(tmp_path: Path) -> None:
    run = build_run(tmp_path)
    stray = run.repo.path / "stray.txt"
    go = tmp_path / "go"
    late = tmp_path / "late.py"
    # Writes the stray file once the test says go (validate has returned), or after 60 s.
    late.write_text(
        "import os, sys, time\n"
        "deadline = time.time() + 60\n"
        f"while not os.path.exists({str(go)!r}) and time.time() < deadline:\n"
        "    time.sleep(0.02)\n"
        "open(sys.argv[1], 'w').write('x')\n"
    )
    # A detached grandchild (new session, pipes closed) that writes once validation is over.
    body = (
        f"subprocess.Popen([sys.executable, {str(late)!r}, os.path.join(repo, 'stray.txt')], start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "attempts['left behind'] = 'wrote'\n"
    )
    experiment = run.path.parents[1]
    scenario_path = scenario(tmp_path / "s", body)
    run_validate(scenario_path, experiment)
    go.touch()
    deadline = time.monotonic() + 20
    while not stray.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert stray.exists()  # nothing prevented it: detection only
    _, out = run_validate(scenario_path, experiment, force=True)
    recorded = result(run)
    assert recorded["state"] == "invalid" and "added stray.txt" in recorded["error"], out
    # Never read as the agent's work: the context keeps what was recorded... and stays refused.
    again, _ = run_validate(scenario_path, experiment)
    assert result(run)["state"] == "invalid" and again.exit_code == 1


def test_guard_suite_editing_the_etalon_cache(tmp_path: Path) -> None:
    run = build_run(tmp_path)
    run.repo.write("tests/test_plant.py", PLANTING_TEST)
    folder = tmp_path / "s"
    write_script(folder, "suite.py", SUITE_VALIDATOR)
    scenario_path = write_scenario(folder, SUITE_SCENARIO)
    _, out = run_validate(scenario_path, run.path.parents[1])
    recorded = json.loads((run.path / "validation" / "suite.json").read_text())
    assert recorded["state"] == "invalid", out
    assert "the etalon checkout" in recorded["error"] and "added planted.py" in recorded["error"]


def test_guard_a_planted_work_record_cannot_hide_work(tmp_path: Path) -> None:
    run = build_run(tmp_path)
    # The agent leaves a record saying it touched nothing.
    planted = run.path / ".trysquare" / "work.json"
    planted.parent.mkdir(parents=True)
    planted.write_text(
        json.dumps(
            {"version": 1, "base": None, "touched": {}, "git": {}, "root": [0, 0], "picture": {}}
        )
    )
    run_validate(scenario(tmp_path / "s", ""), run.path.parents[1])
    recorded = result(run)
    assert recorded["state"] == "invalid"
    assert "counter.py" in recorded["error"] and "notes.txt" in recorded["error"]
    context = json.loads((run.path / "validation" / "attack" / "context.json").read_text())
    assert context["touched"] == ["counter.py", "notes.txt"]  # from git, never from the record


# The agent's own test: plants a file in every etalon checkout it can find, and
# passes only when every such write fails.
PLANTING_TEST = """
import glob, os, unittest

class Plant(unittest.TestCase):
    def test_plant(self):
        found = glob.glob(os.path.join(os.environ["XDG_CACHE_HOME"], "trysquare", "etalons", "*", ""))
        outcomes = []
        for folder in found:
            try:
                with open(os.path.join(folder, "planted.py"), "w") as handle:
                    handle.write("x = 'planted'\\n")
                outcomes.append("wrote " + folder)
            except OSError as error:
                outcomes.append(f"failed errno {error.errno}")
        self.assertTrue(found)
        self.assertEqual([o for o in outcomes if o.startswith("wrote")], [])
"""

SUITE_VALIDATOR = """
from trysquare.assay import validator

@validator
def evaluate(run):
    return {"tests": run.tests}

raise SystemExit(evaluate.cli())
"""

SUITE_SCENARIO = """
[task]
test_command = "python3 -m unittest discover -s tests -v"

[[validation]]
mode = "script"
name = "suite"
command = "suite.py"
metrics = ["tests"]
timeout = 120
"""


def test_guard_validator_forging_another_runs_result(tmp_path: Path) -> None:
    first, second = build_run(tmp_path, "r1"), build_run(tmp_path, "r2")
    # The validator of the run validated last rewrites the result of the one validated first.
    forged = first.path / "validation" / "attack.json"
    # r2's validator starts while r1's result is still being written (the runner overlaps
    # them), so it waits for that result to be there before it rewrites it.
    body = (
        f"if os.path.basename(os.path.dirname(repo)) == 'r2':\n"
        f"    import time\n"
        f"    for _ in range(3000):\n"
        f"        if os.path.exists({str(forged)!r}): break\n"
        f"        time.sleep(0.01)\n"
        f"    doc = json.load(open({str(forged)!r}))\n"
        f"    doc['metrics'] = {{'blocked': 'forged'}}\n"
        f"    attempt('forge', lambda: open({str(forged)!r}, 'w').write(json.dumps(doc)))\n"
    )
    summary, out = run_validate(scenario(tmp_path / "s", body), tmp_path / "exp")
    assert attempts(second) == {"forge": "wrote"}  # nothing prevented it here
    recorded = result(first)
    assert recorded["state"] == "invalid", out
    assert (
        str(forged) in recorded["error"] and "something other than trysquare" in recorded["error"]
    )
    assert result(second)["state"] == "valid"
    assert summary.exit_code == 1


def test_guard_validator_adding_a_file_and_setting_its_folders_times_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The picture after validation lists again only the folders whose entry moved: a
    validator that adds a file to a folder of the clone and puts the folder's times back
    still moves its ctime, so the folder is listed and the file named."""
    # Every folder counts as settled (the clone is seconds old): the shortcut is what is tried.
    monkeypatch.setattr(clone_guard, "_SETTLED_NS", 0)
    run = build_run(tmp_path, base={"counter.py": "x = 1\n", "pkg/mod.py": "y = 1\n"})
    body = """
folder = os.path.join(repo, "pkg")
was = os.stat(folder)
def plant():
    with open(os.path.join(folder, "planted.py"), "w") as handle:
        handle.write("stray\\n")
    os.utime(folder, ns=(was.st_atime_ns, was.st_mtime_ns))
attempt("plant", plant)
"""
    summary, out = run_validate(scenario(tmp_path / "s", body), run.path.parents[1])
    assert set(attempts(run).values()) == {"wrote"}
    recorded = result(run)
    assert recorded["state"] == "invalid", out
    assert "added pkg/planted.py" in recorded["error"]
    assert summary.exit_code == 1
