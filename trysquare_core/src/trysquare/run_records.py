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

from trysquare.errors import RunError

__all__ = ["Etalon", "Experiment", "Run"]


@attrs.frozen
class Etalon:
    """The reference the agent started from: a tag, and its files as a folder."""

    tag: str
    checkout: Path | None  # None until materialised from the tag


# A path right inside its run's folder (the clone, the prompt, the session log: nearly
# always) is kept as that folder and its name, not as a path object of its own: a path
# object costs about 300 bytes, and validate holds every run. The folder is the one the
# run was loaded with, so ``attrs.evolve(run, dir=elsewhere)`` moves nothing else.
_Beside = tuple[Path, str]


def _kept(path: Path | _Beside | None, folder: Path) -> Path | _Beside | None:
    if isinstance(path, Path) and path.parent == folder:
        return (folder, sys.intern(path.name))
    return path


@overload
def _unpacked(kept: Path | _Beside) -> Path: ...
@overload
def _unpacked(kept: Path | _Beside | None) -> Path | None: ...
def _unpacked(kept: Path | _Beside | None) -> Path | None:
    return kept[0] / kept[1] if isinstance(kept, tuple) else kept


@attrs.frozen(repr=False)
class Run:
    """One finished run, its paths resolved and its base commit pinned."""

    dir: Path
    id: str
    cell: str
    repetition: int
    _repo: Path | _Beside = attrs.field(alias="repo")
    base: str  # as written in run.toml
    base_commit: str | None  # the full sha it resolves to (None when loaded for --replay)
    _prompt: Path | _Beside = attrs.field(alias="prompt")
    _session: Path | _Beside | None = attrs.field(alias="session")
    session_format: str | None
    _trace: Path | _Beside | None = attrs.field(alias="trace")
    model: str | None
    given: tuple[str, ...]
    etalon: Etalon | None
    # gitignore-style patterns of what the harness injected: never the agent's work
    excluded: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        for name in ("_repo", "_prompt", "_session", "_trace"):
            object.__setattr__(self, name, _kept(getattr(self, name), self.dir))

    @property
    def repo(self) -> Path:
        """The agent's clone."""
        return _unpacked(self._repo)

    @property
    def prompt(self) -> Path:
        """The prompt the agent was given."""
        return _unpacked(self._prompt)

    @property
    def session(self) -> Path | None:
        """The agent's session log, if the run names one."""
        return _unpacked(self._session)

    @property
    def trace(self) -> Path | None:
        """The run's trace file, if it names one."""
        return _unpacked(self._trace)

    @property
    def validation_dir(self) -> Path:
        return self.dir / "validation"

    @property
    def label(self) -> str:
        return f"run '{self.id}' ({self.dir})"

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{a.alias}={getattr(self, a.alias or a.name)!r}" for a in attrs.fields(Run)
        )
        return f"Run({shown})"


@attrs.frozen
class Experiment:
    """A folder named on the command line, and the runs found below it."""

    root: Path
    runs: tuple[Run, ...]
    errors: tuple[RunError, ...]
