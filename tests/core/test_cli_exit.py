"""The command line's own process skips the interpreter's last cyclic collection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import scored_run

# What the collector holds frozen once the command has returned (read at exit, after it).
PROBE = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count() > 0))
from trysquare.cli import main
{call}
"""


def _frozen_at_exit(call: str, argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(call=call), *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout.strip().splitlines()[-1]


def test_the_command_lines_process_freezes_what_it_built_and_a_caller_keeps_its_collector(
    cli_process, make_run, tmp_path: Path
) -> None:
    scenario = scored_run(make_run, tmp_path)
    argv = ["validate", str(scenario), str(tmp_path / "exp"), "--no-progress"]
    # The console script and `python -m trysquare` call main() with the process's arguments.
    assert _frozen_at_exit("raise SystemExit(main())", argv, cli_process.env) == (0, "frozen True")
    # A caller handing its own arguments goes on after: its collector is left as it was.
    assert _frozen_at_exit("main(sys.argv[1:])", argv, cli_process.env) == (0, "frozen False")
    # The work was done and recorded all the same.
    assert list((tmp_path / "exp").rglob("validation/*.json"))
