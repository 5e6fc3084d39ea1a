"""A ``run.toml`` that is no file (a FIFO, a link to a device) spoils its own run, and never
holds a command: it is refused without being read, naming it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import scored_run

EXERCISES = ("trysquare._convert", "trysquare.runs", "trysquare.results")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_run_toml_that_is_no_file_is_named_and_the_other_runs_go_on(
    cli_process: Any, make_run: Any, tmp_path: Path, kind: str
) -> None:
    scenario = scored_run(make_run, tmp_path)
    other = make_run("r2", repetition=2)
    other.base({"a.py": "a = 1\n"})
    other.finish()
    planted = tmp_path / "exp" / "runs" / "r2" / "run.toml"
    planted.unlink()
    if kind == "fifo":
        os.mkfifo(planted)  # no writer ever opens it: a plain read would wait for ever
        said = "is a FIFO, not a file"
    else:
        planted.symlink_to("/dev/zero")  # endless: a plain read would fill the memory
        said = "is a device, not a file"
    for command in (
        ("validate", scenario, tmp_path / "exp", "--no-progress"),
        ("report", scenario, tmp_path / "exp"),
    ):
        done = cli_process(*command, timeout=60)
        assert f"{planted}: {said}" in done.stderr, done.stderr
        assert done.returncode == 1, done.stdout + done.stderr
    results = tmp_path / "exp" / "runs" / "r1" / "validation" / "script.json"
    assert results.is_file()  # r1 was validated beside the refused folder
