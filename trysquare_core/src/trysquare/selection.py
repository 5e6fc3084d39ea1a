"""``--cell GLOB`` and ``--run GLOB``: choosing which runs a command works on.

Each option is repeatable; a run is chosen when its cell matches one ``--cell``
glob (any cell when none is given) and its id matches one ``--run`` glob (any id
when none is given). Globs are :mod:`fnmatch` patterns matched against the whole
name, case-sensitively (``--cell 'rule / *'``, ``--run 'a7*'``). A glob that
matches no run is a usage error naming it: a typo must not quietly select
nothing, and CI must not go green over an empty selection.

A run folder that could not be read is kept when what its ``run.toml`` names
(its cell, its id, else its folder's name) matches, so it still counts, invalid,
in the chosen cell.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from trysquare._record import record
from trysquare.errors import RunError, UsageError
from trysquare.runs import Experiment

__all__ = ["Selection"]


@record
class Selection:
    """The ``--cell`` and ``--run`` globs of one command line."""

    cells: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, cells: Iterable[str] | None, runs: Iterable[str] | None) -> Selection:
        return cls(cells=tuple(cells or ()), runs=tuple(runs or ()))

    @property
    def active(self) -> bool:
        return bool(self.cells or self.runs)

    def chosen(self, cell: str | None, run_id: str | None) -> bool:
        """Whether a run with this cell and id is selected."""
        return _matches(self.cells, cell) and _matches(self.runs, run_id)

    def apply(self, experiments: Sequence[Experiment]) -> list[Experiment]:
        """The experiments holding only the chosen runs (and unreadable run folders).

        Raises :class:`~trysquare.errors.UsageError` (exit 2) naming every glob
        that matched nothing, before anything runs.
        """
        if not self.active:
            return list(experiments)
        seen_cells: list[str] = []
        seen_ids: list[str] = []
        chosen = []
        for experiment in experiments:
            runs = tuple(r for r in experiment.runs if self.chosen(r.cell, r.id))
            errors = tuple(e for e in experiment.errors if self._error_chosen(e))
            seen_cells += [r.cell for r in experiment.runs]
            seen_ids += [r.id for r in experiment.runs]
            for error in experiment.errors:
                cell, run_id = _names_of(error)
                seen_cells += [cell] if cell is not None else []
                seen_ids += [run_id] if run_id is not None else []
            chosen.append(attrs.evolve(experiment, runs=runs, errors=errors))
        self._refuse_unmatched(seen_cells, seen_ids, chosen)
        return chosen

    def _error_chosen(self, error: RunError) -> bool:
        cell, run_id = _names_of(error)
        return self.chosen(cell, run_id)

    def _refuse_unmatched(
        self, cells: Sequence[str], ids: Sequence[str], chosen: Sequence[Experiment]
    ) -> None:
        unmatched = [
            f"--cell {g}" for g in self.cells if not any(fnmatch.fnmatchcase(c, g) for c in cells)
        ]
        unmatched += [
            f"--run {g}" for g in self.runs if not any(fnmatch.fnmatchcase(i, g) for i in ids)
        ]
        if unmatched:
            raise UsageError(
                f"{', '.join(unmatched)}: matches no run (globs are fnmatch patterns over the whole name)"
            )
        if not any(e.runs or e.errors for e in chosen):
            given = " ".join(
                [*(f"--cell {g}" for g in self.cells), *(f"--run {g}" for g in self.runs)]
            )
            raise UsageError(f"{given}: no run matches all of these together")


def _matches(globs: Sequence[str], name: str | None) -> bool:
    if not globs:
        return True
    return name is not None and any(fnmatch.fnmatchcase(name, glob) for glob in globs)


def _names_of(error: RunError) -> tuple[str | None, str | None]:
    """The cell and id an unreadable run folder names, as far as it names them."""
    from trysquare.results import unusable_row

    row: dict[str, Any] | None = unusable_row(error)
    if row is not None:
        return row["cell"], row["id"]
    return None, error.run_dir.name if error.run_dir is not None else None


def restore_unselected(
    scenario: Any, whole: Sequence[Experiment], chosen: Sequence[Experiment]
) -> None:
    """Put the runs a selection left out back into each ``measures.json``.

    ``validate --cell/--run`` records results for the chosen runs only, but
    ``measures.json`` is one row per run of the experiment: the rows the runner
    wrote for the chosen runs are kept as written (with the failures it saw), the
    others are rebuilt from their recorded results.
    """
    import json

    from trysquare import _atomic, results
    from trysquare.lock import experiment_lock

    current = {v.name: v.digest() for v in scenario.validations}
    for full, part in zip(whole, chosen):
        if len(part.runs) == len(full.runs) and len(part.errors) == len(full.errors):
            continue
        path = full.root / results.MEASURES_FILE
        with experiment_lock(full.root, full.runs):
            try:
                written = json.loads(_atomic.read_bytes(path))
            except (OSError, ValueError):
                continue  # the runner said why it could not write it
            chosen_dirs = {run.dir for run in part.runs} | {e.run_dir for e in part.errors}
            others = results.build_measures(
                scenario,
                [run for run in full.runs if run.dir not in chosen_dirs],
                current,
                unusable=[e for e in full.errors if e.run_dir not in chosen_dirs],
            )
            rows = [*written, *others]
            rows.sort(
                key=lambda row: (
                    row["cell"],
                    row["repetition"] if isinstance(row.get("repetition"), int) else -1,
                    row["id"],
                )
            )
            results.write_measures(full.root, rows)
