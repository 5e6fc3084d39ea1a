"""ruff's lint rules and its format hold over the whole repository (settings: [tool.ruff] in
pyproject.toml, with ruff pinned in the dev group). `.ci/run` runs the suite, so CI runs both."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> str:
    # The dev group's ruff, beside this interpreter; on PATH otherwise.
    beside = Path(sys.executable).with_name("ruff")
    found = str(beside) if beside.exists() else shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: it is in the dev group (uv sync installs it)")
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_ruff(), *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def test_ruff_check_is_clean() -> None:
    done = _run("check", "--no-cache", ".")
    assert done.returncode == 0, f"ruff check found problems:\n{done.stdout}{done.stderr}"


def test_ruff_format_leaves_every_file_as_it_is() -> None:
    done = _run("format", "--check", "--no-cache", ".")
    assert done.returncode == 0, f"ruff format would change files:\n{done.stdout}{done.stderr}"
