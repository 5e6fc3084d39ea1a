"""``check`` says where the suite's command resolves, and warns when it is trysquare's own
environment (issue 30)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import write_scenario, write_script

SCENARIO = """
[task]
test_command = "{command}"

[[validation]]
mode = "script"
command = "score.py"
metrics = ["ok"]
"""


def _scenario(tmp_path: Path, command: str) -> Path:
    write_script(tmp_path / "s", "score.py", "print('{}')\n")
    return write_scenario(tmp_path / "s", SCENARIO.format(command=command))


def test_check_warns_when_python3_is_trysquares_own_environment(cli, tmp_path: Path) -> None:
    done = cli("check", _scenario(tmp_path, "python3 -m pytest"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    where = next(line for line in lines if line.startswith("suite: python3 is "))
    assert where.startswith(f"suite: python3 is {Path(sys.executable).parent}")
    assert "site-packages: " in where
    warning = next(line for line in lines if line.startswith("! suite: python3 is trysquare's own"))
    assert "test_command = " in warning


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no system python3")
def test_check_names_another_interpreter_without_warning(cli, tmp_path: Path) -> None:
    if Path(sys.prefix).resolve() == Path("/usr"):
        pytest.skip("trysquare runs in the system interpreter here")
    done = cli("check", _scenario(tmp_path, "/usr/bin/python3 -m pytest"))
    assert done.returncode == 0, done.stderr
    assert "suite: /usr/bin/python3 is /usr/bin/python3 (site-packages: " in done.stdout
    assert "! suite:" not in done.stdout


def test_check_says_an_ignored_node_modules_needs_a_prepare(cli, tmp_path: Path) -> None:
    from trysquare.testing import build_run

    run = build_run(
        tmp_path / "exp" / "runs" / "a1",
        base={".gitignore": "node_modules/\n", "package.json": "{}\n"},
        changes={"node_modules/mocha/index.js": "x\n"},
    )
    scenario = _scenario(tmp_path, "node_modules/.bin/mocha")
    done = cli("check", scenario, tmp_path / "exp")
    assert done.returncode == 0, done.stderr
    warning = next(line for line in done.stdout.splitlines() if "node_modules/ in" in line)
    assert warning.startswith("! suite: 1 run(s) hold node_modules/ in their clone (e.g. ")
    assert str(run.repo.path / "node_modules") in warning
    assert 'prepare = ["npm ci --no-audit --no-fund"]' in warning
    # With a prepare declared, nothing is said.
    text = scenario.read_text().replace("[task]", '[task]\nprepare = ["npm ci"]')
    scenario.write_text(text)
    again = cli("check", scenario, tmp_path / "exp")
    assert "node_modules/ in" not in again.stdout
