"""The agent cannot turn its failure into "nobody could judge": a control run at base decides.

A suite that ran nothing (the program is not there, ``prepare`` failed, no test was
collected) used to be unjudged wherever it happened, so an agent that broke the suite's
own entry point left the denominator instead of failing. Now the same suite runs once on
the tree at ``base`` (kept in trysquare's cache per base tree and suite): where it ran
tests there, this run *failed*, naming it; only where it ran nothing at base either is
it unjudged.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from trysquare.testing import RunBuilder

from tests.helpers import write_scenario, write_script
from tests.security.guard_fixtures import run_validate

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._suite",)


SUITE_VALIDATOR = """
from trysquare.assay import validator

@validator
def evaluate(run):
    return {"tests": run.tests()}

raise SystemExit(evaluate.cli())
"""

# The project's own test entry point (the agent may rewrite it): runs the unittest suite.
RUNNER = f"""#!/bin/sh
exec {sys.executable} -m unittest discover -s tests -t . -v
"""
TEST = """import unittest

class T(unittest.TestCase):
    def test_it(self):
        self.assertEqual(1, 1)
"""


def _matrix(
    tmp_path: Path,
    changes: dict[str, dict[str, str]],
    *,
    base: dict[str, str] | None = None,
    prepare: str = "",
) -> Path:
    """Runs whose agent made ``changes`` (id -> files) on a project whose suite is
    ``sh run-tests.sh``; the scenario's validator returns ``run.tests()``."""
    for run_id, files in changes.items():
        run = RunBuilder(tmp_path / "exp" / "runs" / run_id, cell="c", repetition=int(run_id[1:]))
        run.base(
            base
            or {
                "run-tests.sh": RUNNER,
                "tests/__init__.py": "",
                "tests/test_it.py": TEST,
                "check.py": "print('ok')\n",
            }
        )
        for path, text in files.items():
            run.repo.write(path, text)
        run.finish()
    folder = tmp_path / "s"
    write_script(folder, "suite.py", SUITE_VALIDATOR)
    return write_scenario(
        folder,
        f"""
[task]
test_command = "sh run-tests.sh"
{prepare}

[[validation]]
mode = "script"
name = "suite"
command = "suite.py"
metrics = ["tests"]
timeout = 120
""",
    )


def _result(tmp_path: Path, run_id: str) -> dict:
    path = tmp_path / "exp" / "runs" / run_id / "validation" / "suite.json"
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_runner_the_agent_pointed_at_nothing_fails_when_the_suite_runs_at_base(
    tmp_path: Path,
) -> None:
    broken = "#!/bin/sh\nexec no-such-test-runner-anywhere --all\n"  # exit 127 in this tree
    scenario = _matrix(tmp_path, {"r1": {"run-tests.sh": broken}, "r2": {}})
    run_validate(scenario, tmp_path / "exp")
    failed = _result(tmp_path, "r1")
    assert failed["state"] == "valid"
    assert failed["metrics"] == {"tests": False}, failed["reasons"]
    assert "ran tests at base" in failed["reasons"]["tests"]
    assert "none in this run" in failed["reasons"]["tests"]
    assert _result(tmp_path, "r2")["metrics"] == {"tests": True}


def test_a_suite_the_agent_emptied_fails_when_it_ran_tests_at_base(tmp_path: Path) -> None:
    # Variant: the collection finds nothing (the agent gutted the test module).
    scenario = _matrix(tmp_path, {"r1": {"tests/test_it.py": "# nothing here\n"}})
    run_validate(scenario, tmp_path / "exp")
    failed = _result(tmp_path, "r1")
    assert failed["metrics"] == {"tests": False}, failed["reasons"]
    assert "ran tests at base" in failed["reasons"]["tests"]


def test_a_prepare_the_agent_broke_fails_when_it_worked_at_base(tmp_path: Path) -> None:
    scenario = _matrix(
        tmp_path,
        {"r1": {"check.py": "raise SystemExit(3)\n"}},
        prepare=f'prepare = ["{sys.executable} check.py"]',
    )
    run_validate(scenario, tmp_path / "exp")
    failed = _result(tmp_path, "r1")
    assert failed["metrics"] == {"tests": False}, failed["reasons"]
    assert "ran tests at base" in failed["reasons"]["tests"]
    assert "prepare" in failed["reasons"]["tests"]


def test_a_suite_that_runs_nothing_at_base_either_stays_unjudged(tmp_path: Path) -> None:
    nothing = "#!/bin/sh\nexec no-such-test-runner-anywhere --all\n"
    scenario = _matrix(
        tmp_path,
        {"r1": {}},
        base={"run-tests.sh": nothing, "tests/__init__.py": "", "check.py": ""},
    )
    run_validate(scenario, tmp_path / "exp")
    result = _result(tmp_path, "r1")
    assert result["metrics"] == {"tests": None}
    assert "(so at base too)" in result["reasons"]["tests"]


def test_the_control_runs_once_per_base_and_suite(tmp_path: Path) -> None:
    broken = "#!/bin/sh\nexec no-such-test-runner-anywhere --all\n"
    scenario = _matrix(tmp_path, {"r1": {"run-tests.sh": broken}, "r2": {"run-tests.sh": broken}})
    run_validate(scenario, tmp_path / "exp")
    controls = list((Path(os.environ["XDG_CACHE_HOME"]) / "trysquare" / "controls").glob("*.json"))
    assert len(controls) == 1  # both runs share one base tree and one suite
    kept = controls[0].stat().st_mtime_ns
    run_validate(scenario, tmp_path / "exp", force=True, rerun_suite=True)
    assert controls[0].stat().st_mtime_ns == kept  # read, not run again
    assert _result(tmp_path, "r2")["metrics"] == {"tests": False}
