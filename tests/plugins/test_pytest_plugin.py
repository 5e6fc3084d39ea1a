"""The pytest plugin for validator authors: docs/testing-validators.md runs as written.

The page's example is run by a separate pytest with no conftest: its fixtures
can only come from trysquare-core's `pytest11` entry point.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from trysquare.errors import ScenarioError

from tests.helpers import pytest_in

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "testing-validators.md"

WRITES_INTO_THE_CLONE = """\
import json, pathlib, sys
context = json.load(open(sys.argv[1]))
pathlib.Path(context["repo"], "stray.txt").write_text("oops")
print(json.dumps({"metrics": {"ok": True}}))
"""


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def test_the_documented_example_runs_through_the_installed_plugin(tmp_path: Path) -> None:
    validator, tests = python_blocks(PAGE.read_text(encoding="utf-8"))
    (tmp_path / "validator.py").write_text(validator, encoding="utf-8")
    (tmp_path / "validator.py").chmod(0o755)
    (tmp_path / "test_validator.py").write_text(tests, encoding="utf-8")
    done = pytest_in(tmp_path, tmp_path / "cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


def script(folder: Path, body: str) -> Path:
    path = folder / "score.py"
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(0o755)
    return path


def test_a_validator_writing_into_the_clone_is_caught(
    trysquare_run, run_validator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Detection is what is shown here; with Landlock the write fails at the write instead.
    monkeypatch.setenv("TRYSQUARE_SANDBOX", "off")
    run = trysquare_run(base={"a.py": "x = 1\n"}, changes={"a.py": "x = 2\n"})
    result = run_validator(run, script=script(tmp_path, WRITES_INTO_THE_CLONE), metrics=["ok"])
    assert result.metrics == {"ok": True}
    assert result.clone_changes is not None and "added stray.txt" in result.clone_changes


def test_an_invalid_result_is_returned_not_raised(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    run = trysquare_run(base={"a.py": "x = 1\n"})
    result = run_validator(
        run, script=script(tmp_path, "import sys; sys.exit('no')\n"), metrics=["ok"]
    )
    assert result.state == "invalid" and not result.valid
    assert "exited with code 1" in (result.error or "")
    assert "no" in result.stderr
    recorded = run.path / "validation" / "script.json"
    assert recorded.exists() and result.document["validator"]["mode"] == "script"


def test_the_context_is_the_one_trysquare_builds(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    run = trysquare_run(
        base={"a.py": "x = 1\n"},
        changes={"b.py": "new\n"},
        given={"t.py": "pass\n"},
        response="Done.",
    )
    echo = 'import json, sys; print(json.dumps({"metrics": {"ok": True}}))\n'
    result = run_validator(run, script=script(tmp_path, echo), metrics=["ok"], test_command="true")
    assert result.context["touched"] == ["b.py"]
    assert result.context["given"] == ["t.py"]
    assert result.context["test_command"] == "true"
    assert Path(result.context["response"]).read_text() == "Done."


def test_a_scenario_that_does_not_load_is_refused(
    trysquare_run, run_validator, tmp_path: Path
) -> None:
    run = trysquare_run(base={"a.py": "x = 1\n"})
    scenario = tmp_path / "scenario.toml"
    scenario.write_text('[[validation]]\nmode = "nope"\nmetrics = ["ok"]\n')
    with pytest.raises(ScenarioError, match="no installed plugin provides mode 'nope'"):
        run_validator(run, scenario=scenario)
    with pytest.raises(TypeError):
        run_validator(run)
