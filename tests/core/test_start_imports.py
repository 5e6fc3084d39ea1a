"""What a one-run ``validate --replay`` and ``report`` leave unimported (each is paid at start).

cattrs (a plain scenario and ``run.toml`` are structured without it), ``concurrent.futures``
with ``logging`` (one run is loaded and its clone checked in this thread), ``socket`` (a suite
door, a warm server), ``statistics`` (a power computed), ``csv`` (a CSV report).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
from trysquare import _convert, _plain_structure
from trysquare.errors import ScenarioError

from tests.helpers import scored_run

NEVER_ON_ONE_RUN = (
    "cattrs",
    "concurrent.futures",
    "logging",
    "socket",
    "statistics",
    "csv",
)


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_a_one_run_replay_and_report_import_none_of_what_they_never_use(
    cli_process: Any, make_run: Any, tmp_path: Path, sandbox: str
) -> None:
    # Landlock on, clones are checked early; off (as under valgrind), late: both in this thread.
    env = {**cli_process.env, "TRYSQUARE_SANDBOX": sandbox}
    scenario = scored_run(make_run, tmp_path)
    probe = (
        "import sys\nfrom trysquare.cli import main\ncode = main(sys.argv[1:])\n"
        f"print(sorted(set({NEVER_ON_ONE_RUN!r}) & set(sys.modules)))\n"
        "raise SystemExit(code)\n"
    )
    experiment = str(tmp_path / "exp")
    # Built by the probe too: its sys.path is the one the entry-point cache was kept for.
    built = subprocess.run(
        [sys.executable, "-c", probe, "validate", str(scenario), experiment, "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    for command in (
        ["validate", str(scenario), experiment, "--no-progress", "--replay", "--force"],
        ["report", str(scenario), experiment],
    ):
        done = subprocess.run(
            [sys.executable, "-c", probe, *command],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1] == "[]", command


class Colour(str):
    pass


@attrs.frozen
class Paint:
    colour: Colour


def colour(value: Any, _: Any) -> Colour:
    if value not in ("red", "blue"):
        raise ValueError(f"must be red or blue, not {value!r}")
    return Colour(value)


def test_a_type_a_mode_hooks_is_left_to_cattrs_and_its_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_plain_structure, "_given_up", [])
    monkeypatch.setattr(_plain_structure, "_builds", {})
    monkeypatch.setattr(_convert, "_added_hooks", [])
    _convert.register_structure_hook(Colour, colour)
    with pytest.raises(_plain_structure.NotPlain):
        _plain_structure.structure({"colour": "red"}, Paint)
    painted = _convert.structure({"colour": "red"}, Paint, file=Path("paint.toml"))
    assert type(painted.colour) is Colour
    with pytest.raises(ScenarioError, match=r"^paint\.toml: colour: must be red or blue"):
        _convert.structure({"colour": "green"}, Paint, file=Path("paint.toml"))
