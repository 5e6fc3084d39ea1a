"""The records of finished runs: a :class:`Run` (its folder, clone, cell, repetition, ids)
and an :class:`Experiment` (a folder named on the command line and its runs).

Kept apart from the loading (:mod:`trysquare.runs`, which reads ``run.toml`` and asks git
for the base commit), so a validator's task, the hook specifications and every other
record can name a run without reaching the engine: this module imports nothing of
trysquare but its errors.
"""

from __future__ import annotations

import functools
import os
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


# validate and report hold every run: each path a run keeps is kept as text, and built as a
# path when asked for. The folder is its text (a path object costs about 300 bytes more, and
# its cached text and hash more again); a path right inside the folder the run was loaded
# from (the clone, the prompt, the session log: nearly always) is kept as its name alone,
# resolved against ``_home`` (that folder's text). ``attrs.evolve(run, dir=elsewhere)``
# keeps ``_home``, so it moves nothing else.


def _folder_text(path: Path | str) -> str:
    # A path's text is already in its normal form; a text is put in it (as a path says it).
    return os.fspath(path) if isinstance(path, Path) else os.fspath(Path(path))


def _kept(path: Path | str | None, home: str) -> Path | str | None:
    if isinstance(path, Path) and os.fspath(path.parent) == home:
        return sys.intern(path.name)
    return path


# A run's paths are asked for dozens of times while it is planned, run and recorded (its
# folder alone some 27 times): each built again was a parse of its text. The last few built are
# kept, by text; a path is never changed, so one object serves every caller. Bounded: the
# runs each stage (planning, building, recording) has in hand, not every run of a validate
# (planning runs ahead, so a stage may build a run's path again: a few times a run, not 50).
@functools.lru_cache(maxsize=64)
def _path(*parts: str) -> Path:
    return Path(*parts)


@overload
def _unpacked(kept: Path | str, home: str) -> Path: ...
@overload
def _unpacked(kept: Path | str | None, home: str) -> Path | None: ...
def _unpacked(kept: Path | str | None, home: str) -> Path | None:
    return _path(home, kept) if isinstance(kept, str) else kept


@record
class Run:
    """One finished run, its paths resolved and its base commit pinned."""

    _dir: str = attrs.field(alias="dir", converter=_folder_text)
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
    _home: str | None = attrs.field(
        default=None, alias="home", converter=attrs.converters.optional(_folder_text)
    )

    def __attrs_post_init__(self) -> None:
        if self._home is None:
            object.__setattr__(self, "_home", self._dir)
        home = self._origin()
        for name in ("_repo", "_prompt", "_session", "_trace"):
            object.__setattr__(self, name, _kept(getattr(self, name), home))

    def _origin(self) -> str:
        return self._dir if self._home is None else self._home

    @property
    def dir(self) -> Path:
        """The run's folder."""
        return _path(self._dir)

    @property
    def dir_text(self) -> str:
        """The run's folder as text (``os.fspath(run.dir)``), the very text the run keeps: a
        key that costs nothing to make, for a table of every run."""
        return self._dir

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
        return _path(self._dir, "validation")

    @property
    def label(self) -> str:
        return f"run '{self.id}' ({self._dir})"

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
