"""What several commands share: loading a scenario and experiments, and a machine-readable
document on stdout that nothing else printed may spoil.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trysquare.runs import Experiment


def _load(path: Path, config: Path | None = None, *, runs_validators: bool = True) -> Any:
    from trysquare.scenario import load_scenario

    return load_scenario(path, config=config, runs_validators=runs_validators)


def load_experiments(paths: Sequence[Path], *, replay: bool = False) -> list[Experiment]:
    """The experiments below ``paths`` (see :func:`trysquare.runs.load_experiments`).

    The command's start ends here: the collector, paused while it started, resumes
    (:mod:`trysquare._collector`).
    """
    from trysquare import _collector
    from trysquare.runs import load_experiments as load

    _collector.resume()
    return load(paths, replay=replay)


_document: list[Any] = []  # the stream the command's one document goes to (document_only)


@contextmanager
def document_only() -> Iterator[None]:
    """Keep standard output for the command's one document (``--format json``, a report).

    Meanwhile ``sys.stdout`` is standard error: whatever else is printed, in any thread (a
    mode's ``print`` while a run is validated, a report format's), cannot corrupt it. The
    document is written with :func:`write_document`.
    """
    _document.append(sys.stdout)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = _document.pop()


def write_document(text: str) -> None:
    """Write the command's document to standard output (the real one, under :func:`document_only`)."""
    (_document[-1] if _document else sys.stdout).write(text)


def _refuse_duplicates(experiments: Sequence[Experiment]) -> None:
    if all(len(experiment.runs) < 2 for experiment in experiments):
        return  # no experiment holds two runs that could claim one place: nothing to import
    from trysquare._matrix import refuse_duplicates

    for experiment in experiments:
        refuse_duplicates(experiment.runs)
