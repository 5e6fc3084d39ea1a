"""mypy over every distribution's sources is clean (the settings are [tool.mypy] in pyproject.toml)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def mypy_cache(name: str) -> str:
    """A mypy cache kept from one suite run to the next, in the user's cache folder (as uv keeps
    its own): a fresh clone then checks only what differs from the last run, by content hash
    (mypy's incremental mode compares each file's hash when its path or time is new). A cold
    cache cost most of these tests' time; what is checked is the same."""
    return str(Path(os.environ["TRYSQUARE_TESTS_USER_CACHE"], "trysquare-tests", name))


@pytest.mark.slow
def test_mypy_is_clean_over_every_distribution() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", mypy_cache("mypy")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"mypy found type errors:\n{result.stdout}{result.stderr}"
    assert "Success: no issues found" in result.stdout


@pytest.mark.slow
def test_the_documented_plugins_pass_mypy_strict(tmp_path: Path) -> None:
    from tests.test_install import kit_files

    modules = []
    for path, text in kit_files().items():
        if path.endswith(".py") and not path.rsplit("/", 1)[-1].startswith("test_"):
            target = tmp_path / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            modules.append(str(target))
    assert len(modules) == 2, modules
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", mypy_cache("mypy-kit"), *modules],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"mypy --strict:\n{result.stdout}{result.stderr}"
