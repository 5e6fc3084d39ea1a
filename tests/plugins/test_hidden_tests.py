"""The hidden-tests mode in process: JUnit reading, placing hidden files, unjudged cases, refusals.

Runs are scored through the validator authors' fixtures (`trysquare_run`,
`run_validator`), with the mode handed in directly: installing it for real is
`test_hidden_tests_installed.py`'s job.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from trysquare.errors import ScenarioError
from trysquare.scenario import load_scenario
from trysquare_hidden_tests import HiddenTestsMode
from trysquare_hidden_tests.junit import ReportError, parse_report
from trysquare_hidden_tests.mode import judge

from tests.plugins.basket_project import (
    BASE,
    FIX,
    NO_FIX,
    PASS_TO_PASS,
    write_hidden_scenario,
)

MODES = {"hidden-tests": HiddenTestsMode()}
# The real suite, quiet and leaving no cache.
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider --junitxml={{junit}}"

NODE_STYLE = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites>
  <testcase name="top level" time="0.1" classname="test"/>
  <testsuite name="basket">
    <testsuite name="inner">
      <testcase name="adds" classname="test"/>
      <testcase name="breaks" classname="test">
        <failure type="testCodeFailure" message="expected 0, got NaN">stack</failure>
      </testcase>
    </testsuite>
    <testcase name="todo" classname="test"><skipped type="todo" message="later"/></testcase>
  </testsuite>
</testsuites>
"""


@pytest.fixture(autouse=True)
def _light_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    # The measured suite needs no installed pytest plugin (hypothesis alone costs seconds).
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


# --- reading a report -------------------------------------------------------------------------


def test_nested_suites_and_statuses() -> None:
    cases = parse_report(NODE_STYLE)
    assert {c.id: c.status for c in cases.values()} == {
        "test.top level": "passed",
        "test.adds": "passed",
        "test.breaks": "failed",
        "test.todo": "skipped",
    }
    assert cases["test.breaks"].message == "expected 0, got NaN"


def test_error_outranks_failure_and_duplicates_keep_the_worst() -> None:
    cases = parse_report(b"""<testsuite>
      <testcase classname="m" name="t"><failure message="f"/><error message="e"/></testcase>
      <testcase classname="m" name="dup"/>
      <testcase classname="m" name="dup"><failure message="second run failed"/></testcase>
      <testcase name="bare"/>
    </testsuite>""")
    assert cases["m.t"].status == "error" and cases["m.t"].message == "e"
    assert cases["m.dup"].status == "failed"
    assert cases["bare"].passed  # no classname: the id is the name alone


@pytest.mark.parametrize("data", [b"", b"<testsuite><testcase", b"<html><body/></html>"])
def test_an_unreadable_report_is_refused(data: bytes) -> None:
    with pytest.raises(ReportError):
        parse_report(data)


def test_judge_resolved_fractions_and_reasons() -> None:
    cases = parse_report(NODE_STYLE)
    metrics, reasons = judge(cases, ["test.breaks", "test.adds"], ["test.top level"])
    assert metrics == {"f2p": 0.5, "p2p": 1.0, "resolved": False}
    assert "test.breaks (failed: expected 0, got NaN)" in reasons["resolved"]
    metrics, _ = judge(cases, ["test.adds"], ["test.top level"])
    assert metrics == {"f2p": 1.0, "p2p": 1.0, "resolved": True}


def test_skipped_is_not_a_pass() -> None:
    metrics, reasons = judge(parse_report(NODE_STYLE), ["test.todo"], ["test.adds"])
    assert metrics["resolved"] is False and metrics["f2p"] == 0.0
    assert "skipped" in reasons["f2p"]


def test_a_listed_id_absent_from_the_report_is_unjudged_never_a_pass() -> None:
    cases = parse_report(b"""<testsuites><testsuite>
      <testcase classname="" name="tests.test_hidden">
        <error message="collection failure"/>
      </testcase>
      <testcase classname="tests.test_basket" name="test_total"/>
    </testsuite></testsuites>""")
    metrics, reasons = judge(
        cases, ["tests.test_hidden.test_empty_basket"], ["tests.test_basket.test_total"]
    )
    assert metrics == {"f2p": None, "p2p": 1.0, "resolved": None}
    assert "tests.test_hidden.test_empty_basket" in reasons["resolved"]
    assert "collection failure" in reasons["f2p"]  # the report's own error says why


def test_a_report_with_no_test_is_unjudged() -> None:
    metrics, reasons = judge(
        parse_report(b"<testsuites><testsuite/></testsuites>"), ["a.b"], ["a.c"]
    )
    assert metrics == {"resolved": None, "f2p": None, "p2p": None}
    assert all("no test" in reason for reason in reasons.values())


# --- scoring runs -----------------------------------------------------------------------------


def basket_run(trysquare_run, run_id: str, changes: dict[str, str]):
    return trysquare_run(run_id, base=BASE, changes=changes)


def test_fixed_and_unfixed_runs_with_the_real_suite(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    scenario = write_hidden_scenario(tmp_path / "s", PYTEST)
    fixed = basket_run(trysquare_run, "fixed", FIX)
    unfixed = basket_run(trysquare_run, "unfixed", NO_FIX)
    clone_before = (unfixed.repo.path / "tests" / "test_hidden.py").read_bytes()

    good = run_validator(fixed, scenario=scenario, modes=MODES)
    bad = run_validator(unfixed, scenario=scenario, modes=MODES)

    assert good.state == bad.state == "valid", (good.error, bad.error)
    assert good.metrics == {"resolved": True, "f2p": 1.0, "p2p": 1.0}
    assert bad.metrics == {"resolved": False, "f2p": 0.0, "p2p": 1.0}
    assert "tests.test_hidden.test_empty_basket (failed" in bad.reasons["resolved"]
    # The stale placeholder was replaced in the copy only: the clone still holds it.
    assert (unfixed.repo.path / "tests" / "test_hidden.py").read_bytes() == clone_before
    assert good.clone_changes is None and bad.clone_changes is None
    assert not (unfixed.repo.path / "junit.xml").exists()
    assert "$ " in bad.stderr and "test_empty_basket" in bad.stderr  # the suite's output is kept


def test_without_the_replacement_the_hidden_id_would_be_missing(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # Control for the test above: the placeholder alone does not report the F2P id.
    scenario = write_hidden_scenario(tmp_path / "s", PYTEST)
    (tmp_path / "s" / "hidden" / "test_hidden.py").write_text(BASE["tests/test_hidden.py"])
    result = run_validator(basket_run(trysquare_run, "r", FIX), scenario=scenario, modes=MODES)
    assert result.metrics == {"resolved": None, "f2p": None, "p2p": 1.0}


WRITER = """
import pathlib, sys
report, kind = sys.argv[1], sys.argv[2]
if kind == "empty":
    pathlib.Path(report).write_text("<testsuites><testsuite name='none'/></testsuites>")
elif kind == "sleep":
    import time; time.sleep(60)
sys.exit(1)
"""


@pytest.mark.parametrize(
    ("kind", "says"),
    [("none", "no report was written"), ("empty", "the report holds no test")],
)
def test_no_report_or_an_empty_one_is_unjudged(
    trysquare_run, run_validator, tmp_path: Path, kind: str, says: str
) -> None:
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER)
    scenario = write_hidden_scenario(tmp_path / "s", f"{sys.executable} {writer} {{junit}} {kind}")
    result = run_validator(basket_run(trysquare_run, "r", FIX), scenario=scenario, modes=MODES)
    assert result.state == "valid"
    assert result.metrics == {"resolved": None, "f2p": None, "p2p": None}
    assert says in result.reasons["resolved"]


def test_a_failing_prepare_is_unjudged(trysquare_run, run_validator, tmp_path: Path) -> None:
    task = f'[task]\nprepare = ["{sys.executable} -c \\"raise SystemExit(3)\\""]\n'
    scenario = write_hidden_scenario(tmp_path / "s", PYTEST, task=task)
    result = run_validator(basket_run(trysquare_run, "r", FIX), scenario=scenario, modes=MODES)
    assert result.metrics == {"resolved": None, "f2p": None, "p2p": None}
    assert "prepare" in result.reasons["resolved"] and "exit 3" in result.reasons["resolved"]


def test_a_timeout_is_unjudged(trysquare_run, run_validator, tmp_path: Path) -> None:
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER)
    scenario = write_hidden_scenario(
        tmp_path / "s", f"{sys.executable} {writer} {{junit}} sleep", timeout=0.5
    )
    result = run_validator(basket_run(trysquare_run, "r", FIX), scenario=scenario, modes=MODES)
    assert result.metrics == {"resolved": None, "f2p": None, "p2p": None}
    assert "did not finish within the timeout of 0.5 s" in result.reasons["resolved"]


def test_a_link_out_of_the_repository_is_not_written_through(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    run = trysquare_run("r", base={"basket.py": BASE["basket.py"]})
    (run.repo.path / "tests").symlink_to(outside, target_is_directory=True)
    scenario = write_hidden_scenario(tmp_path / "s", PYTEST)
    result = run_validator(run, scenario=scenario, modes=MODES)
    # The link is taken out of the copy (pytest would collect through it): the hidden file
    # goes into a folder of the copy's own; pass_to_pass is absent at base too.
    assert result.metrics["resolved"] is None
    assert "set aside the run's tests (a link out of the tree)" in result.reasons["resolved"]
    assert list(outside.iterdir()) == []


def test_metrics_subset_and_renaming(trysquare_run, run_validator, tmp_path: Path) -> None:
    scenario = write_hidden_scenario(
        tmp_path / "s",
        PYTEST,
        extra='metrics = { resolved = "basket_fixed", p2p = "no_regression" }\n',
    )
    result = run_validator(basket_run(trysquare_run, "r", FIX), scenario=scenario, modes=MODES)
    assert result.metrics == {"basket_fixed": True, "no_regression": 1.0}


def test_the_digest_covers_the_hidden_files_bytes(tmp_path: Path) -> None:
    path = write_hidden_scenario(tmp_path, PYTEST)
    before = load_scenario(path, MODES).validations[0].digest()
    assert load_scenario(path, MODES).validations[0].digest() == before
    (tmp_path / "hidden" / "test_hidden.py").write_text("def test_empty_basket(): pass\n")
    assert load_scenario(path, MODES).validations[0].digest() != before


# --- refused at load --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "extra", "says"),
    [
        ("python3 -m pytest", "", "must name the JUnit report's path as {junit}"),
        ("python3 -m pytest --junitxml={junit} && true", "", "only means something to a shell"),
        (
            PYTEST,
            'metrics = ["resolved", "fixed"]\n',
            "metrics[2]: must be one of resolved, f2p, p2p",
        ),
        (PYTEST, "metrics = []\n", "metrics: is empty"),
        (PYTEST, "comand = 'x'\n", "comand: unknown key (did you mean 'command'?)"),
    ],
)
def test_load_refusals(tmp_path: Path, command: str, extra: str, says: str) -> None:
    path = write_hidden_scenario(tmp_path, command, extra=extra)
    with pytest.raises(ScenarioError) as refused:
        load_scenario(path, MODES)
    assert says in str(refused.value)
    assert "scenario.toml: [[validation]][1]" in str(refused.value)


def test_a_missing_hidden_file_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = write_hidden_scenario(tmp_path, PYTEST)
    (tmp_path / "hidden" / "test_hidden.py").unlink()
    with pytest.raises(ScenarioError, match=r'files\."tests/test_hidden\.py": the hidden file'):
        load_scenario(path, MODES)


@pytest.mark.parametrize("destination", ["../escape.py", "/abs.py", ".git/hooks/pre-commit"])
def test_a_destination_outside_the_repository_is_refused(tmp_path: Path, destination: str) -> None:
    path = write_hidden_scenario(tmp_path, PYTEST)
    path.write_text(path.read_text().replace('"tests/test_hidden.py" =', f'"{destination}" ='))
    with pytest.raises(ScenarioError, match="relative path inside the repository"):
        load_scenario(path, MODES)


def test_an_id_in_both_lists_is_refused(tmp_path: Path) -> None:
    path = write_hidden_scenario(tmp_path, PYTEST)
    path.write_text(
        path.read_text().replace(f'"{PASS_TO_PASS[0]}"', '"tests.test_hidden.test_empty_basket"')
    )
    with pytest.raises(ScenarioError, match="also listed in fail_to_pass"):
        load_scenario(path, MODES)


def test_an_empty_list_for_a_declared_fraction_is_refused(tmp_path: Path) -> None:
    path = write_hidden_scenario(tmp_path, PYTEST)
    text = path.read_text()
    start = text.index("pass_to_pass = ")
    path.write_text(text[:start] + "pass_to_pass = []\n" + text[text.index("timeout") :])
    with pytest.raises(ScenarioError, match="p2p could never be judged"):
        load_scenario(path, MODES)
    path.write_text(path.read_text() + textwrap.dedent('metrics = ["resolved", "f2p"]\n'))
    assert load_scenario(path, MODES).validations[0].metrics == ("resolved", "f2p")


def test_two_keys_for_one_destination_are_refused(tmp_path: Path) -> None:
    path = write_hidden_scenario(tmp_path, PYTEST)
    same = '"tests/test_hidden.py" = "hidden/test_hidden.py", "tests/./test_hidden.py" = "hidden/test_hidden.py"'
    path.write_text(
        path.read_text().replace('"tests/test_hidden.py" = "hidden/test_hidden.py"', same)
    )
    with pytest.raises(ScenarioError, match="names the same destination as another key"):
        load_scenario(path, MODES)


@pytest.mark.parametrize("planted", ["fifo", "link", "hard link"])
def test_a_report_the_agents_tests_replaced_is_refused_without_waiting(
    tmp_path: Path, planted: str
) -> None:
    # The agent's conftest.py can put a FIFO (or a link to a file of ours) where the
    # finished report was: read_report must neither wait on it nor follow it.
    import os
    import threading

    from trysquare_hidden_tests.junit import read_report

    report = tmp_path / "junit.xml"
    if planted == "fifo":
        os.mkfifo(report)
    elif planted == "hard link":  # to a file of the same user elsewhere: read, it would leak
        (tmp_path / "secret.xml").write_text("<testsuite/>")
        os.link(tmp_path / "secret.xml", report)
    else:
        (tmp_path / "secret.xml").write_text("<testsuite/>")
        os.symlink(tmp_path / "secret.xml", report)
    said: list[BaseException] = []

    def read() -> None:
        try:
            read_report(report)
        except BaseException as error:  # handed to the test
            said.append(error)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "read_report waited on the FIFO"
    (error,) = said
    assert isinstance(error, ReportError)
    says = {
        "fifo": "not a regular file",
        "link": "is a symlink, not followed",
        "hard link": "is a hard link to another file, not read",
    }
    assert says[planted] in str(error)


# --- the test runner's settings as at base ----------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_set_aside_names_each_settings_file_and_keeps_the_projects_metadata(tmp_path: Path) -> None:
    import tomllib

    from trysquare_hidden_tests.harness import set_aside

    base = _tree(tmp_path / "base", {
        "conftest.py": "BASE = 1\n",
        "tests/conftest.py": "GONE = 1\n",
        "pyproject.toml": '[project]\nname = "b"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n',
        "tox.ini": "[tox]\nenvlist = py\n\n[pytest]\naddopts = -q\n",
    })  # fmt: skip
    copy = _tree(tmp_path / "copy", {
        "conftest.py": "AGENT = 1\n",
        "pkg/conftest.py": "ADDED = 1\n",
        "pkg/pytest.ini": "[pytest]\n",
        "pkg/.pytest.toml": "[pytest]\n",
        "sitecustomize.py": "import os\n",
        "src/x.pth": "import os\n",
        "pkg/__pycache__/conftest.cpython-311.pyc": "",
        "pyproject.toml": '[project]\nname = "b"\ndependencies = ["attrs"]\n\n'
        '[tool.pytest.ini_options]\naddopts = "-p evil"\n\n[tool.ruff]\nline-length = 99\n',
        "tox.ini": "[tox]\nenvlist = py312\n\n[pytest]\naddopts = -p evil\n[testenv]\ndeps = x\n",
        "hidden/conftest.py": "THE SCENARIO'S\n",
    })  # fmt: skip
    named = set_aside(copy, base, keep=["hidden/conftest.py"])
    assert named == [
        "conftest.py (changed)",
        "pkg/.pytest.toml (added)",
        "pkg/conftest.py (added)",
        "pkg/pytest.ini (added)",
        "pyproject.toml [tool.pytest.ini_options] (changed)",
        "sitecustomize.py (added)",
        "src/x.pth (added)",
        "tests/conftest.py (deleted)",
        "tox.ini [pytest] (changed)",
        "1 cache folder (__pycache__, .pytest_cache)",
    ]
    assert (copy / "conftest.py").read_text() == "BASE = 1\n"
    assert (copy / "tests" / "conftest.py").read_text() == "GONE = 1\n"
    for gone in (
        "pkg/conftest.py",
        "pkg/pytest.ini",
        "sitecustomize.py",
        "src/x.pth",
        "pkg/__pycache__",
    ):
        assert not (copy / gone).exists()
    assert (copy / "hidden" / "conftest.py").read_text() == "THE SCENARIO'S\n"
    pyproject = tomllib.loads((copy / "pyproject.toml").read_text())
    assert pyproject["project"]["dependencies"] == ["attrs"]  # the agent's: kept
    assert pyproject["tool"] == {
        "pytest": {"ini_options": {"addopts": "-q"}},
        "ruff": {"line-length": 99},
    }
    tox = (copy / "tox.ini").read_text()
    assert "envlist = py312" in tox and "deps = x" in tox and "evil" not in tox
    assert "[pytest]\naddopts = -q\n" in tox
    assert (
        set_aside(copy, base, keep=["hidden/conftest.py"]) == []
    )  # once set aside, nothing is left to set aside


def test_a_pyproject_that_is_not_toml_is_restored_whole(tmp_path: Path) -> None:
    from trysquare_hidden_tests.harness import set_aside

    text = '[project]\nname = "b"\n'
    base = _tree(tmp_path / "base", {"pyproject.toml": text})
    copy = _tree(tmp_path / "copy", {"pyproject.toml": "[tool.pytest.ini_options\naddopts = 1"})
    assert set_aside(copy, base) == ["pyproject.toml (not readable as TOML: restored whole)"]
    assert (copy / "pyproject.toml").read_text() == text


def test_a_base_file_is_never_put_back_through_a_link(tmp_path: Path) -> None:
    from trysquare_hidden_tests.harness import SetAsideError, set_aside

    outside = tmp_path / "outside"
    outside.mkdir()
    base = _tree(tmp_path / "base", {"tests/conftest.py": "BASE = 1\n", "lib/conftest.py": "L\n"})
    copy = _tree(tmp_path / "copy", {"other/x.py": ""})
    (copy / "tests").symlink_to(outside, target_is_directory=True)
    # A link out of the tree is taken out; base's file goes into a folder of the copy's own.
    assert set_aside(copy, base) == [
        "tests (a link out of the tree)",
        "lib/conftest.py (deleted)",
        "tests/conftest.py (deleted)",
    ]
    assert list(outside.iterdir()) == []
    assert not (copy / "tests").is_symlink()
    # A link inside the tree is the run's to keep: nothing is written through it.
    (copy / "lib").mkdir(exist_ok=True)
    (copy / "lib" / "conftest.py").unlink()
    (copy / "lib").rmdir()
    (copy / "lib").symlink_to(copy / "other", target_is_directory=True)
    with pytest.raises(SetAsideError, match="makes lib a link or a file"):
        set_aside(copy, base)
    assert list((copy / "other").iterdir()) == [copy / "other" / "x.py"]


# --- the control run at base ------------------------------------------------------------------

BROKEN_AT_BASE = f"{sys.executable} tools/hidden.py {{junit}}"


def test_when_the_control_at_base_cannot_report_either_nobody_can_say(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    # The command names a script the base tree does not hold: at base nothing reports, so
    # the run writing no report is nobody's failure it can be blamed for.
    scenario = write_hidden_scenario(tmp_path / "s", BROKEN_AT_BASE)
    run = basket_run(trysquare_run, "r", {**FIX, "tools/hidden.py": "raise SystemExit(1)\n"})
    result = run_validator(run, scenario=scenario, modes=MODES)
    assert result.state == "valid"
    assert result.metrics == {"resolved": None, "f2p": None, "p2p": None}
    reason = result.reasons["resolved"]
    assert "no report was written" in reason
    assert "at base the hidden tests could not report either (no report was written)" in reason
    assert "# control run at base:" in result.stderr


def test_a_listed_id_absent_at_base_too_stays_unjudged(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    scenario = write_hidden_scenario(tmp_path / "s", PYTEST)
    scenario.write_text(scenario.read_text().replace("test_empty_basket", "test_emtpy_basket"))
    result = run_validator(basket_run(trysquare_run, "r", FIX), scenario=scenario, modes=MODES)
    assert result.metrics == {"resolved": None, "f2p": None, "p2p": 1.0}
    assert "absent from the report (and from the one at base)" in result.reasons["f2p"]


def test_the_control_run_is_cached_in_trysquares_cache_not_in_the_run(
    trysquare_run, run_validator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trysquare_hidden_tests import control, mode

    ran: list[Path] = []

    def counting(base: Path, dest: Path) -> Path:
        ran.append(base)
        return copy_base(base, dest)

    copy_base = mode.copy_base
    monkeypatch.setattr(mode, "copy_base", counting)
    monkeypatch.setattr(control, "_MEMO", {})  # this process remembers nothing from before
    scenario = write_hidden_scenario(tmp_path / "s", PYTEST)
    exits = {"basket.py": "import os\n\nos._exit(0)\n"}  # no report in this run
    first = run_validator(basket_run(trysquare_run, "a", exits), scenario=scenario, modes=MODES)
    monkeypatch.setattr(control, "_MEMO", {})  # as a later `trysquare validate` would start
    second = run_validator(basket_run(trysquare_run, "b", exits), scenario=scenario, modes=MODES)

    assert len(ran) == 1, "the second validation ran the control again"
    assert first.metrics == second.metrics == {"resolved": False, "f2p": 0.0, "p2p": 0.0}
    assert "# control run at base (known, not rerun): reported" in second.stderr
    kept = list((tmp_path / "cache" / "trysquare" / "hidden-tests" / "control").glob("*.json"))
    assert len(kept) == 1
    for run_id in ("a", "b"):
        folder = tmp_path / "trysquare" / "runs" / run_id
        assert not [p for p in folder.rglob("*") if "control" in p.name]


def test_a_node_test_file_that_did_not_load_is_named_in_the_reason() -> None:
    # Real output of node 20's JUnit reporter: a hidden test file that cannot load is a
    # <failure> named by its path, saying only "test failed"; its tests are absent.
    report = (Path(__file__).parent / "node20-junit-load-failure.xml").read_bytes()
    metrics, reasons = judge(parse_report(report), ["test.hidden mean"], ["test.adds"])
    assert metrics == {"f2p": None, "p2p": 1.0, "resolved": None}
    assert "test./work/calc/t3/hidden.test.js: the file did not load or crashed" in reasons["f2p"]
    assert "--test-reporter=spec --test-reporter-destination=stdout" in reasons["f2p"]
