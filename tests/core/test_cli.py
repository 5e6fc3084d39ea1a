"""The command line itself: exit codes, refusals, ``--debug``, and the in-process ``cli`` fixture.

Most of the suite calls ``trysquare.cli.main`` in this process through the
``cli`` fixture; the tests here that need a real process (the console script's
exit code, a traceback printed by the interpreter) use ``cli_process``, and one
test shows the two agree on what a user sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from trysquare import __version__

from tests.helpers import write_scenario

PLUGIN = """\
from trysquare import hookimpl

class Mode:
    name = "{name}"

@hookimpl
def trysquare_register_modes(register):
    register(Mode())
"""


def test_debug_shows_the_traceback(cli_process, tmp_path: Path) -> None:
    # The interpreter printing the traceback is the point: a real process.
    done = cli_process("--debug", "check", write_scenario(tmp_path, "[taks]\n"))
    assert done.returncode != 0 and "Traceback" in done.stderr


def test_the_console_script_exits_with_the_refusal_code(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "trysquare"
    scenario = write_scenario(tmp_path, "[taks]\n")
    done = subprocess.run(
        [str(script), "check", str(scenario)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("trysquare: scenario.toml: ") and "Traceback" not in done.stderr
    version = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, check=False
    )
    assert (version.returncode, version.stdout) == (0, f"trysquare {__version__}\n")


def test_in_process_and_subprocess_say_the_same(cli, cli_process, tmp_path: Path) -> None:
    scenario = write_scenario(
        tmp_path, "[[validation]]\nmode = 'script'\ncommand = 'nowhere.py'\nmetrics = ['a']\n"
    )
    for args in (("check", scenario), ("--version",), ("validate",), ("nosuchcommand",)):
        inside, outside = cli(*args), cli_process(*args)
        assert (inside.returncode, inside.stdout, inside.stderr) == (
            outside.returncode,
            outside.stdout,
            outside.stderr,
        ), args


@pytest.mark.fast
def test_each_call_loads_the_plugins_it_is_given_and_leaves_nothing_behind(
    cli, site, tmp_path: Path
) -> None:
    before_cwd = Path.cwd()
    assert "first-mode" not in cli("plugins", cwd=tmp_path).stdout
    folder = site("trysquare-fake", "trysquare_fake_cli", PLUGIN.format(name="first-mode"))
    before_path = list(sys.path)
    assert "first-mode" in cli("plugins", cwd=tmp_path).stdout
    # Blocked by name for one call only: the environment is the call's, not the process's.
    blocked = cli("plugins", env={"TRYSQUARE_BLOCK_PLUGINS": "trysquare-fake"})
    assert "first-mode" not in blocked.stdout and "TRYSQUARE_BLOCK_PLUGINS" not in os.environ
    assert "first-mode" in cli("plugins").stdout
    assert Path.cwd() == before_cwd and sys.path == before_path and sys.path.count(str(folder)) == 1
    assert "trysquare_fake_cli" not in sys.modules  # the next test may ship other code by that name


@pytest.mark.fast
def test_help_and_usage_errors_are_return_codes_not_exits(cli) -> None:
    assert cli("--help").returncode == 0
    usage = cli("validate")
    assert usage.returncode == 2 and usage.stderr.startswith("usage: trysquare validate")
    assert "trysquare validate: the following arguments are required" in usage.stderr
