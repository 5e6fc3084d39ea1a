"""Issue 8's check: the hidden-tests plugin installed as a user would, in a fresh environment.

One virtual environment per test session holds only trysquare-core,
trysquare-script, the plugin (built from its folder, found through its entry
point) and pytest — the measured project's test runner, not trysquare's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugins.basket_project import BASE, FIX, NO_FIX, write_hidden_scenario
from tests.venvs import Venv, build_venv

pytestmark = pytest.mark.slow

LOCAL = ["trysquare_core", "trysquare_script", "plugins/trysquare-hidden-tests"]
COMMAND = "python -m pytest -q -p no:cacheprovider --junitxml={junit}"


@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return build_venv(tmp_path_factory, "venv", LOCAL, ["pytest"])


def plugin_listing(venv: Venv, cwd: Path, **env: str) -> dict[str, dict]:
    done = venv.trysquare("plugins", "--json", cwd=cwd, **env)
    assert done.returncode == 0, done.stderr
    return {entry["name"]: entry for entry in json.loads(done.stdout)}


def test_the_installed_plugin_is_listed_with_its_mode(venv: Venv, tmp_path: Path) -> None:
    listing = plugin_listing(venv, tmp_path)
    assert listing["trysquare-hidden-tests"]["modes"] == ["hidden-tests"]
    assert listing["trysquare-hidden-tests"]["hooks"] == ["trysquare_register_modes"]
    assert listing["trysquare-hidden-tests"]["error"] is None
    # Only what was installed: core, script, the plugin.
    assert not {"trysquare-judge", "trysquare-form"} & set(listing)


def test_blocking_the_plugin_hides_it_and_refuses_its_mode(venv: Venv, tmp_path: Path) -> None:
    listing = plugin_listing(venv, tmp_path, TRYSQUARE_BLOCK_PLUGINS="trysquare-hidden-tests")
    assert "trysquare-hidden-tests" not in listing
    scenario = write_hidden_scenario(tmp_path / "s", COMMAND)
    done = venv.trysquare(
        "check", scenario, cwd=tmp_path, TRYSQUARE_BLOCK_PLUGINS="trysquare-hidden-tests"
    )
    assert done.returncode == 2, done.stderr
    assert (
        "no installed plugin provides mode 'hidden-tests' (pip install trysquare-hidden-tests)"
        in done.stderr
    )
    assert venv.trysquare("check", scenario, cwd=tmp_path).returncode == 0


def test_validate_a_fixed_and_an_unfixed_run(venv: Venv, trysquare_run, tmp_path: Path) -> None:
    fixed = trysquare_run("fixed", base=BASE, changes=FIX, cell="fixed")
    unfixed = trysquare_run("unfixed", base=BASE, changes=NO_FIX, cell="unfixed")
    experiment = fixed.path.parent
    scenario = write_hidden_scenario(tmp_path / "s", COMMAND)

    done = venv.trysquare(
        "validate",
        scenario,
        experiment,
        "--no-progress",
        "--jobs",
        "2",
        cwd=tmp_path,
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    assert done.returncode == 0, done.stdout + done.stderr

    def result(run) -> dict:
        return json.loads((run.path / "validation" / "hidden-tests.json").read_text())

    good, bad = result(fixed), result(unfixed)
    assert good["state"] == bad["state"] == "valid"
    assert good["metrics"] == {"resolved": True, "f2p": 1.0, "p2p": 1.0}, good["reasons"]
    assert bad["metrics"] == {"resolved": False, "f2p": 0.0, "p2p": 1.0}, bad["reasons"]
    assert good["validator"]["mode"] == "hidden-tests"
    # The clone of the unfixed run still holds the agent-visible placeholder.
    assert (unfixed.repo.path / "tests" / "test_hidden.py").read_text() == BASE[
        "tests/test_hidden.py"
    ]
