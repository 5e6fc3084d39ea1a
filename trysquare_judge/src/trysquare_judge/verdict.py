"""The ``verdict`` tool: its schema, built from the declared metrics, and its validation."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import jsonschema

__all__ = [
    "TOOL_NAME",
    "Verdict",
    "VerdictError",
    "parse_verdict",
    "validator_for",
    "verdict_schema",
]

TOOL_NAME = "verdict"
TOOL_DESCRIPTION = (
    "Record your verdict: for every metric, first the reason, then the boolean value. "
    "Call it exactly once, with every metric."
)


class VerdictError(Exception):
    """The arguments of a verdict call do not satisfy its schema."""


@attrs.frozen
class Verdict:
    metrics: Mapping[str, bool]
    reasons: Mapping[str, str]


def verdict_schema(metrics: Sequence[str]) -> dict[str, Any]:
    """The verdict tool's exact schema: one object per metric, reason before value, nothing extra."""
    entry = {
        "type": "object",
        # Reason first, so a model that writes in order argues before it decides.
        "properties": {"reason": {"type": "string"}, "value": {"type": "boolean"}},
        "required": ["reason", "value"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {metric: dict(entry) for metric in metrics},
        "required": list(metrics),
        "additionalProperties": False,
    }


@functools.lru_cache(maxsize=64)
def validator_for(metrics: tuple[str, ...]) -> jsonschema.protocols.Validator:
    """The checker of a verdict over ``metrics``, built once per process.

    jsonschema is imported here, not at module level: every ``trysquare``
    command loads the judge plugin, and only a judge table needs the import.
    """
    import jsonschema

    schema = verdict_schema(metrics)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def parse_verdict(arguments: str, metrics: Sequence[str]) -> Verdict:
    """Read a call's arguments, or raise :class:`VerdictError` saying what is wrong."""
    try:
        value = json.loads(arguments)
    except ValueError as error:
        raise VerdictError(f"the arguments are not JSON ({error})") from None
    if _well_formed(value, metrics):
        # What the schema accepts, checked directly: the schema validator is for saying why not.
        return Verdict(
            metrics={metric: entry["value"] for metric, entry in value.items()},
            reasons={metric: entry["reason"] for metric, entry in value.items()},
        )
    validator = validator_for(tuple(metrics))
    errors = sorted(validator.iter_errors(value), key=lambda e: (list(e.absolute_path), e.message))
    if errors:
        shown = "; ".join(_describe(error) for error in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise VerdictError(shown + more)
    return Verdict(
        metrics={metric: entry["value"] for metric, entry in value.items()},
        reasons={metric: entry["reason"] for metric, entry in value.items()},
    )


def _well_formed(value: Any, metrics: Sequence[str]) -> bool:
    """Whether ``value`` satisfies :func:`verdict_schema` exactly (every metric, nothing else;
    each a ``reason`` string and a boolean ``value``, nothing else)."""
    if not isinstance(value, dict) or value.keys() != set(metrics):
        return False
    return all(
        isinstance(entry, dict)
        and entry.keys() == _ENTRY_KEYS
        and isinstance(entry["reason"], str)
        and isinstance(entry["value"], bool)
        for entry in value.values()
    )


_ENTRY_KEYS = frozenset({"reason", "value"})


def _describe(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
