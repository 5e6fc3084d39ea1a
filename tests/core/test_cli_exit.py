"""The command line's own process skips the interpreter's last cyclic collection."""

from __future__ import annotations

import json
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


# What the command's atexit functions said, what a thread it did not wait for wrote, and
# whether its process took its objects apart on the way out: only then is a file left open
# (buffered, never closed) written out.
ENDING = """
import atexit, sys, threading, time

left_open = open(sys.argv.pop(), "w")
left_open.write("taken apart")
atexit.register(lambda: print("atexit ran"))
if "--late-thread" in sys.argv:
    sys.argv.remove("--late-thread")
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread finished"))).start()
from trysquare.cli import main
{call}
"""


def _ending(
    call: str, argv: list[str], env: dict[str, str], left_open: Path
) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", ENDING.format(call=call), *argv, str(left_open)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout.splitlines()


def test_the_command_lines_process_ends_at_once_after_atexit_with_its_output_whole(
    cli_process, make_run, tmp_path: Path
) -> None:
    scenario = scored_run(make_run, tmp_path)
    experiment = tmp_path / "exp"
    argv = ["validate", str(scenario), str(experiment), "--no-progress"]
    left_open = tmp_path / "left-open.txt"
    code, lines = _ending("raise SystemExit(main())", argv, cli_process.env, left_open)
    # Its atexit functions ran and every line it printed came out; its objects were left to
    # the exit, not taken apart one by one.
    assert code == 0
    assert lines[-2:] == ["1 run: 1 valid", "atexit ran"]
    assert left_open.read_text() == ""
    # A caller of main(argv) goes on: its process ends the ordinary way.
    code, lines = _ending("main(sys.argv[1:])", argv, cli_process.env, left_open)
    assert code == 0 and lines[-1] == "atexit ran"
    assert left_open.read_text() == "taken apart"
    # A machine-readable document reaches its reader whole.
    code, lines = _ending(
        "raise SystemExit(main())",
        ["report", str(scenario), str(experiment), "--format", "json"],
        cli_process.env,
        left_open,
    )
    assert code == 0 and lines[-1] == "atexit ran"
    assert json.loads("\n".join(lines[:-1]))["schema_version"]


def test_a_thread_still_running_is_waited_for_the_ordinary_way(
    cli_process, make_run, tmp_path: Path
) -> None:
    scenario = scored_run(make_run, tmp_path)
    argv = ["validate", str(scenario), str(tmp_path / "exp"), "--no-progress", "--late-thread"]
    left_open = tmp_path / "left-open.txt"
    code, lines = _ending("raise SystemExit(main())", argv, cli_process.env, left_open)
    assert code == 0
    # The exit waited for it before its atexit functions, as the interpreter's does.
    assert lines[-2:] == ["thread finished", "atexit ran"]
    assert left_open.read_text() == "taken apart"


# A plugin that keeps a file open, buffered, never closed: only its finalizer writes it out.
LEAKY = """
from trysquare.hookspecs import hookimpl

log = open({path!r}, "w", buffering=1 << 16)

@hookimpl
def trysquare_metrics_collected(run, validation, outcome):
    log.write(f"{{run.id}} {{validation.name}}\\n")
"""


def test_a_process_that_imported_another_plugin_ends_the_ordinary_way(
    cli_process, site, make_run, tmp_path: Path
) -> None:
    written = tmp_path / "plugin.log"
    site("trysquare-leaky", "trysquare_leaky", LEAKY.format(path=str(written)))
    scenario = scored_run(make_run, tmp_path)
    done = cli_process("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 0, done.stderr
    # Its objects were taken apart as the interpreter ends: the open file was written out.
    assert written.read_text(encoding="utf-8") == "r1 script\n"
