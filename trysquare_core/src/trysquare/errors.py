"""The refusals a user sees: one exception type per kind, each carrying its sentence.

The command line prints ``message`` on stderr and exits with ``exit_code``; a
traceback is shown only under ``--debug``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: trysquare.assay imports this module
if TYPE_CHECKING:
    from pathlib import Path


class TrysquareError(Exception):
    """A refusal worth one plain sentence to the user."""

    exit_code: int = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(TrysquareError):
    """The command line was used wrongly: nothing ran (exit 2)."""

    exit_code = 2


class ScenarioError(TrysquareError):
    """A scenario, or the configuration it needs, does not load (exit 2)."""

    exit_code = 2


class ConfigError(TrysquareError):
    """``trysquare.toml`` does not load (exit 2)."""

    exit_code = 2


class RunError(TrysquareError):
    """A run folder could not be read; it is reported and skipped (exit 1)."""

    exit_code = 1

    def __init__(self, message: str, *, run_dir: Path | None = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir  # the run it concerns, when it was found at all


class NoRunsError(TrysquareError):
    """No run was found under the given paths: nothing ran (exit 2)."""

    exit_code = 2


class RepoError(TrysquareError):
    """git refused something about a measured repository."""

    exit_code = 1


class LockedError(TrysquareError):
    """Another ``validate`` holds the experiment's lock (exit 1)."""

    exit_code = 1


class IsolationUnavailable(OSError):
    """The agent's code must run in the jail (``isolation = "required"``) and it cannot start.

    An ``OSError``: where a child cannot start, callers already say so for that run.
    """
