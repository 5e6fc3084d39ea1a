"""The records of finished runs: a :class:`Run` (its folder, clone, cell, repetition, ids)
and an :class:`Experiment` (a folder named on the command line and its runs).

Kept apart from the loading (:mod:`trysquare.runs`, which reads ``run.toml`` and asks git
for the base commit), so a validator's task, the hook specifications and every other
record can name a run without reaching the engine: this module imports nothing of
trysquare but its errors.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import overload

import attrs

from trysquare._record import record
from trysquare.errors import RunError

__all__ = ["Etalon", "Experiment", "Run"]


@record
class Etalon:
    """The reference the agent started from: a tag, and its files as a folder."""

    tag: str
    checkout: Path | None  # None until materialised from the tag


# A path right inside the folder the run was loaded from (the clone, the prompt, the session
# log: nearly always) is kept as its name alone, resolved against ``_home`` (that folder, the
# very object ``dir`` holds): a path object costs about 300 bytes, a pair holding the folder
# 56 more, and validate holds every run. ``attrs.evolve(run, dir=elsewhere)`` keeps ``_home``,
# so it moves nothing else.


def _kept(path: Path | str | None, home: Path) -> Path | str | None:
    if isinstance(path, Path) and path.parent == home:
        return sys.intern(path.name)
    return path


@overload
def _unpacked(kept: Path | str, home: Path) -> Path: ...
@overload
def _unpacked(kept: Path | str | None, home: Path) -> Path | None: ...
def _unpacked(kept: Path | str | None, home: Path) -> Path | None:
    return home / kept if isinstance(kept, str) else kept


@record(repr=False)
class Run:
    """One finished run, its paths resolved and its base commit pinned."""

    dir: Path
    id: str
    cell: str
    repetition: int
    _repo: Path | str = attrs.field(alias="repo")
    base: str  # as written in run.toml
    base_commit: str | None  # the full sha it resolves to (None when loaded for --replay)
    _prompt: Path | str = attrs.field(alias="prompt")
    _session: Path | str | None = attrs.field(alias="session")
    session_format: str | None
    _trace: Path | str | None = attrs.field(alias="trace")
    model: str | None
    given: tuple[str, ...]
    etalon: Etalon | None
    # gitignore-style patterns of what the harness injected: never the agent's work
    excluded: tuple[str, ...] = ()
    # The folder the run was loaded from: what a path kept as a name is beside (None: ``dir``).
    _home: Path | None = attrs.field(default=None, alias="home")

    def __attrs_post_init__(self) -> None:
        if self._home is None:
            object.__setattr__(self, "_home", self.dir)
        home = self._origin()
        for name in ("_repo", "_prompt", "_session", "_trace"):
            object.__setattr__(self, name, _kept(getattr(self, name), home))

    def _origin(self) -> Path:
        return self.dir if self._home is None else self._home

    @property
    def repo(self) -> Path:
        """The agent's clone."""
        return _unpacked(self._repo, self._origin())

    @property
    def prompt(self) -> Path:
        """The prompt the agent was given."""
        return _unpacked(self._prompt, self._origin())

    @property
    def session(self) -> Path | None:
        """The agent's session log, if the run names one."""
        return _unpacked(self._session, self._origin())

    @property
    def trace(self) -> Path | None:
        """The run's trace file, if it names one."""
        return _unpacked(self._trace, self._origin())

    @property
    def validation_dir(self) -> Path:
        return self.dir / "validation"

    @property
    def label(self) -> str:
        return f"run '{self.id}' ({self.dir})"

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{a.alias}={getattr(self, a.alias or a.name)!r}"
            for a in attrs.fields(Run)
            if a.alias != "home"
        )
        return f"Run({shown})"


@record
class Experiment:
    """A folder named on the command line, and the runs found below it."""

    root: Path
    runs: tuple[Run, ...]
    errors: tuple[RunError, ...]
