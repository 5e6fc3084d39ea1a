"""Typos that change the table: what ``check`` names and ``validate``/``report`` refuse.

A run's cell and repetition are free text in its ``run.toml``, and the verdict's
``reference`` is free text in the scenario. A typo in either does not fail: it
grows a row (``cell = "prob"`` beside ``probe``), silently drops the gap table
(``reference = "plane"`` when the runs say ``plain``), or counts one repetition
twice. These checks turn each into a sentence naming the run folders.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from trysquare.errors import UsageError
from trysquare.runs import RUN_FILE, Run

__all__ = [
    "DuplicateRunsError",
    "duplicates",
    "matrix_problems",
    "one_edit_apart",
    "refuse_duplicates",
]


class DuplicateRunsError(UsageError):
    """Two runs claim the same (cell, repetition): the table cannot be drawn (exit 2)."""


def one_edit_apart(first: str, second: str) -> bool:
    """Whether one insertion, deletion, substitution or swap of neighbours turns one into the other."""
    if first == second or abs(len(first) - len(second)) > 1:
        return False
    if len(first) > len(second):
        first, second = second, first
    # The first difference decides; the rest must then match exactly.
    for index, (a, b) in enumerate(zip(first, second)):
        if a != b:
            if len(first) == len(second):
                swapped = (
                    index + 1 < len(first)
                    and first[index] == second[index + 1]
                    and first[index + 1] == second[index]
                    and first[index + 2 :] == second[index + 2 :]
                )
                return swapped or first[index + 1 :] == second[index + 1 :]
            return first[index:] == second[index + 1 :]
    return True  # one is the other plus a last character


def duplicates(runs: Iterable[Run]) -> list[tuple[Run, Run]]:
    """Pairs of runs that claim the same (cell, repetition), the first found first."""
    seen: dict[tuple[str, int], Run] = {}
    pairs = []
    for run in sorted(runs, key=lambda r: r.dir_text):  # the text str(r.dir) is
        key = (run.cell, run.repetition)
        if key in seen:
            pairs.append((seen[key], run))
        else:
            seen[key] = run
    return pairs


def _duplicate_sentence(first: Run, second: Run) -> str:
    return (
        f"cell '{first.cell}' repetition {first.repetition} is claimed by two runs: "
        f"{first.dir / RUN_FILE} and {second.dir / RUN_FILE}; give one of them its own repetition"
    )


def refuse_duplicates(runs: Iterable[Run]) -> None:
    """Refuse (exit 2, naming both run files) a (cell, repetition) claimed twice.

    Counted twice, one repetition would weigh double in its cell's score; which
    of the two is the real one only whoever ran the agent can say.
    """
    pairs = duplicates(runs)
    if pairs:
        more = f" (and {len(pairs) - 1} more such pair(s))" if len(pairs) > 1 else ""
        raise DuplicateRunsError(_duplicate_sentence(*pairs[0]) + more)


def matrix_problems(scenario: Any, runs: Sequence[Run], declared: Sequence[str] = ()) -> list[str]:
    """One sentence per typo that would change the table: reference, near-identical cells, duplicates.

    ``declared`` is the cells ``[axes]``/``[variants]`` declare: two declared
    cells one edit apart are meant (``r1``, ``r2``); otherwise a cell one edit
    away from another is named, with how many runs each holds.
    """
    problems = []
    counts: dict[str, list[Run]] = {}
    for run in runs:
        counts.setdefault(run.cell, []).append(run)
    cells = list(counts)
    reference = scenario.verdict.reference
    if reference is not None and reference not in counts:
        import difflib  # only a missing reference is named with a suggestion

        close = difflib.get_close_matches(reference, cells, n=1, cutoff=0.6)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        problems.append(
            f"{scenario.path.name}: verdict.reference '{reference}' is no run's cell{hint}; "
            f"the runs' cells are: {', '.join(repr(c) for c in sorted(cells))}"
        )
    wanted = set(declared)
    for index, first in enumerate(sorted(cells)):
        for second in sorted(cells)[index + 1 :]:
            if first in wanted and second in wanted:
                continue
            if one_edit_apart(first, second):
                small, large = sorted((first, second), key=lambda c: (len(counts[c]), c))
                where = ", ".join(str(run.dir) for run in counts[small][:3])
                problems.append(
                    f"cell '{small}' ({len(counts[small])} run(s): {where}) is one edit away from "
                    f"cell '{large}' ({len(counts[large])} run(s)): did you mean '{large}'? "
                    "(declare both under [variants] if both are meant)"
                )
    problems += [_duplicate_sentence(a, b) for a, b in duplicates(runs)]
    return problems
