"""mypy over every distribution's sources is clean (the settings are [tool.mypy] in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_mypy_is_clean_over_every_distribution() -> None:
    # The cache lives under build/ (ignored by git) so a second run takes seconds, not a minute.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / "build" / "mypy-cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"mypy found type errors:\n{result.stdout}{result.stderr}"
    assert "Success: no issues found" in result.stdout
