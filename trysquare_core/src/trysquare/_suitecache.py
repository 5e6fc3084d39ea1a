"""The suite is paid once: ``run.tests()`` outcomes recorded per run, keyed by what decides them.

What the suite sees is the clone's files (tracked + untracked-not-ignored: exactly
what :func:`trysquare.repo.copy_tree` copies), the scenario's ``test_command``,
``prepare`` and ``pass_env``, and the etalon. The key is a digest of those; the
clone's part is the agent's work as the guard recorded it at first measurement
(the base commit and a content hash per touched path, ``.trysquare/work.json``)
and checked before this validation — so nothing is walked again, and a changed
clone either has another key or is refused before any validator runs.

The outcome is kept in ``<run>/.trysquare/suite/<key>.json``. The run folder is
the agent's, and it may have planted that file before trysquare ever ran: every
entry therefore carries an HMAC made with a key that lives in trysquare's own
cache (``$XDG_CACHE_HOME/trysquare/suite.key``, outside every run), and an entry
whose HMAC does not verify is ignored (then overwritten by the suite's real
outcome). Only a judged outcome (passed or failed) is kept: a timeout or a failed
``prepare`` may be the machine's fault, and the next validation tries again.

How a validator process meets the cache (it cannot write the run folder where the
sandbox is in force, and must not trust anything there): the runner hands it
a verified outcome in ``TRYSQUARE_SUITE_REUSE`` and a path in its own archive
folder in ``TRYSQUARE_SUITE_REPORT``; ``run.tests()`` reads the first and writes
what it did to the second; the runner signs and stores a fresh outcome and notes
a reused one in the result. A validator started by hand gets neither variable and
simply runs the suite.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from trysquare import _atomic
from trysquare._suiteslot import REPORT_ENV, REPORT_FILE, REUSE_ENV

if TYPE_CHECKING:
    from trysquare.modes import Outcome
    from trysquare.modes import ValidationTask as Task

__all__ = ["REPORT_ENV", "REUSE_ENV", "SuiteOffer", "collect", "offer", "suite_key"]

CACHE_FOLDER = Path(".trysquare") / "suite"
_VERSION = 1


@attrs.frozen
class SuiteOffer:
    """What the runner hands one task: the key, and the verified outcome when there is one."""

    key: str
    report: Path
    reused: Mapping[str, Any] | None
    environment: Mapping[str, str]


def _key_file() -> Path:
    from trysquare.repo import _cache_root  # the one place trysquare's cache folder is named

    return _cache_root() / "suite.key"


_KEYS: dict[Path, bytes] = {}


def _secret() -> bytes:
    """This machine's signing key, made once (0600) in trysquare's cache, never in a run folder."""
    path = _key_file()
    found = _KEYS.get(path)
    if found is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        found = _atomic.create_once(path, secrets.token_hex(32).encode("ascii"), root=path.parent)
        if len(found) < 32:
            raise OSError(f"{path}: the suite cache's key is too short; delete it to make a new one")
        _KEYS[path] = found
    return found


def suite_key(work: Mapping[str, Any], context: Mapping[str, Any], pass_env: tuple[str, ...]) -> str:
    """The digest of everything that decides a suite's outcome on one clone."""
    decided = {
        "version": _VERSION,
        "base": work.get("base"),
        "touched": work.get("touched"),
        "test_command": context.get("test_command"),
        "prepare": context.get("prepare"),
        "etalon": context.get("etalon"),
        "pass_env": sorted(pass_env),
    }
    text = json.dumps(decided, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _mac(key: str, entry: Mapping[str, Any]) -> str:
    signed = {"key": key, "value": entry.get("value"), "reason": entry.get("reason"), "at": entry.get("at")}
    text = json.dumps(signed, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hmac.new(_secret(), text.encode("ascii"), hashlib.sha256).hexdigest()


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
    if not hmac.compare_digest(entry["mac"], _mac(key, entry)):
        return None
    return {"value": entry["value"], "reason": entry["reason"], "at": entry["at"]}


def _remove(path: Path, root: Path) -> None:
    try:
        _atomic.remove(path, root=root)
    except FileNotFoundError:
        pass


def offer(task: Task) -> SuiteOffer | None:
    """Prepare one task's view of the cache; ``None`` when there is no suite to cache for it.

    Only a clone the guard has just found equal to its recorded work gets a key.
    """
    if "test_command" not in task.context:
        return None
    if task.clone_before is None or task.clone_before.problem is not None:
        return None
    run = task.run
    try:
        work = json.loads(_atomic.read_bytes(run.dir / ".trysquare" / "work.json", root=run.dir))
        if not isinstance(work, dict) or not isinstance(work.get("touched"), dict):
            return None
        key = suite_key(work, task.context, tuple(task.suite_pass_env))
        report = task.context_path.parent / REPORT_FILE
        # Whatever lies there now was not written by this validator: never read as its report.
        _remove(report, run.dir)
        reused = None if task.rerun_suite else _verified(task, key)
    except (OSError, ValueError, RecursionError):
        return None  # the cache is an economy, never a reason to fail a run
    environment = {REPORT_ENV: str(report)}
    if reused is not None:
        environment[REUSE_ENV] = json.dumps(reused, sort_keys=True)
    return SuiteOffer(key=key, report=report, reused=reused, environment=environment)


def collect(task: Task, offered: SuiteOffer | None, outcome: Outcome) -> Outcome:
    """Store a suite outcome the validator reported, or note in ``outcome`` that one was reused."""
    if offered is None:
        return outcome
    run = task.run
    try:
        raw = _atomic.read_bytes(offered.report, root=run.dir)
    except OSError:
        return outcome  # the validator did not call run.tests()
    finally:
        try:
            _remove(offered.report, run.dir)
        except OSError:
            pass
    try:
        report = json.loads(raw)
    except (ValueError, RecursionError):
        return outcome
    if not isinstance(report, dict):
        return outcome
    if report.get("reused") is True and offered.reused is not None:
        note = (
            f"run.tests() reused the suite's outcome recorded at {offered.reused['at']} for this "
            "same clone content, test_command, prepare and etalon (--rerun-suite runs it again)"
        )
        return attrs.evolve(outcome, notes=(*outcome.notes, note))
    value, reason = report.get("value"), report.get("reason")
    if value not in (True, False) or not isinstance(reason, str):
        return outcome  # unjudged or unreadable: not kept, the next validation tries again
    if outcome.state == "invalid":
        return outcome  # a crashed or refused validator's suite is not one to keep
    from trysquare import guard

    # A suite outcome is kept only for a clone that is still its recorded work.
    if task.clone_before is None or guard.clone_changes(run, task.clone_before) is not None:
        return outcome
    at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry: dict[str, Any] = {"value": value, "reason": reason, "at": at}
    try:
        entry["mac"] = _mac(offered.key, entry)
        _atomic.write_json(_entry_path(task, offered.key), entry, root=run.dir)
    except OSError:
        pass  # not kept: the next validation runs the suite again
    return outcome
