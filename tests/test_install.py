"""A real install: every distribution built as a wheel, installed in one fresh venv, used there.

One venv per session: every distribution of the repository, the plugins included (the
suite's wheels, `uv build --all-packages`, see tests/venvs.py), and the two plugins that
docs/plugins.md opens with, built from the page itself. Third-party dependencies come from
uv's cache (offline when it can), trysquare's own only from the wheels (`--no-index
--find-links`), so nothing published under the same names can stand in.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import attrs
import pytest

from tests.helpers import private_tmp
from tests.venvs import ROOT, Venv, build_wheels, install, uv, uv_env, wheelhouse

pytestmark = pytest.mark.slow

PLUGINS_PAGE = ROOT / "docs" / "plugins.md"
# Installed into the venv: the meta distribution pulls in the five it names.
INSTALLED = (
    "trysquare",
    "trysquare-hidden-tests",
    "trysquare-anthropic",
    "trysquare-fewfiles",
    "trysquare-local",
)
_BLOCK = re.compile(
    r"^```(?:toml|python)\n# (trysquare-[a-z-]+/[\w.]+)\n(.*?)^```$", re.MULTILINE | re.DOTALL
)


def kit_files(page: Path = PLUGINS_PAGE) -> dict[str, str]:
    """The files docs/plugins.md shows, by path (each block's first line names its file)."""
    return {
        path: f"# {path}\n{body}" for path, body in _BLOCK.findall(page.read_text(encoding="utf-8"))
    }


@attrs.frozen
class Installed:
    venv: Venv
    dist: Path
    kit: Path  # the documented plugins' folders, as written from the page


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("install")
    dist, kit = root / "dist", root / "kit"
    for path, text in kit_files().items():
        (kit / path).parent.mkdir(parents=True, exist_ok=True)
        (kit / path).write_text(text, encoding="utf-8")
    # The repository's wheels (shared by the suite's venvs) beside the page's two plugins.
    shutil.copytree(wheelhouse(tmp_path_factory), dist)
    build_wheels(sorted(kit.iterdir()), dist)
    venv = root / "venv"
    subprocess.run(
        [uv(), "venv", "--quiet", "--python", sys.executable, str(venv)], env=uv_env(),
        check=True, capture_output=True,
    )  # fmt: skip
    install(venv, dist, INSTALLED, ["pytest>=8"])
    return Installed(Venv(venv), dist, kit)


def test_every_distribution_in_the_repository_builds_a_wheel(installed: Installed) -> None:
    declared = {
        tomllib.loads(path.read_text(encoding="utf-8"))["project"]["name"]
        for path in [
            ROOT / "pyproject.toml",
            *ROOT.glob("*/pyproject.toml"),
            *ROOT.glob("plugins/*/pyproject.toml"),
        ]
    }
    built = {wheel.name.split("-")[0].replace("_", "-") for wheel in installed.dist.glob("*.whl")}
    assert declared <= built, f"not built: {sorted(declared - built)}"
    assert {"trysquare-fewfiles", "trysquare-local"} <= built  # the page's two plugins


def test_pip_install_trysquare_then_demo_works_without_a_checkout(
    installed: Installed, tmp_path: Path
) -> None:
    where = installed.venv.python(
        "-c",
        "import trysquare.demo as d; print(d.__file__); print(d.find_examples())",
        cwd=tmp_path,
    )
    assert where.returncode == 0, where.stderr
    module, examples = where.stdout.split()
    assert module.startswith(str(installed.venv.path)) and "site-packages" in module
    assert examples == str(Path(module).parent / "_examples")  # the package data, not a checkout
    done = installed.venv.trysquare(
        "demo",
        tmp_path / "demo",
        "--no-progress",
        cwd=tmp_path,
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| nothing (reference) | 3 | 3/3 | 2/3 | 2/3 | 2/3 |" in done.stdout
    assert "form form.toml: 6 merged, 0 still pending, 0 refused" in done.stdout
    assert (
        tmp_path / "demo" / "report.html"
    ).is_file()  # trysquare-view came with the meta distribution


def test_plugins_lists_every_installed_plugin(installed: Installed, tmp_path: Path) -> None:
    done = installed.venv.trysquare("plugins", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in (
        "trysquare-script",
        "trysquare-judge",
        "trysquare-form",
        "trysquare-view",
        "trysquare-hidden-tests",
        "trysquare-anthropic",
        "trysquare-fewfiles",
        "trysquare-local",
    ):
        assert re.search(rf"^{name} 0\.1\.0 ", done.stdout, re.MULTILINE), done.stdout
    assert "FAILED" not in done.stdout
    assert "modes: fewfiles" in done.stdout and "providers: local" in done.stdout


def test_the_documented_plugins_pass_their_own_tests_installed(
    installed: Installed, tmp_path: Path
) -> None:
    tests = sorted(str(p) for p in installed.kit.glob("*/test_*.py"))
    assert len(tests) == 2
    env = installed.venv.env(
        XDG_CACHE_HOME=str(tmp_path / "cache"), TMPDIR=str(private_tmp(tmp_path))
    )
    env.pop(
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
    )  # the fixtures come from trysquare-core's pytest11 entry point
    done = subprocess.run(
        [
            str(installed.venv.bin / "python"),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *tests,
        ],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


def test_the_documented_plugins_run_through_validate(installed: Installed, tmp_path: Path) -> None:
    from trysquare.testing import build_run

    from tests.judge.chatserver import ChatServer, script, verdict

    build_run(
        tmp_path / "runs" / "r1",
        base={"a.py": "x = 1\n", "b.py": "y = 1\n"},
        changes={"a.py": "x = 2\n"},
    )
    (tmp_path / "rubric.md").write_text("Is the change readable? Call the tool either way.\n")
    with ChatServer(script([verdict({"readable": True}, "one clear line")])) as server:
        (tmp_path / "trysquare.toml").write_text(
            f'[providers.mine]\ntype = "local"\nbase_url = "{server.base_url}"\n'
        )
        (tmp_path / "scenario.toml").write_text(
            '[[validation]]\nmode = "fewfiles"\nmax_files = 1\nmetrics = ["focused"]\n\n'
            '[[validation]]\nmode = "judge"\nprovider = "mine"\nmodel = "qwen3"\nthinking = "off"\n'
            'rubric = "rubric.md"\npieces = ["diff"]\nmetrics = ["readable"]\n'
        )
        done = installed.venv.trysquare(
            "validate",
            "scenario.toml",
            "runs",
            "--no-progress",
            cwd=tmp_path,
            XDG_CACHE_HOME=str(tmp_path / "cache"),
        )
        sent = server.received
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 run: 1 valid" in done.stdout
    assert len(sent) == 1 and sent[0].body["model"] == "qwen3"  # the judge went through `local`
    measures = (tmp_path / "runs" / "measures.json").read_text()
    assert '"focused": true' in measures and '"readable": true' in measures


PEBBLE_PYPROJECT = """\
[project]
name = "trysquare-pebble"
version = "0.1.0"
requires-python = ">=3.11"

[project.entry-points.trysquare]
trysquare-pebble = "trysquare_pebble"

[build-system]
requires = ["hatchling>=1.24"]
build-backend = "hatchling.build"
"""
PEBBLE_MODULE = '''\
"""A plugin made by a test: registers mode "pebble"."""

from trysquare import hookimpl


class PebbleMode:
    name = "pebble"

    def load(self, table, source):
        raise AssertionError("never loaded here")


@hookimpl
def trysquare_register_modes(register):
    register(PebbleMode())
'''


def test_trysquare_install_adds_a_local_plugin_package_and_uninstall_removes_it(
    installed: Installed, tmp_path: Path
) -> None:
    import json

    plugin = tmp_path / "trysquare-pebble"
    plugin.mkdir()
    (plugin / "pyproject.toml").write_text(PEBBLE_PYPROJECT, encoding="utf-8")
    (plugin / "trysquare_pebble.py").write_text(PEBBLE_MODULE, encoding="utf-8")
    cache = str(tmp_path / "cache")
    done = installed.venv.trysquare("install", plugin, cwd=tmp_path, XDG_CACHE_HOME=cache)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        listing = installed.venv.trysquare("plugins", "--json", cwd=tmp_path, XDG_CACHE_HOME=cache)
        entry = {e["name"]: e for e in json.loads(listing.stdout)}["trysquare-pebble"]
        assert entry["modes"] == ["pebble"] and entry["schema_version"] == 1
    finally:
        removed = installed.venv.trysquare("uninstall", "trysquare-pebble", cwd=tmp_path)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    listing = installed.venv.trysquare("plugins", "--json", cwd=tmp_path, XDG_CACHE_HOME=cache)
    assert "trysquare-pebble" not in listing.stdout


def test_the_actions_steps_run_with_the_installed_trysquare(
    installed: Installed, make_run, tmp_path: Path
) -> None:
    import yaml

    from tests.core.test_action import Runner
    from tests.core.test_ci_outputs import build

    scenario, experiment = build(make_run, tmp_path)
    summary = tmp_path / "summary.md"
    summary.touch()
    env = installed.venv.env(
        XDG_CACHE_HOME=str(tmp_path / "cache"), GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(tmp_path),
    )  # fmt: skip
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    runner = Runner(
        action, {"scenario": str(scenario), "paths": str(experiment), "install": "false"}, env
    )
    runner.run(tmp_path)
    assert runner.outputs["validate"] == {"exit-code": "1"}, runner.logs
    assert "::error title=trysquare script%3A failed (r1)::" in runner.logs["Validate"]
    assert summary.read_text(encoding="utf-8").startswith("#")
    assert (tmp_path / "trysquare-junit.xml").is_file()


def test_plain_pip_in_a_python_venv_installs_trysquare_all_and_uses_it(
    tmp_path_factory: pytest.TempPathFactory, make_run, tmp_path: Path
) -> None:
    """Issue 32: no uv at all. ``python3 -m venv``, then pip: trysquare's own wheels with
    ``--no-index`` (nothing published under its names can stand in), then ``trysquare[all]``
    with its third-party dependencies from the index; the demo, ``trysquare install`` of a local
    plugin package and the action's steps work there."""
    import yaml

    from tests.core.test_action import Runner
    from tests.core.test_ci_outputs import build

    dist = wheelhouse(tmp_path_factory)
    venv = tmp_path / "pipvenv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    # pip's downloads are kept from one suite run to the next (each test's own XDG_CACHE_HOME
    # made it fetch dask and the rest again every time); the index is still asked what to take.
    # No bytecode at install: the commands below compile what they import, no more.
    pip_env = {
        **os.environ,
        "PIP_CACHE_DIR": str(
            Path(os.environ["TRYSQUARE_TESTS_USER_CACHE"], "trysquare-tests", "pip")
        ),
    }
    ours = sorted(str(wheel) for wheel in dist.glob("trysquare*.whl"))
    done = subprocess.run(
        [*pip, "install", "--no-compile", "--no-index", "--no-deps", *ours],
        env=pip_env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [*pip, "install", "--no-compile", "--find-links", str(dist), "trysquare[all]"],
        env=pip_env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    checked = subprocess.run(
        [*pip, "check"], capture_output=True, text=True, timeout=120, check=False
    )
    assert checked.returncode == 0, checked.stdout
    assert not (venv / "bin" / "uv").exists()
    installed = Venv(venv)
    cache = str(tmp_path / "cache")
    demo = installed.trysquare(
        "demo", tmp_path / "demo", "--no-progress", cwd=tmp_path, XDG_CACHE_HOME=cache
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    listing = installed.trysquare("plugins", cwd=tmp_path, XDG_CACHE_HOME=cache)
    for name in ("trysquare-dask", "trysquare-hidden-tests", "trysquare-anthropic"):
        assert name in listing.stdout, listing.stdout
    plugin = tmp_path / "trysquare-pebble"
    plugin.mkdir()
    (plugin / "pyproject.toml").write_text(PEBBLE_PYPROJECT, encoding="utf-8")
    (plugin / "trysquare_pebble.py").write_text(PEBBLE_MODULE, encoding="utf-8")
    added = installed.trysquare("install", plugin, cwd=tmp_path, XDG_CACHE_HOME=cache)
    assert added.returncode == 0, added.stdout + added.stderr
    assert "trysquare-pebble" in installed.trysquare("plugins", cwd=tmp_path).stdout
    scenario, experiment = build(make_run, tmp_path)
    summary = tmp_path / "summary.md"
    summary.touch()
    env = installed.env(
        XDG_CACHE_HOME=cache,
        GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_ACTIONS="true",
        GITHUB_WORKSPACE=str(tmp_path),
    )
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    runner = Runner(
        action, {"scenario": str(scenario), "paths": str(experiment), "install": "false"}, env
    )
    runner.run(tmp_path)
    assert runner.outputs["validate"] == {"exit-code": "1"}, runner.logs
    assert summary.read_text(encoding="utf-8").startswith("#")
