"""The prepared tree ``run.tests()`` and hidden tests share: what the agent's code can do to it.

``prepare`` is the agent's code (an ``npm ci`` runs its install scripts, a ``pip install``
its build). It runs once per run, before the hidden files are placed and before the test
runner's settings are set aside, and every consumer gets a copy of what it built.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.plugins.conftest import HIDDEN_TESTS_SRC
from tests.plugins.test_prepare_once import FIXED, result, write_experiment

EXERCISES = ("trysquare._prepared", "trysquare_hidden_tests.mode")

pytestmark = pytest.mark.skipif(
    not __import__("trysquare.jail", fromlist=["availability"]).availability().available,
    reason="the jail cannot start here: without it every validator prepares its own copy",
)

BUILT = """\
import json
import os
with open("built.py", "w") as out:
    out.write(f"WHERE = {os.getcwd()!r}\\n")
"""
# Every report a pass, from a conftest.py at the root of the tree.
ALL_PASS = """
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


@pytest.fixture(autouse=True)
def _light_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def test_prepare_can_neither_rewrite_the_hidden_tests_nor_plant_a_conftest(
    cli, site, tmp_path: Path
) -> None:
    prepare = (
        BUILT
        + "os.makedirs('tests', exist_ok=True)\n"
        + "open('tests/test_hidden.py', 'w').write("
        + "'def test_adds_zero(): pass\\ndef test_where(): pass\\n')\n"
        + f"open('conftest.py', 'w').write({ALL_PASS!r})\n"
    )
    experiment, scenario = write_experiment(
        tmp_path, site, prepare=prepare, runs={"broken": {"notes.md": "no\n"}}
    )
    done = cli("validate", scenario, experiment, "--no-progress")
    hidden = result(experiment, "broken", "hidden-tests")
    assert hidden["metrics"] == {"resolved": False, "f2p": 0.0, "p2p": 1.0}, (
        done.stdout,
        done.stderr,
        hidden,
    )
    assert "conftest.py (added)" in hidden["reasons"]["resolved"]


def test_what_one_suite_writes_never_reaches_the_hidden_tests(cli, site, tmp_path: Path) -> None:
    # The run's own test "fixes" calc.py while the suite runs: the hidden tests, run after it
    # (--jobs 1: the script validator first), still see the run's calc.py.
    rewrite = (
        "import pathlib\n"
        "pathlib.Path('calc.py').write_text('def add(a, b):\\n    return a + b\\n')\n"
        "def test_nothing():\n    pass\n"
    )
    experiment, scenario = write_experiment(
        tmp_path,
        site,
        prepare=BUILT,
        runs={"broken": {"tests/test_rewrite.py": rewrite}},
        suite="tests/test_rewrite.py",
    )
    done = cli("validate", scenario, experiment, "--no-progress", "--jobs", "1")
    assert result(experiment, "broken", "script")["metrics"] == {"tests": True}
    hidden = result(experiment, "broken", "hidden-tests")
    assert hidden["metrics"] == {"resolved": False, "f2p": 0.0, "p2p": 1.0}, (done.stdout, hidden)


def test_a_fifo_prepare_leaves_is_not_copied_and_nothing_hangs(
    cli_process, site, tmp_path: Path
) -> None:
    prepare = BUILT + "os.mkfifo('pipe')\nos.makedirs('deep/er')\nos.mkfifo('deep/er/pipe')\n"
    experiment, scenario = write_experiment(tmp_path, site, prepare=prepare, runs={"fixed": FIXED})
    # A real process, so that a hang ends with the test (the timeout raises).
    paths = [str(HIDDEN_TESTS_SRC), cli_process.env.get("PYTHONPATH", "")]
    cli_process.env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    done = cli_process("validate", scenario, experiment, "--no-progress", timeout=120)
    assert result(experiment, "fixed", "script")["metrics"] == {"tests": True}, done.stdout
    hidden = result(experiment, "fixed", "hidden-tests")
    assert hidden["metrics"] == {"resolved": True, "f2p": 1.0, "p2p": 1.0}, hidden


def test_prepare_cannot_swap_its_tree_for_a_folder_of_the_machine(
    cli, site, tmp_path: Path
) -> None:
    """The agent's install script renames the tree it runs in and puts a link to a folder of
    the machine in its place: every consumer's copy would be made of that folder (tests that
    pass, read as this run's), and hidden files placed in it. prepare is refused instead."""
    from tests.plugins.test_prepare_once import BASE

    victim = tmp_path / "victim"  # a tree whose tests pass, somewhere on the machine
    passing = {"tests/test_calc.py": "def test_adds():\n    pass\n"}
    for relative, text in {**BASE, **FIXED, **passing}.items():
        (victim / relative).parent.mkdir(parents=True, exist_ok=True)
        (victim / relative).write_text(text)
    prepare = (
        "import os\n"
        "here = os.getcwd()\n"
        "os.rename(here, here + '.moved')\n"
        f"os.symlink({str(victim)!r}, here)\n"
    )
    experiment, scenario = write_experiment(
        tmp_path, site, prepare=prepare, runs={"broken": {"notes.md": "no\n"}}
    )
    done = cli("validate", scenario, experiment, "--no-progress", "--jobs", "1")
    script = result(experiment, "broken", "script")
    hidden = result(experiment, "broken", "hidden-tests")
    assert script["metrics"]["tests"] is not True, (done.stdout, script)
    assert hidden["metrics"].get("resolved") is not True, (done.stdout, hidden)
    assert not (victim / "tests" / "test_hidden.py").exists()  # nothing written out there
    said = json.dumps([script, hidden])
    assert "put something else in the place of the folder it ran in" in said, said
