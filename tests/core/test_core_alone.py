"""trysquare-core installed alone, in a fresh environment: it loads, lists no mode, names the missing plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import write_scenario
from tests.venvs import Venv, build_venv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def core_alone(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return build_venv(tmp_path_factory, "core-alone", ["trysquare_core"])


def test_core_alone_lists_no_mode(core_alone: Venv, tmp_path: Path) -> None:
    done = core_alone.trysquare("plugins", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert [entry for entry in listing if entry["modes"]] == []
    assert all(entry["error"] is None for entry in listing)
    imported = core_alone.python(
        "-c", "import trysquare.assay, trysquare.runner, trysquare.report", cwd=tmp_path
    )
    assert imported.returncode == 0, imported.stderr


@pytest.mark.parametrize(
    ("mode", "distribution"), [("judge", "trysquare-judge"), ("script", "trysquare-script")]
)
def test_core_alone_names_the_plugin_to_install(
    core_alone: Venv, tmp_path: Path, mode: str, distribution: str
) -> None:
    scenario = write_scenario(tmp_path, f'[[validation]]\nmode = "{mode}"\nmetrics = ["ok"]\n')
    done = core_alone.trysquare("check", scenario, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"trysquare: scenario.toml: [[validation]][1].mode: no installed plugin provides mode "
        f"'{mode}' (pip install {distribution})"
    )
