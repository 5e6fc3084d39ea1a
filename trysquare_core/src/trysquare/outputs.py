"""Reading what a validator printed: ``{"metrics": {...}, "reasons": {...}}``.

One parser for every mode that runs a program. It never raises: whatever the
bytes, it returns an :class:`~trysquare.modes.Outcome`, invalid with its cause
when the output cannot be trusted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from trysquare.modes import Outcome, ValidationTask

__all__ = ["began", "keep_output", "parse_validator_output"]

NO_REASON = "unjudged (the validator gave no reason)"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys: a second "in_scope" could silently
    # overrule the first, so the output is refused instead.
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise _DuplicateKey(key)
        document[key] = value
    return document


def parse_validator_output(stdout: bytes, *, declared: Sequence[str], what: str) -> Outcome:
    """Turn a validator's stdout into an outcome; ``what`` names it in causes."""
    try:
        return _parse(stdout, declared, what)
    except Exception as error:  # noqa: BLE001 - the contract is: never raise
        return Outcome.invalid(
            f"{what} printed output that could not be read ({type(error).__name__})"
        )


def _parse(stdout: bytes, declared: Sequence[str], what: str) -> Outcome:
    if not stdout.strip():
        return Outcome.invalid(f"{what} printed nothing on stdout")
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as error:
        return Outcome.invalid(f"{what} printed invalid UTF-8 (byte {error.start}){began(stdout)}")
    try:
        document = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    except _DuplicateKey as duplicate:
        return Outcome.invalid(
            f"{what} printed JSON with the key {duplicate.key!r} twice in one object"
        )
    except (ValueError, RecursionError) as error:
        return Outcome.invalid(
            f"{what} printed unreadable JSON: {_first_line(error)}{began(stdout)}"
        )
    if not isinstance(document, dict):
        return Outcome.invalid(
            f"{what} printed JSON {type(document).__name__}, not an object with 'metrics'{began(stdout)}"
        )
    metrics = document.get("metrics")
    if not isinstance(metrics, dict):
        return Outcome.invalid(f"{what} printed no 'metrics' object{began(stdout)}")
    reasons = document.get("reasons", {})
    if reasons is None:
        reasons = {}
    if not isinstance(reasons, dict):
        return Outcome.invalid(f"{what} printed 'reasons' that is not an object")
    for name, value in metrics.items():
        if not name.strip():
            return Outcome.invalid(f"{what} printed a metric with an empty name")
        if isinstance(value, float) and not math.isfinite(value):
            return Outcome.invalid(f"{what} printed a non-finite number for '{name}'")
    clean_reasons: dict[str, str] = {}
    for name, reason in reasons.items():
        if reason is None or reason == "":
            continue
        if not isinstance(reason, str):
            return Outcome.invalid(f"{what} printed a reason for '{name}' that is not a string")
        clean_reasons[name] = reason
    for name, value in metrics.items():
        if value is None and name not in clean_reasons:
            clean_reasons[name] = NO_REASON
    missing = [metric for metric in declared if metric not in metrics]
    if missing:
        return Outcome.invalid(
            f"{what} omitted declared metric{'s' if len(missing) > 1 else ''} "
            + ", ".join(f"'{m}'" for m in missing)
            + _misspelt(missing, [m for m in metrics if m not in declared]),
            metrics=metrics,
            reasons=clean_reasons,
        )
    return Outcome(metrics=metrics, reasons=clean_reasons)


def _misspelt(missing: Sequence[str], undeclared: Sequence[str]) -> str:
    """``"; it returned undeclared 'added_test' (did you mean 'added_tset'?)"`` for each
    undeclared metric one typo from a missing one."""
    import difflib

    said = ""
    for name in undeclared:
        close = difflib.get_close_matches(name, missing, n=1, cutoff=0.75)
        if close:
            said += f"; it returned undeclared '{name}' (did you mean '{close[0]}'?)"
    return said


# How much of unreadable output an error quotes (all of it is kept in the archive).
BEGAN_BYTES = 120


def began(stdout: bytes) -> str:
    """``; it began: '...'``: the first bytes of output that could not be read, quoted.

    ``repr`` writes control characters and undecodable bytes as escapes, so the
    quote stays on one line whatever the validator printed.
    """
    data = stdout.lstrip()
    head = data[:BEGAN_BYTES].decode("utf-8", errors="backslashreplace")
    return f"; it began: {head!r}" + (" …" if len(data) > BEGAN_BYTES else "")


def keep_output(task: ValidationTask, stdout: bytes, name: str = "stdout") -> None:
    """Keep a validator's output that could not be used as ``validation/<validator>/stdout``.

    It is the evidence beside an error that quotes only its first bytes. Written
    without following a symlink inside the run folder; a refused write loses only
    this copy (the result's own write then says what is wrong with the folder).
    """
    from trysquare import _atomic

    try:
        _atomic.write_bytes(task.archive / name, stdout, root=task.run.dir)
    except OSError:
        pass


def _first_line(error: BaseException) -> str:
    lines = str(error).splitlines()
    return lines[0] if lines else type(error).__name__
