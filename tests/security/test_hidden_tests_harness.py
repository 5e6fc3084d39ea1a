"""The hidden tests measure the agent's source, not the test harness it left in its tree.

Each test builds the unfixed basket run (`average([])` still raises, so the hidden
fail-to-pass test fails) and adds what an agent would to turn that failure into a pass or
into "nobody could judge": a hook in a conftest.py, a plugin in its own addopts, a pytest
setting that drops the report. The hidden tests must run with the test runner's settings as
they are at base and say what was set aside; a report the run's code prevents must count as
a failure when the same command reports at base (the control run).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.plugins.basket_project import BASE, FIX, NO_FIX, write_hidden_scenario

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare_hidden_tests.harness",)


SOURCE = Path(__file__).resolve().parents[2] / "plugins" / "trysquare-hidden-tests" / "src"
if str(SOURCE) not in sys.path:  # not installed by `uv run pytest`: see tests/plugins/conftest.py
    sys.path.insert(0, str(SOURCE))

from trysquare_hidden_tests import HiddenTestsMode

MODES = {"hidden-tests": HiddenTestsMode()}
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider --junitxml={{junit}}"
FAILED = {"resolved": False, "f2p": 0.0, "p2p": 1.0}

# The conftest.py: nine lines that make every failed test pass.
FLIP_TO_PASSED = textwrap.dedent("""\
    import pytest


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        if report.failed:
            report.outcome, report.longrepr = "passed", None
    """)


@pytest.fixture(autouse=True)
def _light_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    # Speed only (no installed plugin loads): none of these attacks relies on autoloading.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def _score(
    trysquare_run,
    run_validator,
    tmp_path: Path,
    changes: dict[str, str],
    base: dict[str, str] = BASE,
    **scenario,
):
    scenario_path = write_hidden_scenario(tmp_path / "s", PYTEST, **scenario)
    run = trysquare_run("r", base=base, changes={**NO_FIX, **changes})
    result = run_validator(run, scenario=scenario_path, modes=MODES)
    assert result.state == "valid", result.error
    return result


def test_a_conftest_flipping_failed_reports_to_passed_is_set_aside(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    result = _score(trysquare_run, run_validator, tmp_path, {"conftest.py": FLIP_TO_PASSED})
    assert result.metrics == FAILED
    assert "set aside the run's conftest.py (added)" in result.reasons["resolved"]
    assert "tests.test_hidden.test_empty_basket (failed" in result.reasons["resolved"]


def test_a_new_style_wrapper_in_a_subfolder_conftest_is_set_aside(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # Variant: pluggy's new-style wrapper, in tests/conftest.py, rewriting the call phase.
    conftest = textwrap.dedent("""\
        import pytest


        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_makereport(item, call):
            report = yield
            report.outcome = "passed"
            return report
        """)
    result = _score(trysquare_run, run_validator, tmp_path, {"tests/conftest.py": conftest})
    assert result.metrics == FAILED
    assert "tests/conftest.py (added)" in result.reasons["f2p"]


def test_a_base_conftest_the_agent_changed_is_restored(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    scenario_path = write_hidden_scenario(tmp_path / "s", PYTEST)
    base = {**BASE, "tests/conftest.py": "FIXTURES = 1\n"}
    run = trysquare_run("r", base=base, changes={"tests/conftest.py": FLIP_TO_PASSED})
    result = run_validator(run, scenario=scenario_path, modes=MODES)
    assert result.metrics == FAILED
    assert "tests/conftest.py (changed)" in result.reasons["resolved"]


def test_deselecting_the_hidden_test_from_a_conftest_is_set_aside(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # Variant: another hook. The hidden test never runs, so its id is absent from the report:
    # unjudged, out of the denominator, unless the conftest is set aside.
    conftest = textwrap.dedent("""\
        def pytest_collection_modifyitems(config, items):
            items[:] = [item for item in items if "hidden" not in item.nodeid]
        """)
    result = _score(trysquare_run, run_validator, tmp_path, {"tests/conftest.py": conftest})
    assert result.metrics == FAILED


def test_a_plugin_in_the_agents_own_addopts_that_ends_pytest_is_set_aside(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # The second attack: `-p myplugin` in pyproject.toml's addopts, ending the process
    # before the JUnit report is written. The project's metadata in the file stays the agent's.
    plugin = textwrap.dedent("""\
        import os

        import pytest


        @pytest.hookimpl(tryfirst=True)
        def pytest_sessionfinish(session, exitstatus):
            os._exit(0)
        """)
    pyproject = textwrap.dedent("""\
        [project]
        name = "basket"
        version = "1.0"

        [tool.pytest.ini_options]
        addopts = "-p myplugin"
        """)
    result = _score(
        trysquare_run,
        run_validator,
        tmp_path,
        {"myplugin.py": plugin, "pyproject.toml": pyproject},
    )
    assert result.metrics == FAILED
    assert "pyproject.toml [tool.pytest.ini_options] (added)" in result.reasons["resolved"]


def test_a_pytest_ini_turning_the_junit_report_off_is_set_aside(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # Variant: `-p no:junitxml` leaves pytest unable to take --junitxml: no report at all.
    result = _score(
        trysquare_run,
        run_validator,
        tmp_path,
        {"pytest.ini": "[pytest]\naddopts = -p no:junitxml\n"},
    )
    assert result.metrics == FAILED
    assert "pytest.ini (added)" in result.reasons["resolved"]


def test_a_setup_cfg_deselecting_with_k_keeps_the_rest_of_the_file(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # Variant: `-k` in setup.cfg's [tool:pytest]; the file's [metadata] is the agent's to keep.
    setup_cfg = '[metadata]\nname = basket\n\n[tool:pytest]\naddopts = -k "not empty_basket"\n'
    result = _score(trysquare_run, run_validator, tmp_path, {"setup.cfg": setup_cfg})
    assert result.metrics == FAILED
    assert "setup.cfg [tool:pytest] (added)" in result.reasons["resolved"]


def test_the_agents_source_ending_pytest_before_the_report_counts_as_failed(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # What no setting explains: the source itself ends the process when the hidden test
    # imports it. No report is written; at base one is: the run failed, it never leaves the
    # denominator.
    source = "import os\n\nos._exit(0)\n" + BASE["basket.py"]
    result = _score(trysquare_run, run_validator, tmp_path, {"basket.py": source})
    assert result.metrics == {"resolved": False, "f2p": 0.0, "p2p": 0.0}
    reason = result.reasons["resolved"]
    assert "the hidden tests reported at base and wrote no report in this run" in reason
    assert "tests.test_hidden.test_empty_basket (error: not in this run's report" in reason


def test_the_agents_source_breaking_the_hidden_tests_import_counts_as_failed(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # The hidden module cannot be collected (the agent removed `average`): its ids are absent
    # from the report. They are in the report at base, so they did not pass.
    source = "def total(items):\n    return sum(items)\n"
    result = _score(trysquare_run, run_validator, tmp_path, {"basket.py": source})
    assert result.metrics == {"resolved": False, "f2p": 0.0, "p2p": 0.0}
    assert "not in this run's report, reported at base" in result.reasons["f2p"]


def test_a_fixed_run_keeps_its_legitimate_pyproject(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # The control for the attacks above: a fix with harmless settings still resolves.
    pyproject = '[project]\nname = "basket"\nversion = "1.1"\n'
    scenario_path = write_hidden_scenario(tmp_path / "s", PYTEST)
    run = trysquare_run("r", base=BASE, changes={**FIX, "pyproject.toml": pyproject})
    result = run_validator(run, scenario=scenario_path, modes=MODES)
    assert result.metrics == {"resolved": True, "f2p": 1.0, "p2p": 1.0}
    assert "set aside" not in result.reasons["resolved"]


FORGED = (
    "<testsuite>"
    '<testcase classname="tests.test_hidden" name="test_empty_basket"/>'
    '<testcase classname="tests.test_basket" name="test_total"/>'
    '<testcase classname="tests.test_basket.TestAverage" name="test_average"/>'
    "</testsuite>"
)


def test_a_report_planted_before_the_command_is_never_read(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # `prepare` runs the agent's code too (a build script, setup.py): it knows TMPDIR, the
    # folder where the report goes, and plants a passing one there; then the agent's source
    # ends pytest before it writes its own. The report's folder is made after prepare ended.
    base = {**BASE, "build.py": "print('nothing to build')\n"}
    build = textwrap.dedent(f"""\
        import os, pathlib
        scratch = pathlib.Path(os.environ["TMPDIR"])
        for folder in [scratch, *[p for p in scratch.iterdir() if p.is_dir()]]:
            (folder / "junit.xml").write_text({FORGED!r})
        """)
    task = f'[task]\nprepare = ["{sys.executable} build.py"]\n'
    exits = "import os\n\nos._exit(0)\n" + BASE["basket.py"]
    result = _score(
        trysquare_run,
        run_validator,
        tmp_path,
        {"build.py": build, "basket.py": exits},
        task=task,
        base=base,
    )
    assert result.metrics == {"resolved": False, "f2p": 0.0, "p2p": 0.0}, result.reasons
    assert "wrote no report in this run" in result.reasons["resolved"]


def test_the_agents_source_holding_the_command_past_its_timeout_counts_as_failed(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # Variant: no report because the agent's source never returns. At base the same command
    # reports within the timeout, so the run failed; it does not leave the denominator.
    hangs = "import time\n\ntime.sleep(600)\n" + BASE["basket.py"]
    result = _score(trysquare_run, run_validator, tmp_path, {"basket.py": hangs}, timeout=8)
    assert result.metrics == {"resolved": False, "f2p": 0.0, "p2p": 0.0}
    reason = result.reasons["resolved"]
    assert "the hidden tests reported at base, but in this run the command" in reason
    assert "did not finish within the timeout of 8 s" in reason


def test_the_agents_build_breaking_prepare_counts_as_failed(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # Variant: `prepare` runs a build script of the project that the agent broke.
    result = _score(
        trysquare_run,
        run_validator,
        tmp_path,
        {"build.py": "raise SystemExit('broken build')\n"},
        base={**BASE, "build.py": "print('built')\n"},
        task=f'[task]\nprepare = ["{sys.executable} build.py"]\n',
    )
    assert result.metrics == {"resolved": False, "f2p": 0.0, "p2p": 0.0}
    assert "but in this run prepare `" in result.reasons["f2p"]
    assert "failed (exit 1), so no test ran" in result.reasons["f2p"]
    assert "broken build" in result.reasons["f2p"]


def test_a_conftest_reached_through_a_link_out_of_the_tree_is_set_aside(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # Variant: the conftest is not in the tree at all but in the clone's .git (never copied),
    # reached through a link the run left in tests/ (copied as a link: pytest collects through
    # it). Its global collection hook makes every test body a no-op: every test passes.
    scenario_path = write_hidden_scenario(tmp_path / "s", PYTEST)
    run = trysquare_run("r", base=BASE, changes=NO_FIX)
    harness = run.repo.path / ".git" / "harness"
    harness.mkdir()
    (harness / "conftest.py").write_text(
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        item.runtest = lambda: None\n"
    )
    (harness / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    (run.repo.path / "tests" / "harness").symlink_to(harness, target_is_directory=True)
    result = run_validator(run, scenario=scenario_path, modes=MODES)
    assert result.state == "valid", result.error
    assert result.metrics == FAILED
    assert "tests/harness (a link out of the tree)" in result.reasons["resolved"]


def test_a_pytest_plugin_the_agents_project_installed_does_not_load(
    trysquare_run, run_validator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Variant: `prepare = ["pip install -e ."]` installs the agent's project into the suite's
    # environment, entry points included: a `pytest11` one is a plugin pytest loads by itself.
    # Here it is installed as pip leaves it, in a folder on the suite's path.
    site = tmp_path / "site"
    site.mkdir()
    (site / "basket_flip.py").write_text(FLIP_TO_PASSED)
    info = site / "basket-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: basket\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nbasket = basket_flip\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    result = _score(trysquare_run, run_validator, tmp_path, {})
    assert result.metrics == FAILED
