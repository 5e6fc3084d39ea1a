"""What CI reads from ``validate`` and ``check``: ``--format json`` and the records behind ``--junit-xml``.

Every JSON object trysquare prints for a machine carries ``schema_version``
(:data:`SCHEMA_VERSION`): a reader checks it before it trusts a key. The version
goes up when a key changes meaning or goes away; new keys may appear without it.

One :class:`ResultRecord` per run × validator is read back from the files
``validate`` recorded (results reused unchanged included), so the JSON and the
JUnit XML describe the experiment as it stands, not only the tasks that ran.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from trysquare._shown import json_text

__all__ = [
    "SCHEMAS",
    "SCHEMA_VERSION",
    "ResultRecord",
    "check_document",
    "dump",
    "records",
    "schema_text",
    "validate_document",
]

SCHEMA_VERSION = 1
# The commands whose ``--format json`` output has a JSON Schema (``trysquare schema NAME``),
# shipped beside this module as ``schemas/NAME.json``.
SCHEMAS = ("check", "plugins", "report", "validate")

# How a result reads to CI: "passed" (valid, every declared metric judged),
# "failed" (invalid: the result cannot be trusted), "unjudged" (valid, but a
# metric could not be judged: not a pass, not a failure), "pending" (not
# measured yet: an unfilled form metric, or no result recorded).
Status = Literal["passed", "failed", "unjudged", "pending"]


@attrs.frozen
class ResultRecord:
    """One run × one validator, as CI sees it."""

    run: str
    cell: str
    repetition: int | None
    validator: str
    status: Status
    metrics: Mapping[str, Any] = attrs.field(factory=dict)
    reasons: Mapping[str, str] = attrs.field(factory=dict)
    error: str | None = None
    stderr_tail: tuple[str, ...] = ()
    duration: float | None = None
    unjudged: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "cell": self.cell,
            "repetition": self.repetition,
            "validator": self.validator,
            "status": self.status,
            "metrics": dict(self.metrics),
            "reasons": dict(self.reasons),
            "error": self.error,
            "stderr_tail": list(self.stderr_tail),
            "duration": self.duration,
            "unjudged": list(self.unjudged),
            "pending": list(self.pending),
        }


def records(
    scenario: Any, experiments: Sequence[Any], only: Sequence[str] = ()
) -> list[ResultRecord]:
    """Every chosen run × validator of ``experiments``, read from the recorded files.

    A run folder that could not be read is one failed record (validator
    ``trysquare``) with why. ``only`` limits the validators as ``--only`` does.
    """
    from trysquare import results
    from trysquare.failures import stderr_tail

    validations = [v for v in scenario.validations if not only or v.name in only]
    found: list[ResultRecord] = []
    for experiment in experiments:
        for run in experiment.runs:
            for validation in validations:
                try:
                    document = results.load_result(run, validation.name)
                except results.UnreadableResult as damaged:
                    found.append(
                        ResultRecord(
                            run=run.id,
                            cell=run.cell,
                            repetition=run.repetition,
                            validator=validation.name,
                            status="failed",
                            error=f"{damaged}; {damaged.remedy}",
                        )
                    )
                    continue
                found.append(_record(run, validation, document, stderr_tail))
        for error in experiment.errors:
            row = results.unusable_row(error)
            found.append(
                ResultRecord(
                    run=row["id"] if row else (error.run_dir.name if error.run_dir else "?"),
                    cell=row["cell"] if row else "",
                    repetition=row["repetition"] if row else None,
                    validator="trysquare",
                    status="failed",
                    error=f"the run folder cannot be used: {error.message}",
                )
            )
    found.sort(
        key=lambda r: (r.cell, r.repetition if r.repetition is not None else -1, r.run, r.validator)
    )
    return found


def _record(
    run: Any, validation: Any, document: Mapping[str, Any] | None, tail: Any
) -> ResultRecord:
    common = {
        "run": run.id,
        "cell": run.cell,
        "repetition": run.repetition,
        "validator": validation.name,
    }
    if document is None:
        return ResultRecord(
            **common, status="pending", pending=tuple(validation.metrics), error="not validated yet"
        )
    metrics = dict(document.get("metrics") or {})
    reasons = {k: v for k, v in (document.get("reasons") or {}).items() if isinstance(v, str)}
    duration = document.get("duration")
    duration = (
        float(duration) if isinstance(duration, (int, float)) and math.isfinite(duration) else None
    )
    if document.get("state") == "invalid":
        return ResultRecord(
            **common,
            status="failed",
            metrics=metrics,
            reasons=reasons,
            duration=duration,
            error=str(document.get("error")),
            stderr_tail=tuple(tail(run.dir, validation.name)),
        )
    pending = tuple(m for m in validation.metrics if m not in metrics)
    unjudged = tuple(m for m in validation.metrics if m in metrics and metrics[m] is None)
    status: Status = "pending" if pending else "unjudged" if unjudged else "passed"
    return ResultRecord(
        **common,
        status=status,
        metrics=metrics,
        reasons=reasons,
        duration=duration,
        unjudged=unjudged,
        pending=pending,
    )


def validate_document(
    summary: Any, found: Sequence[ResultRecord], *, scenario: Any, exit_code: int
) -> dict[str, Any]:
    """``validate --format json``: one object for the whole command."""
    counts = {status: 0 for status in ("passed", "failed", "unjudged", "pending")}
    for record in found:
        counts[record.status] += 1
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "validate",
        "scenario": str(scenario.path),
        "exit_code": exit_code,
        "runs": summary.runs,
        "states": dict(summary.states),
        "unpublishable": [*summary.unpublishable, *getattr(summary, "unmeasured", dict)()],
        # Cells no run judged a [verdict] criterion of: the criteria, by cell.
        "unmeasured": dict(getattr(summary, "unmeasured", dict)()),
        "executed": summary.executed,
        "unchanged": summary.reused,
        "not_started": getattr(summary, "not_started", 0),
        "skipped_runs": [error.message for error in summary.skipped_runs],
        "stopped": summary.stopped,
        "results": counts,
        "records": [record.as_json() for record in found],
        "closing_line": summary.closing_line(),
    }


def check_document(
    scenario: Any,
    *,
    exit_code: int,
    protection: str,
    lines: Sequence[str] = (),
    problems: Sequence[str] = (),
    skipped: Sequence[str] = (),
    readable: int | None = None,
    unreadable: int | None = None,
) -> dict[str, Any]:
    """``check --format json``: what the scenario declares and what the runs allow."""
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "check",
        "scenario": str(scenario.path),
        "exit_code": exit_code,
        "loads": True,
        "validators": [
            {"name": v.name, "mode": v.mode, "metrics": list(v.metrics)}
            for v in scenario.validations
        ],
        "protection": protection,
        "isolation": _isolation(scenario),
        "lines": list(lines),
        "problems": list(problems),
        "skipped_runs": list(skipped),
        "runs": None if readable is None else {"readable": readable, "unreadable": unreadable or 0},
    }


def _isolation(scenario: Any) -> dict[str, Any]:
    """Where the agent's code runs on this machine, for ``check --format json``."""
    from trysquare.jail import availability, isolation_line

    found = availability()
    policy = scenario.task.jail
    return {
        "jailed": found.available,
        "required": policy.must_jail,
        "network": policy.network,
        "limits": {
            "processes": policy.processes,
            "memory_mib": policy.memory_mib,
            "file_size_mib": policy.file_size_mib,
        },
        "line": isolation_line(policy),
    }


def dump(document: Mapping[str, Any]) -> str:
    """The document as one JSON text: sorted keys; control characters as ``\\u`` escapes.

    Run ids, cells, reasons and stderr lines are the agent's: ``ensure_ascii``
    would do, but the report's JSON keeps non-ASCII readable, and so does this.
    """
    text = json.dumps(
        document, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False, default=str
    )
    return json_text(text) + "\n"


def schema_text(name: str) -> str:
    """The JSON Schema (draft 2020-12) that ``trysquare NAME --format json`` (``plugins
    --json``) follows, as text."""
    from importlib import resources

    if name not in SCHEMAS:
        raise ValueError(f"no schema named {name!r} (known: {', '.join(SCHEMAS)})")
    return (resources.files("trysquare") / "schemas" / f"{name}.json").read_text(encoding="utf-8")
