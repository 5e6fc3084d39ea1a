"""Validations that gather their work across runs (a judge sending one batch for many runs).

Most validations score one run per task. A *gathering* validation answers its tasks
with a pending outcome and does the work for all of them at once; ``validate`` then
gives it two moments of the whole matrix, before the tasks
(:meth:`~trysquare.modes.Validation.resume_gathered`: collect what earlier commands
left in flight) and after them (:meth:`~trysquare.modes.Validation.send_gathered`:
send what the tasks gathered, and wait for it when asked to). Each yields
:class:`~trysquare.modes.Gathered` records (defined in :mod:`trysquare.modes`); the
runner writes each one as it writes any result — signed, the pending result it
replaces moved to the history — and only over a pending result of the same validator
and context: a verdict lands exactly once, and never over a newer result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal, TextIO

from trysquare import results
from trysquare._shown import shown
from trysquare.modes import Gathered, Gathering

if TYPE_CHECKING:
    from trysquare.modes import Validation
    from trysquare.runs import Run

__all__ = ["Gathered", "Gathering", "gather", "record_gathered"]


def gather(
    validations: Sequence[Validation],
    gathering: Gathering,
    moment: Literal["resume_gathered", "send_gathered"],
    kept_after: list[str] | None = None,
) -> list[tuple[Run, str]]:
    """Let each validation collect (``resume_gathered``) or send and wait for
    (``send_gathered``) its gathered work, and record what it yields; return the
    (run, validator name) of each result written. A validation that fails here is said on
    ``gathering.out`` and the others go on: a plugin's mode never stops the matrix.
    A result written that kept an earlier one (asking again failed: ``Outcome.kept_after``)
    is said in ``kept_after``, as the runner says a task's."""
    recorded: list[tuple[Run, str]] = []
    for validation in validations:
        try:
            written = record_gathered(
                validation, getattr(validation, moment)(gathering), gathering.out, kept_after
            )
        except Exception as error:  # noqa: BLE001 - see the docstring
            print(
                shown(
                    f"trysquare: validator '{validation.name}' could not collect its gathered "
                    f"work: {type(error).__name__}: {error}"
                ),
                file=gathering.out,
            )
            continue
        recorded.extend((run, validation.name) for run in written)
    return recorded


def record_gathered(
    validation: Validation,
    items: Iterable[Gathered],
    out: TextIO,
    kept_after: list[str] | None = None,
) -> list[Run]:
    """Write each of ``items`` over the pending result it answers; return the runs written
    (a run once per result written).

    A result that is no longer that pending one (a newer verdict, another context, a
    file trysquare did not sign) is left alone: the item is stale, or already recorded
    by an earlier command that ended before saying so.
    """
    from trysquare import plugins
    from trysquare.execute import write_problem

    written: list[Run] = []
    for item in items:
        try:
            recorded = results.load_result(item.run, validation.name)
        except results.UnreadableResult:
            continue
        if (
            recorded is None
            or recorded.get("state") != "pending"
            or (recorded.get("validator") or {}).get("digest") != item.digest
            or recorded.get("context_digest") != item.context_digest
        ):
            continue
        document = results.result_document(
            validation,
            item.outcome,
            digest=item.digest,
            context_digest=item.context_digest,
            duration=item.duration,
        )
        try:
            results.write_result(item.run, validation.name, document, None)
        except OSError as error:
            print(
                shown(
                    f"trysquare: {item.run.label}: the result could not be recorded: "
                    f"{write_problem(error)}"
                ),
                file=out,
            )
            continue
        written.append(item.run)
        if kept_after is not None and item.outcome.kept_after is not None:
            kept_after.append(f"{item.run.id} {validation.name}: {item.outcome.kept_after}")
        plugins.observe_outcome(run=item.run, validation=validation, outcome=item.outcome)
    return written
