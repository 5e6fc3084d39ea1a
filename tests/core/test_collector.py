"""The command line's cyclic collector: off while a command starts, on for its work.

Each command runs in a process of its own, started as the console script starts it
(``trysquare._console.main``), with a probe that records every collection and whether
the collector was on when the runs were loaded and when the command ended.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from trysquare.cli import main

from tests.helpers import scored_run

# Counts collections; marks the moment experiments start loading and what the
# collector was then; prints it all, as JSON, on the command's way out.
PROBE = """
import atexit, gc, json, sys
import trysquare.runs
seen = {"collections": 0, "before_load": None, "on_at_load": None}
gc.callbacks.append(
    lambda phase, info: phase == "start" and seen.__setitem__("collections", seen["collections"] + 1)
)
load = trysquare.runs.load_experiments
def loading(*args, **kwargs):
    seen["before_load"] = seen["collections"]
    seen["on_at_load"] = gc.isenabled()
    return load(*args, **kwargs)
trysquare.runs.load_experiments = loading
atexit.register(lambda: print(json.dumps({**seen, "on_at_end": gc.isenabled()})))
from trysquare._console import main
sys.argv[0] = "trysquare"
code = main()
raise SystemExit(code)
"""


def probed(env: dict[str, str], *command: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *command],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def test_a_command_starts_with_no_collection_and_works_with_the_collector_on(
    cli_process: Any, make_run: Any, tmp_path: Path
) -> None:
    scenario = scored_run(make_run, tmp_path)
    experiment = tmp_path / "exp"
    probed(cli_process.env, "validate", str(scenario), str(experiment), "--no-progress")
    for command in (
        ["validate", str(scenario), str(experiment), "--no-progress", "--replay", "--force"],
        ["report", str(scenario), str(experiment)],
    ):
        seen = probed(cli_process.env, *command)
        # Imports, the parser, the plugins, the scenario: all built with no collection.
        assert seen["before_load"] == 0, command
        assert seen["on_at_load"] is True, command  # runs and results are collected
        assert seen["on_at_end"] is True, command


def test_a_command_that_loads_no_experiment_runs_with_the_collector_on(
    cli_process: Any,
) -> None:
    seen = probed(cli_process.env, "plugins")
    assert seen["before_load"] is None  # it never loaded runs
    assert seen["on_at_end"] is True


def test_a_caller_of_main_keeps_its_collector_as_it_was(tmp_path: Path) -> None:
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    assert main(["plugins"]) == 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen  # nothing of the caller's frozen either
    gc.disable()
    try:
        assert main(["plugins"]) == 0
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()
