"""What a one-run ``validate --replay`` and ``report`` leave unimported (each is paid at start).

cattrs (a plain scenario and ``run.toml`` are structured without it), ``tomllib`` and
``datetime`` (they are read without it), argparse with gettext (a plain command line is read
without it), ``concurrent.futures``
with ``logging`` (one run is loaded and its clone checked in this thread), ``queue`` (tasks
built ahead and results are handed over without it), ``socket`` (a suite
door, a warm server), ``statistics`` (a power computed), ``csv`` (a CSV report), OpenSSL
(``_hashlib``, ``hmac``: a start's digests and MACs are of small inputs), the git layer
that builds a context (a diff, an etalon) and, for ``--replay``, which asks git nothing, all of
the git layer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from trysquare import _convert, _plain_structure
from trysquare.errors import ScenarioError

from tests.helpers import one_run_probes, scored_run

NEVER_ON_ONE_RUN = (
    "cattrs",
    "tomllib",  # a plain scenario and run.toml are read with string methods
    "datetime",  # tomllib's; an in-flight marker's time is taken with time's calendar
    "argparse",  # a plain command line is read from the declarations alone
    "gettext",
    "trysquare.cli.parser",
    "trysquare.helptext",
    "concurrent.futures",
    "queue",  # tasks built ahead wait in trysquare's own hand-over, results in _queue's
    "logging",
    "socket",
    "statistics",
    "csv",
    "_hashlib",  # OpenSSL: small inputs are hashed by the interpreter's own SHA-256
    "hmac",
    "trysquare._jail_records",  # no jail started, none asked about
    "trysquare._matrix",  # one run claims no other's cell and repetition
    "trysquare._words",  # a scenario without test_command or prepare splits no command
    "trysquare.report._stats_records",  # one run, no reference cell: no interval drawn
    "trysquare.cli.install",  # the other commands' handlers
    "trysquare.cli.runs",
    "trysquare.git.patch",
    "trysquare.git.changes",
    "trysquare.git.etalon",
)
NEVER_ON_ONE_REPLAY = (
    "trysquare._run_facts",  # no context built
    "trysquare.cli.reports",
    "trysquare.git.dotgit",
    "trysquare.git.refs",
    "trysquare.git.running",
    "trysquare.git.shadow",
)

NEVER_ON_ONE_REPORT = (
    "random",  # no interval drawn, so no resampling
    "tempfile",  # the base resolved from the clone's files: no shadow for git to run in
    "trysquare.git.shadow",
    "trysquare.git.running",
    "trysquare.report_source",  # a Markdown report hands no format a source
    "trysquare._process",  # no script runs: the api names its records without loading it
    "trysquare.sandbox",
    "trysquare.jail",  # no task made, no agent's code run: the jail's limits come alone
    "subprocess",
    "shutil",  # the help width is worked out without it; nothing is copied or removed
    "bz2",
    "lzma",
)


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_a_one_run_replay_and_report_import_none_of_what_they_never_use(
    cli_process: Any, make_run: Any, tmp_path: Path, sandbox: str
) -> None:
    # Landlock on, clones are checked early; off (as under valgrind), late: both in this thread.
    env = {**cli_process.env, "TRYSQUARE_SANDBOX": sandbox}
    scenario = scored_run(make_run, tmp_path)
    after = (
        f"never = set({NEVER_ON_ONE_RUN!r})\n"
        f"if '--replay' in sys.argv:\n    never |= set({NEVER_ON_ONE_REPLAY!r})\n"
        f"if sys.argv[1] == 'report':\n    never |= set({NEVER_ON_ONE_REPORT!r})\n"
        "found = never & set(sys.modules)\n"
        "jail = vars(sys.modules.get('trysquare.jail', sys))\n"
        "found |= {f'jail.{name}' for name in ('Availability', 'JailIds') if name in jail}\n"
        "print(sorted(found))\n"
    )
    one_run_probes(scenario, tmp_path / "exp", env, after)


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
