"""The command line's own process skips the interpreter's last cyclic collection, and ends
at once (``os._exit`` once its output is flushed and ``atexit`` has run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from trysquare import cli

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
# (buffered, never closed) written out. ``--as-trysquare``: the process says it was started
# as ``python -m trysquare`` (its ``sys.orig_argv``), as the console script's would.
ENDING = """
import atexit, sys, threading, time

left_open = open(sys.argv.pop(), "w")
left_open.write("taken apart")
atexit.register(lambda: print("atexit ran"))
if "--as-trysquare" in sys.argv:
    sys.argv.remove("--as-trysquare")
    sys.orig_argv = [sys.executable, "-m", "trysquare", *sys.argv[1:]]
import trysquare.cli
if "--late-thread" in sys.argv:
    sys.argv.remove("--late-thread")
    returned = threading.Event()
    command = trysquare.cli._command

    def noted(argv):
        try:
            return command(argv)
        finally:
            returned.set()

    trysquare.cli._command = noted
    # Still running when the command has returned, whatever the machine's speed.
    threading.Thread(
        target=lambda: (returned.wait(), time.sleep(0.2), print("thread finished"))
    ).start()
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
    argv = ["validate", str(scenario), str(experiment), "--no-progress", "--as-trysquare"]
    left_open = tmp_path / "left-open.txt"
    code, lines = _ending("raise SystemExit(main())", argv, cli_process.env, left_open)
    # Its atexit functions ran and every line it printed came out; its objects were left to
    # the exit, not taken apart one by one.
    assert code == 0
    assert lines[-2:] == ["1 run: 1 valid", "atexit ran"]
    assert left_open.read_text() == ""
    # A machine-readable document reaches its reader whole.
    code, lines = _ending(
        "raise SystemExit(main())",
        ["report", str(scenario), str(experiment), "--format", "json", "--as-trysquare"],
        cli_process.env,
        left_open,
    )
    assert code == 0 and lines[-1] == "atexit ran"
    assert json.loads("\n".join(lines[:-1]))["schema_version"]


def test_a_program_that_calls_main_goes_on_and_ends_the_ordinary_way(
    cli_process, make_run, tmp_path: Path
) -> None:
    scenario = scored_run(make_run, tmp_path)
    argv = ["validate", str(scenario), str(tmp_path / "exp"), "--no-progress"]
    left_open = tmp_path / "left-open.txt"
    # main() on the process's own arguments, in a program started otherwise (a wrapper, a
    # profiler): what the program keeps is taken apart, and written out, as it ends.
    code, lines = _ending("raise SystemExit(main())", argv, cli_process.env, left_open)
    assert code == 0 and lines[-2:] == ["1 run: 1 valid", "atexit ran"]
    assert left_open.read_text() == "taken apart"
    # A caller of main(argv) goes on after it.
    code, lines = _ending("main(sys.argv[1:]); print('went on')", argv, cli_process.env, left_open)
    assert code == 0 and lines[-2:] == ["went on", "atexit ran"]
    assert left_open.read_text() == "taken apart"


@pytest.mark.parametrize(
    ("orig_argv", "as_trysquare"),
    [
        (["python", "-m", "trysquare", "validate"], True),
        (["python", "-mtrysquare", "report"], True),
        (["python", "-X", "importtime", "-B", "-m", "trysquare"], True),
        (["/venv/bin/python", "/venv/bin/trysquare", "validate", "-m", "x"], True),
        (["python", "-m", "cProfile", "-m", "trysquare", "validate"], False),
        (["python", "-c", "from trysquare.cli import main; main()"], False),
        (["python", "wrapper.py", "validate"], False),
        (["python", "-", "validate"], False),
        (["python"], False),
    ],
)
def test_what_counts_as_trysquares_own_command_line(
    monkeypatch: pytest.MonkeyPatch, orig_argv: list[str], as_trysquare: bool
) -> None:
    monkeypatch.setattr(sys, "orig_argv", orig_argv)
    monkeypatch.setattr(sys, "warnoptions", [])
    assert cli._started_as_trysquare() is as_trysquare
    # A warning filter asked for on the command line is honoured by the ordinary exit.
    monkeypatch.setattr(sys, "warnoptions", ["error"])
    assert cli._started_as_trysquare() is False


def test_a_thread_still_running_is_waited_for_the_ordinary_way(
    cli_process, make_run, tmp_path: Path
) -> None:
    scenario = scored_run(make_run, tmp_path)
    argv = ["validate", str(scenario), str(tmp_path / "exp"), "--no-progress"]
    left_open = tmp_path / "left-open.txt"
    code, lines = _ending(
        "raise SystemExit(main())",
        [*argv, "--late-thread", "--as-trysquare"],
        cli_process.env,
        left_open,
    )
    assert code == 0
    # The exit waited for it before its atexit functions, as the interpreter's does (ended
    # at once, the process would have ended it before it printed).
    assert lines[-2:] == ["thread finished", "atexit ran"]


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


def test_trysquares_own_plugins_are_told_apart_from_anothers_code(
    site, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trysquare import plugins
    from trysquare.hookspecs import hookimpl

    # Only the distributions `pip install trysquare` brings (the others installed here are
    # plugins like any third party's).
    monkeypatch.setenv("TRYSQUARE_LOAD_PLUGINS", ",".join(plugins.BUILTIN_DISTRIBUTIONS))
    plugins.reset()
    assert plugins.only_builtin_code()  # nothing loaded
    plugins.get_manager()
    assert plugins.only_builtin_code()

    class Mine:
        @hookimpl
        def trysquare_metrics_collected(self, run, validation, outcome):  # type: ignore[no-untyped-def]
            pass

    # A plugin registered by hand.
    plugins.get_manager().register(Mine(), name="mine")
    assert not plugins.only_builtin_code()
    # A plugin that failed to import ran code all the same.
    site("trysquare-broken", "trysquare_broken", "raise RuntimeError('broken at import')\n")
    monkeypatch.delenv("TRYSQUARE_LOAD_PLUGINS")
    monkeypatch.setenv("TRYSQUARE_BLOCK_PLUGINS", "trysquare-dask,trysquare-hidden-tests")
    plugins.reset()
    plugins.get_manager()
    assert "trysquare-broken" in plugins._get_state().failures
    assert not plugins.only_builtin_code()
