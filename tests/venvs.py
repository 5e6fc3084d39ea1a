"""Fresh virtual environments holding only what a test installs, as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


class Venv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.bin = path / "bin"

    def env(self, **extra: str) -> dict[str, str]:
        # An activated environment: `python` in a scenario's command is this one.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRYSQUARE_", "PYTEST_"))}
        env.update(VIRTUAL_ENV=str(self.path), PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}")
        env.pop("PYTHONPATH", None)
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # a measured suite needs no plugin
        env.update(extra)
        return env

    def trysquare(self, *args: str | Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "trysquare"), *map(str, args)],
            cwd=cwd,
            check=False,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=300,
        )

    def python(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "python"), *args], cwd=cwd, check=False, env=self.env(),
            capture_output=True, text=True, timeout=300,
        )


def build_venv(path: Path, folders: Sequence[str], extra: Sequence[str] = ()) -> Venv:
    """``uv venv`` at ``path``, then ``uv pip install`` of these repository folders (and ``extra``)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (.ci/run installs it)")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}

    def uv_run(*args: str) -> None:
        done = subprocess.run(
            [uv, *args], cwd=path.parent, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert done.returncode == 0, f"uv {' '.join(args)} failed:\n{done.stderr}"

    uv_run("venv", "--quiet", "--python", sys.executable, str(path))
    # --refresh-package: uv would otherwise reuse a wheel built before the sources changed.
    names = [Path(folder).name.replace("_", "-") for folder in folders]
    refresh = [arg for name in names for arg in ("--refresh-package", name)]
    uv_run(
        "pip", "install", "--quiet", "--python", str(path / "bin" / "python"), *refresh,
        *(str(ROOT / folder) for folder in folders), *extra,
    )
    return Venv(path)
