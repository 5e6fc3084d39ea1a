"""Shared helpers: the CLI in a subprocess, fake installed plugins, built runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from hypothesis import settings

# On CI, property tests explore the same examples every run: a failure there is
# reproducible, never a coin toss. Locally they keep exploring.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

from trysquare import plugins
from trysquare.testing import RunBuilder

from tests.helpers import fake_distribution

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


class Cli:
    """Run ``python -m trysquare`` as a user would, in a subprocess."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(
        self, *args: str | Path, cwd: Path | None = None, env: Mapping[str, str] | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trysquare", *map(str, args)],
            cwd=cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env.pop("TRYSQUARE_LOAD_PLUGINS", None)
    env.pop("TRYSQUARE_BLOCK_PLUGINS", None)
    return Cli(env)


@pytest.fixture(autouse=True)
def _fresh_plugins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test loads plugins anew, and its etalon cache is its own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    plugins.reset()


@pytest.fixture
def site(tmp_path: Path, cli: Cli) -> Callable[..., Path]:
    """Add fake installed plugins to the CLI's path (and this process's)."""
    folder = tmp_path / "site"

    def add(dist: str, module: str, source: str) -> Path:
        fake_distribution(folder, dist, module, source)
        cli.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), cli.env.get("PYTHONPATH")]))
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        return folder

    yield add
    if str(folder) in sys.path:
        sys.path.remove(str(folder))


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., RunBuilder]:
    """A run builder under ``tmp_path/exp``: call ``.base(...)``, change ``.repo``, ``.finish()``."""

    def make(run_id: str = "r1", **kwargs: object) -> RunBuilder:
        return RunBuilder(tmp_path / "exp" / "runs" / run_id, **kwargs)  # type: ignore[arg-type]

    return make
