"""``validate --format github``: GitHub Actions workflow-command lines for what fell short.

An invalid result is an ``::error`` line, a result with an unjudged metric a
``::warning``, a result not measured yet (an unfilled form metric) a ``::notice``;
GitHub shows each as an annotation on the run's summary page. A passed result
prints nothing.

Run ids, cells, errors and reasons are the measured agent's text. GitHub reads a
line starting with ``::`` as a command, so every value is escaped the way the
runner expects: in the message ``%``, CR and LF (``%25``, ``%0D``, ``%0A``), in a
property also ``:`` and ``,`` (``%3A``, ``%2C``); every other control character is
shown as a visible escape (``\\x1b``). No text of the agent's can end an annotation early
or start a command of its own.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator

from trysquare._shown import shown
from trysquare.ci import ResultRecord

__all__ = [
    "annotation",
    "annotation_lines",
    "escape_data",
    "escape_property",
    "resume_commands",
    "stop_commands",
]

_KIND = {"failed": "error", "unjudged": "warning", "pending": "notice"}


def escape_data(text: object) -> str:
    """A workflow command's message: ``%``, CR and LF escaped (a message may span lines)."""
    value = text if isinstance(text, str) else str(text)
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return shown(value)  # every other control character as a visible escape


def escape_property(text: object) -> str:
    """A workflow command's property value: as a message, and ``:`` and ``,`` too."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(kind: str, message: str, **properties: str) -> str:
    """One ``::kind key=value,...::message`` line, every part escaped."""
    given = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::{kind}{' ' + given if given else ''}::{escape_data(message)}"


def annotation_lines(records: Iterable[ResultRecord]) -> Iterator[str]:
    """The lines for every record that is not a pass, in the records' order."""
    for record in records:
        kind = _KIND.get(record.status)
        if kind is None:
            continue
        where = f"{record.cell} / {record.run}" if record.cell else record.run
        yield annotation(
            kind,
            f"{where} / {record.validator}: {_what(record)}",
            title=f"trysquare {record.validator}: {record.status} ({record.run})",
        )


def _what(record: ResultRecord) -> str:
    if record.status == "failed":
        lines = [f"invalid: {record.error or 'no reason recorded'}"]
        if record.stderr_tail:
            lines += ["stderr (last lines):", *record.stderr_tail]
        return "\n".join(lines)
    if record.status == "unjudged":
        return "unjudged: " + "; ".join(_with_reason(record, name) for name in record.unjudged)
    pending = ", ".join(record.pending) or "every metric"
    return f"pending: {pending} ({record.error or 'no value yet'})"


def _with_reason(record: ResultRecord, metric: str) -> str:
    reason = record.reasons.get(metric)
    return f"{metric} ({reason})" if reason else metric


def stop_commands() -> tuple[str, str]:
    """A ``::stop-commands::TOKEN`` line and its token: until the token is printed as
    ``::TOKEN::``, GitHub reads no workflow command, so the per-task lines (which hold
    the agent's text) cannot issue one."""
    token = secrets.token_hex(16)
    return f"::stop-commands::{token}", token


def resume_commands(token: str) -> str:
    """The line that ends :func:`stop_commands`."""
    return f"::{token}::"
