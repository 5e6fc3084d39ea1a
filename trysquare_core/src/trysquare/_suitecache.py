"""The suite is paid once: ``run.tests()`` outcomes recorded per run, keyed by what decides them.

What the suite sees is the clone's files (tracked + untracked-not-ignored: exactly
what :func:`trysquare.git.suite_copy.copy_tree` copies), the scenario's ``test_command``,
``prepare`` and ``pass_env``, and the etalon. The key is a digest of those; the
clone's part is the agent's work as the guard recorded it at first measurement
(the base commit and a content hash per touched path, ``.trysquare/work.json``)
and checked before this validation — so nothing is walked again, and a changed
clone either has another key or is refused before any validator runs.

The outcome is kept in ``<run>/.trysquare/suite/<key>.json``. The run folder is
the agent's, and it may have planted that file before trysquare ever ran: every
entry therefore carries an HMAC made with trysquare's signing key
(:mod:`trysquare._signing`: in trysquare's own cache, outside every run), and an entry
whose HMAC does not verify is ignored (then overwritten by the suite's real
outcome). Only a judged outcome (passed or failed) is kept: a timeout or a failed
``prepare`` may be the machine's fault, and the next validation tries again.

The suite itself is run by the runner's suite service
(:mod:`trysquare._suiteservice`), which a validator's ``run.tests()`` asks: the
service reuses a verified outcome here or runs the suite in the jail, and stores
what it found. A validator started by hand runs the suite itself.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trysquare import _atomic, _signing
from trysquare.jail import JailPolicy, jail_key

if TYPE_CHECKING:
    from trysquare.task_records import PlannedTask as Task

__all__ = ["reusable", "store", "suite_key", "task_key"]

CACHE_FOLDER = Path(".trysquare") / "suite"
_VERSION = 1


def suite_key(
    work: Mapping[str, Any],
    context: Mapping[str, Any],
    pass_env: tuple[str, ...],
    *,
    jail: JailPolicy | None = None,
) -> str:
    """The digest of everything that decides a suite's outcome on one clone."""
    decided: dict[str, Any] = {
        "version": _VERSION,
        "base": work.get("base"),
        "touched": work.get("touched"),
        "test_command": context.get("test_command"),
        "prepare": context.get("prepare"),
        "etalon": context.get("etalon"),
        "pass_env": sorted(pass_env),
    }
    if jail is not None and jail_key(jail) != jail_key(JailPolicy()):
        # Only once set: outcomes recorded under the default jail keep their keys.
        decided["jail"] = jail_key(jail)
    text = json.dumps(decided, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _signed(key: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """What an entry's MAC covers."""
    return {
        "key": key,
        "value": entry.get("value"),
        "reason": entry.get("reason"),
        "at": entry.get("at"),
    }


def _mac(key: str, entry: Mapping[str, Any]) -> str:
    return _signing.mac(_signed(key, entry))


def _entry_path(task: Task, key: str) -> Path:
    return task.run.dir / CACHE_FOLDER / f"{key}.json"


def _verified(task: Task, key: str) -> dict[str, Any] | None:
    """The recorded outcome for ``key`` if trysquare wrote it; ``None`` otherwise (never trusted)."""
    try:
        raw = _atomic.read_bytes(_entry_path(task, key), root=task.run.dir)
        entry = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None  # absent, planted as a link, or not JSON: run the suite
    if not isinstance(entry, dict) or not isinstance(entry.get("mac"), str):
        return None
    if entry.get("value") not in (True, False) or not isinstance(entry.get("reason"), str):
        return None
    if not isinstance(entry.get("at"), str):
        return None
    if not _signing.verifies(entry["mac"], _signed(key, entry)):
        return None
    return {"value": entry["value"], "reason": entry["reason"], "at": entry["at"]}


def _remove(path: Path, root: Path) -> None:
    try:
        _atomic.remove(path, root=root)
    except FileNotFoundError:
        pass


def reusable(task: Task, key: str) -> dict[str, Any] | None:
    """The signed outcome recorded for ``key`` that this task may reuse, or ``None``."""
    if task.rerun_suite:
        return None
    try:
        return _verified(task, key)
    except (OSError, ValueError, RecursionError):
        return None


def task_key(task: Task) -> str | None:
    """The suite's key for this task's clone, or ``None`` when the outcome is not to be kept.

    Only a clone the guard has just found equal to its recorded work gets a key.
    """
    if "test_command" not in task.task.context:
        return None
    if task.clone_before is None or task.clone_before.problem is not None:
        return None
    run = task.run
    try:
        work = json.loads(_atomic.read_bytes(run.dir / ".trysquare" / "work.json", root=run.dir))
    except (OSError, ValueError, RecursionError):
        return None  # the cache is an economy, never a reason to fail a run
    if not isinstance(work, dict) or not isinstance(work.get("touched"), dict):
        return None
    return suite_key(work, task.task.context, tuple(task.task.suite_pass_env), jail=task.task.jail)


def store(task: Task, key: str, value: bool, reason: str) -> None:
    """Keep a judged outcome, signed, for a clone that is still its recorded work."""
    from trysquare import clone_guard

    if (
        task.clone_before is None
        or clone_guard.clone_changes(task.run, task.clone_before) is not None
    ):
        return
    at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry: dict[str, Any] = {"value": value, "reason": reason, "at": at}
    try:
        entry["mac"] = _mac(key, entry)
        _atomic.write_json(_entry_path(task, key), entry, root=task.run.dir)
    except OSError:
        pass  # not kept: the next validation runs the suite again
