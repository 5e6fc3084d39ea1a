"""Validations that gather their work across runs (a judge sending one batch for many runs).

Most validations score one run per task. A *gathering* validation answers its tasks
with a pending outcome and does the work for all of them at once; ``validate`` then
gives it two moments of the whole matrix, before the tasks
(:meth:`~trysquare.modes.Validation.resume_gathered`: collect what earlier commands
left in flight) and after them (:meth:`~trysquare.modes.Validation.send_gathered`:
send what the tasks gathered, and wait for it when asked to). Each yields
:class:`Gathered` records; the runner writes each one as it writes any result —
signed, the pending result it replaces moved to the history — and only over a
pending result of the same validator and context: a verdict lands exactly once, and
never over a newer result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TextIO

import attrs

from trysquare import results
from trysquare._shown import shown

if TYPE_CHECKING:
    from trysquare.modes import Outcome, Validation
    from trysquare.runs import Experiment, Run

__all__ = ["Gathered", "Gathering", "record_gathered"]


@attrs.frozen(kw_only=True)
class Gathering:
    """What a gathering validation is handed at each of its two moments."""

    experiments: Sequence[Experiment]
    """The experiments validated: their ``.trysquare/`` folders hold a mode's own state."""
    runs: Sequence[Run]
    """The runs this command covers (after ``--cell`` / ``--run``): nothing else is recorded."""
    wait: bool
    """``False`` under ``--no-wait``: send, and return without waiting for the answers."""
    rejudge: bool
    """``--rejudge``: verdicts are asked for again."""
    out: TextIO
    """Where progress lines go."""
    should_stop: Callable[[], bool]
    """True once the command is interrupted: stop waiting, leave the work recorded."""
    pending: list[str] = attrs.field(factory=list)
    """Sentences for the closing line about work left in flight (a mode appends them)."""


@attrs.frozen(kw_only=True)
class Gathered:
    """One result a gathering validation produced, for the runner to record."""

    run: Run
    """The run it belongs to."""
    outcome: Outcome
    """The result itself, as :meth:`~trysquare.modes.Validation.evaluate` would return it."""
    digest: str
    """The validator's digest the work was asked under (as recorded in the pending result)."""
    context_digest: str
    """The context digest the work was asked under (as recorded in the pending result)."""
    duration: float = 0.0
    """Seconds the work took, as the result records it."""


def record_gathered(validation: Validation, items: Iterable[Gathered], out: TextIO) -> list[Run]:
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
        plugins.observe_outcome(run=item.run, validation=validation, outcome=item.outcome)
    return written
