"""Batch judging, driven from a judge's tasks and its two gathering moments.

A task of a ``batch = true`` judge sends nothing: it records the run's first request as a
*queued* item in the experiment's store (:mod:`trysquare_judge.batch.store`) and its
result as pending. After every task (and, first thing, for what an earlier ``validate``
left), :func:`collect` goes round: adopt a batch whose creation was cut short, send what
is queued (each batch recorded *before* the call that creates it), look at what is in
flight, save an ended batch's answers raw, decide each answer as the interactive judge
would (a verdict; a correction turn, sent in the next batch; a failure, sent again up to
:data:`MAX_ATTEMPTS` times), and yield each decided outcome for the runner to record.
An item is marked ingested only once the runner has written its result, so a kill at any
point leaves it to be yielded again (the runner writes only over the pending result it
answers: never twice).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from trysquare.api import Gathered, Gathering, Outcome, ValidationTask, shown

from trysquare_judge import scrub
from trysquare_judge.batch import BatchAnswer, BatchClient, batch_client_for
from trysquare_judge.batch.store import Store, StoreError
from trysquare_judge.providers import Message, ProviderError, ToolCall, Usage

if TYPE_CHECKING:
    from trysquare.api import Run

    from trysquare_judge.mode import JudgeValidation

__all__ = [
    "MAX_ATTEMPTS",
    "Session",
    "batch_usage",
    "begin",
    "collect",
    "custom_id",
    "gather",
    "item_key",
    "session_for",
]

MAX_ATTEMPTS = 3  # sends of one item that errored, expired or were cancelled, before it fails
BACKOFF = 1.5  # each wait between two looks is this much longer than the last...
MOST_WAIT = 600.0  # ...up to this many seconds (or poll_interval, when that is longer)
ACTIVE = ("queued", "submitting", "in_flight", "received")
DECIDED = ("ended", "failed")


def item_key(run: str, validator: str, digest: str, context_digest: str) -> str:
    """An item's identity: the run (its folder within the experiment), the validator, and
    the digests of the judge and of what it is shown. Never where the experiment lives."""
    text = json.dumps([run, validator, digest, context_digest])
    return hashlib.sha256(text.encode()).hexdigest()


def custom_id(key: str, generation: int) -> str:
    """The ``custom_id`` an item is sent under: within ``^[a-zA-Z0-9_-]{1,64}$`` (Anthropic's
    rule; OpenAI's is looser), new at each generation."""
    return f"ts_{key[:40]}_{generation}"


@attrs.define
class Session:
    """One validate's batch judging for one judge: its stores, its client, its runs."""

    validation: JudgeValidation
    gathering: Gathering
    client: BatchClient
    stores: dict[Path, Store]
    roots: dict[Path, Path]  # run folder -> experiment root
    runs: dict[tuple[Path, str], Run]  # (root, run folder relative to it) -> run

    def place(self, run: Run) -> tuple[Store, str] | None:
        root = self.roots.get(run.dir)
        if root is None:
            return None
        return self.stores[root], run.dir.relative_to(root).as_posix()


_sessions: dict[str, Session] = {}  # validator -> its session in this validate
_refused: dict[str, str] = {}  # validator -> why its store cannot be used in this validate


def begin(validation: JudgeValidation, gathering: Gathering) -> Session | None:
    """Open the stores of every experiment and keep the session for the judge's tasks."""
    assert validation.endpoint is not None
    client = batch_client_for(validation.endpoint)
    if client is None:
        return None
    stores: dict[Path, Store] = {}
    roots: dict[Path, Path] = {}
    runs: dict[tuple[Path, str], Run] = {}
    _close(validation.name)
    _refused.pop(validation.name, None)
    covered = {run.dir for run in gathering.runs}
    for experiment in gathering.experiments:
        root = experiment.root.resolve()
        try:
            stores[root] = Store(root)
        except StoreError as error:
            _refused[validation.name] = str(error)
            print(shown(f"trysquare: judge '{validation.name}': {error}"), file=gathering.out)
            return None
        for run in experiment.runs:
            if run.dir in covered:
                roots[run.dir] = root
                try:
                    runs[(root, run.dir.relative_to(root).as_posix())] = run
                except ValueError:
                    continue
    session = Session(validation, gathering, client, stores, roots, runs)
    _sessions[validation.name] = session
    return session


def _close(name: str) -> None:
    """Forget the session of validator ``name``, closing its stores."""
    session = _sessions.pop(name, None)
    if session is not None:
        for store in session.stores.values():
            store.close()


def session_for(validation: JudgeValidation) -> Session | None:
    """The session :func:`begin` opened for ``validation`` in this validate, if any."""
    return _sessions.get(validation.name)


def gather(validation: JudgeValidation, task: ValidationTask) -> Outcome:
    """A task of a batch judge: queue the run's first request; its result is pending.

    The item is keyed by the digests the runner records beside the pending result (the
    validator's digest, and the judge's own context identity: what it would send), so
    the verdict collected later answers exactly that pending result."""
    digest = validation.digest()
    context_digest = validation.context_identity(task.context)
    session = _sessions.get(validation.name)
    if validation.name in _refused:
        return Outcome.invalid(
            f"judge '{validation.name}': {_refused[validation.name]}; nothing was sent"
        )
    if session is None:
        return Outcome.invalid(
            f"judge '{validation.name}': batch judging runs inside `trysquare validate` with an "
            "executor that runs tasks in its own process (the local pool); nothing was sent"
        )
    place = session.place(task.run)
    if place is None:
        return Outcome.invalid(
            f"judge '{validation.name}': {task.run.dir} is in no experiment validated"
        )
    store, run = place
    key = item_key(run, validation.name, digest, context_digest)
    row = store.item(key)
    if row is not None and row["state"] in ACTIVE:
        return _pending(row, "still in flight: never sent twice")
    if row is not None and not session.gathering.rejudge and row["state"] in (*DECIDED, "ingested"):
        # Decided before (its result lost, or not written when trysquare ended): not paid again.
        _write_transcript(session, task.run, row)
        return _outcome(row, session)
    first = validation.first_request(task)
    if isinstance(first, Outcome):
        return first  # nothing to send (a piece not recorded, too large, no key)
    generation = 0 if row is None else int(row["generation"]) + 1
    store.queue(
        item_key=key, custom_id=custom_id(key, generation), validator=validation.name, run=run,
        digest=digest, context_digest=context_digest,
        conversation=[_message_record(m) for m in first.messages],
        kept=_kept_record(task) if session.gathering.rejudge else None,
    )  # fmt: skip
    return Outcome(state="pending", notes=("queued for batch judging",))


def collect(session: Session, *, wait: bool, last: bool) -> Iterator[Gathered]:
    """Go round until nothing is left in flight (or once, without ``wait``), yielding each
    outcome decided; at the ``last`` moment of a validate, say what is left in flight."""
    validation = session.validation
    assert validation.endpoint is not None
    interval = first = max(validation.endpoint.poll_interval, 0.0)
    while True:
        for store in session.stores.values():
            yield from _round(session, store)
        left = sum(len(store.items(validation.name, *ACTIVE)) for store in session.stores.values())
        if not left or not wait or session.gathering.should_stop():
            break
        if not _sleep(interval, session.gathering):
            break
        interval = min(interval * BACKOFF, max(MOST_WAIT, first))
    left = sum(len(store.items(validation.name, *ACTIVE)) for store in session.stores.values())
    if left and last:
        batches = sum(
            len(store.batches(validation.name, "in_flight", "creating"))
            for store in session.stores.values()
        )
        session.gathering.pending.append(
            f"judge '{validation.name}': {left} verdict{'s' if left != 1 else ''} in flight in {batches} "
            f"batch{'es' if batches != 1 else ''}; run validate again to collect them "
            "(trysquare batches SCENARIO PATH lists them)"
        )
    if last:
        _close(validation.name)


def _sleep(seconds: float, gathering: Gathering) -> bool:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if gathering.should_stop():
            return False
        time.sleep(min(0.05, max(until - time.monotonic(), 0)))
    return not gathering.should_stop()


def _round(session: Session, store: Store) -> Iterator[Gathered]:
    _adopt(session, store)
    yield from _submit(session, store)
    _poll(session, store)
    _decide(session, store)
    yield from _ingest(session, store)


def _say(session: Session, text: str) -> None:
    print(shown(text), file=session.gathering.out, flush=True)


# -- sending --------------------------------------------------------------------------------


def _adopt(session: Session, store: Store) -> None:
    """A batch recorded as being created when trysquare ended (or whose creation failed):
    found and kept, or known never made and its items queued again (up to MAX_ATTEMPTS)."""
    name = session.validation.name
    for batch in store.batches(name, "creating"):
        try:
            found = session.client.adopt(
                batch["batch_key"], created_after=batch["created_at"], requests=batch["requests"],
                known=store.known_ids(),
            )  # fmt: skip
        except ProviderError as error:
            if not error.message.startswith("HTTP 4"):
                _say(
                    session,
                    f"judge '{name}': could not look for batch {batch['batch_key']}: {error.message}",
                )
                continue
            found = None  # the API refuses to list: no batch of ours can be found there either
        with store.transaction() as db:
            if found is not None:
                db.execute(
                    "UPDATE batches SET state = 'in_flight', remote_id = ?, updated_at = ? WHERE batch_key = ?",
                    (found, time.time(), batch["batch_key"]),
                )
                db.execute(
                    "UPDATE items SET state = 'in_flight' WHERE batch_key = ? AND state = 'submitting'",
                    (batch["batch_key"],),
                )
        if found is not None:
            _say(session, f"judge '{name}': batch {found} adopted (created before trysquare ended)")
            continue
        with store.transaction() as db:
            db.execute(
                "UPDATE batches SET state = 'abandoned', updated_at = ? WHERE batch_key = ?",
                (time.time(), batch["batch_key"]),
            )
            for row in db.execute(
                "SELECT * FROM items WHERE batch_key = ? AND state = 'submitting'",
                (batch["batch_key"],),
            ).fetchall():
                attempts = row["attempts"] + 1
                if attempts < MAX_ATTEMPTS:
                    store.set_item(
                        db, row["item_key"], state="queued", batch_key=None, attempts=attempts
                    )
                else:
                    why = batch["status"] or "it was never created"
                    store.set_item(
                        db,
                        row["item_key"],
                        state="failed",
                        attempts=attempts,
                        outcome=json.dumps(
                            _failure_record(
                                session,
                                f"its batch could not be created {attempts} times ({why})",
                            )
                        ),
                    )


def _submit(session: Session, store: Store) -> Iterator[Gathered]:
    name = session.validation.name
    client = session.client
    rows = store.items(name, "queued")
    chunks: list[list[tuple[sqlite3.Row, Mapping[str, Any]]]] = [[]]
    weight = 0
    for row in rows:
        entry = client.entry(row["custom_id"], _request(session.validation, row))
        size = len(json.dumps(entry)) + 1
        if chunks[-1] and (
            len(chunks[-1]) >= client.max_requests or weight + size > client.max_bytes
        ):
            chunks.append([])
            weight = 0
        chunks[-1].append((row, entry))
        weight += size
    for chunk in chunks:
        if not chunk:
            continue
        key = uuid.uuid4().hex
        now = time.time()
        # Recorded before the call: a kill from here on leaves a batch to look for, not to pay twice.
        with store.transaction() as db:
            db.execute(
                "INSERT INTO batches (batch_key, validator, provider, state, requests, created_at, updated_at)"
                " VALUES (?, ?, ?, 'creating', ?, ?, ?)",
                (key, name, session.validation.provider, len(chunk), now, now),
            )
            for row, _ in chunk:
                store.set_item(db, row["item_key"], state="submitting", batch_key=key)
        try:
            remote = client.create([entry for _, entry in chunk], key=key)
        except ProviderError as error:
            # Perhaps created all the same (a lost reply): the next round looks for it.
            _say(
                session, f"judge '{name}': creating a batch of {len(chunk)} failed: {error.message}"
            )
            with store.transaction() as db:
                db.execute(
                    "UPDATE batches SET status = ? WHERE batch_key = ?", (error.message, key)
                )
            continue
        with store.transaction() as db:
            db.execute(
                "UPDATE batches SET state = 'in_flight', remote_id = ?, updated_at = ? WHERE batch_key = ?",
                (remote, time.time(), key),
            )
            db.execute(
                "UPDATE items SET state = 'in_flight' WHERE batch_key = ? AND state = 'submitting'",
                (key,),
            )
        _say(
            session,
            f"judge '{name}': batch {remote} sent ({len(chunk)} request{'s' if len(chunk) != 1 else ''})",
        )
        for row, _ in chunk:
            run = session.runs.get((store.root, row["run"]))
            if run is not None and row["turn"] == 0:
                yield Gathered(
                    run=run, digest=row["digest"], context_digest=row["context_digest"],
                    outcome=Outcome(state="pending", notes=(f"in batch {remote} (custom_id {row['custom_id']})",)),
                )  # fmt: skip


# -- receiving ------------------------------------------------------------------------------


def _poll(session: Session, store: Store) -> None:
    name = session.validation.name
    for batch in store.batches(name, "in_flight", "cancelling"):
        remote = batch["remote_id"]
        try:
            status = session.client.status(remote)
        except ProviderError as error:
            _say(session, f"judge '{name}': batch {remote}: could not look at it: {error.message}")
            continue
        age = _age(time.time() - batch["created_at"])
        _say(
            session,
            f"judge '{name}': batch {remote} {status.state}: {status.done} done, "
            f"{status.failed} failed, {status.pending} pending, oldest {age}",
        )
        if not status.ended:
            continue
        try:
            lines = list(session.client.results(remote, status))
        except ProviderError as error:
            _say(
                session,
                f"judge '{name}': batch {remote}: its results could not be fetched: {error.message}",
            )
            continue
        mine = {row["custom_id"]: row for row in store.query(
            "SELECT item_key, custom_id FROM items WHERE batch_key = ? AND state = 'in_flight'", (batch["batch_key"],)
        )}  # fmt: skip
        cancelled = batch["state"] == "cancelling"
        # Saved raw, every answer at once, before any is read further.
        with store.transaction() as db:
            for line in lines:
                try:
                    found = json.loads(line).get("custom_id")
                except (ValueError, AttributeError):
                    continue
                row = mine.pop(found, None) if isinstance(found, str) else None
                if row is not None:
                    store.set_item(db, row["item_key"], state="received", raw=line)
            for row in mine.values():  # never answered: as good as expired
                if cancelled:
                    store.set_item(
                        db,
                        row["item_key"],
                        state="failed",
                        outcome=json.dumps(
                            _failure_record(
                                session,
                                f"batch {remote} was cancelled (trysquare batches --cancel)",
                            )
                        ),
                    )
                else:
                    store.set_item(db, row["item_key"], state="received", raw=None)
            db.execute(
                "UPDATE batches SET state = ?, status = ?, updated_at = ? WHERE batch_key = ?",
                (
                    "cancelled" if cancelled else "ended",
                    status.state,
                    time.time(),
                    batch["batch_key"],
                ),
            )


def _decide(session: Session, store: Store) -> None:
    """Read each saved answer as the interactive judge reads a reply."""
    from trysquare_judge.mode import NEVER_CALLED, _read_reply

    validation = session.validation
    # Batches a person cancelled (trysquare batches --cancel): what they did not answer is not sent again.
    cancelled = {row["batch_key"] for row in store.batches(validation.name, "cancelled")}
    for row in store.items(validation.name, "received"):
        answer = _read(session, row)
        conversation = json.loads(row["conversation"])
        exchanges = json.loads(row["exchanges"])
        spent = json.loads(row["usage"])
        request = _request(validation, row)
        body = session.client.entry(row["custom_id"], request)
        exchange: dict[str, Any] = {
            "attempt": 1,
            "request": {"url": session.client.endpoint, "body": _body_of(body)},
            "batch": {"custom_id": row["custom_id"]},
        }
        values: dict[str, Any] = {}
        if answer.kind == "succeeded" and answer.reply is not None:
            reply = answer.reply
            exchange["response"] = {"status": 200, "body": answer.response}
            exchanges.append(exchange)
            spent.append(_usage_record(reply.usage or Usage(requests=1)))
            verdict, answers, problem = _read_reply(reply, validation.metrics)
            if verdict is not None:
                outcome = {
                    "metrics": dict(verdict.metrics),
                    "reasons": dict(verdict.reasons),
                    "state": "valid",
                    "error": None,
                }
                values = {"state": "ended", "outcome": json.dumps(outcome)}
            elif row["turn"] + 1 < validation.max_turns:
                # The error goes back into the same conversation, in the next batch.
                conversation.append(
                    _message_record(
                        Message(
                            role="assistant", content=reply.content, tool_calls=reply.tool_calls
                        )
                    )
                )
                conversation.extend(_message_record(m) for m in answers)
                values = {"state": "queued", "turn": row["turn"] + 1}
            else:
                error = NEVER_CALLED if problem is None else f"verdict failed validation: {problem}"
                values = {
                    "state": "ended",
                    "outcome": json.dumps(
                        {"metrics": {}, "reasons": {}, "state": "invalid", "error": error}
                    ),
                }
        else:
            exchange["response"] = {"status": None, "body": answer.response}
            exchange["error"] = f"{answer.kind}: {answer.error or 'no answer'}"
            exchanges.append(exchange)
            spent.append(_usage_record(Usage(requests=1 if answer.kind == "errored" else 0)))
            attempts = row["attempts"] + 1
            if row["batch_key"] in cancelled:
                values = {
                    "state": "failed",
                    "attempts": attempts,
                    "outcome": json.dumps(
                        _failure_record(
                            session,
                            "its batch was cancelled (trysquare batches --cancel); "
                            "validate --rejudge asks again",
                        )
                    ),
                }
            elif attempts < MAX_ATTEMPTS:
                values = {"state": "queued", "attempts": attempts}
            else:
                failure = (
                    f"judge provider '{validation.provider}' failed: the batch request "
                    f"{answer.kind} {attempts} times ({answer.error or 'no answer'})"
                )
                values = {
                    "state": "failed",
                    "attempts": attempts,
                    "outcome": json.dumps(_no_verdict(failure)),
                }
        if values["state"] == "queued":
            generation = row["generation"] + 1
            values.update(
                generation=generation,
                custom_id=custom_id(row["item_key"], generation),
                batch_key=None,
                raw=None,
            )
        with store.transaction() as db:
            store.set_item(
                db,
                row["item_key"],
                conversation=json.dumps(conversation),
                exchanges=json.dumps(exchanges),
                usage=json.dumps(spent),
                **values,
            )


def _read(session: Session, row: sqlite3.Row) -> BatchAnswer:
    if row["raw"] is None:
        return BatchAnswer(
            custom_id=row["custom_id"], kind="expired", error="the batch ended without answering it"
        )
    try:
        return session.client.read(row["raw"])
    except (ValueError, TypeError) as error:
        return BatchAnswer(
            custom_id=row["custom_id"], kind="errored", error=f"unreadable result line ({error})"
        )


def _ingest(session: Session, store: Store) -> Iterator[Gathered]:
    for row in store.items(session.validation.name, *DECIDED):
        run = session.runs.get((store.root, row["run"]))
        if run is None:
            continue  # not among this command's runs: left for the validate that covers it
        _write_transcript(session, run, row)
        yield Gathered(
            run=run,
            outcome=_outcome(row, session),
            digest=row["digest"],
            context_digest=row["context_digest"],
        )
        # Reached once the runner has recorded it: a kill before leaves it to be yielded again.
        with store.transaction() as db:
            store.set_item(db, row["item_key"], state="ingested")


# -- records --------------------------------------------------------------------------------


def _usage_record(usage: Usage) -> dict[str, Any]:
    return attrs.asdict(usage)


def _spent(row: sqlite3.Row) -> list[Usage]:
    return [Usage(**item) for item in json.loads(row["usage"])]


def _outcome(row: sqlite3.Row, session: Session) -> Outcome:
    from trysquare_judge.mode import _added_usage

    validation = session.validation
    recorded = json.loads(row["outcome"] or "{}")
    usage = batch_usage(validation, _spent(row))
    keys = _keys(validation)
    kept = json.loads(row["kept"]) if row["kept"] else None
    if recorded.get("no_verdict") and kept is not None:
        # Asked again (--rejudge), no verdict came: the previous one stays, the failure is
        # said, and validate exits 1 (the spending of both stays counted).
        return Outcome(
            metrics=dict(kept["metrics"]),
            reasons={k: scrub.scrub(str(v), keys) for k, v in kept["reasons"].items()},
            kept_after=scrub.scrub(f"kept the previous verdict: {recorded.get('error')}", keys),
            usage=_added_usage(kept.get("usage"), usage),
        )
    return Outcome(
        metrics=dict(recorded.get("metrics") or {}),
        reasons={k: scrub.scrub(v, keys) for k, v in (recorded.get("reasons") or {}).items()},
        state=recorded.get("state") or "invalid",
        error=None if recorded.get("error") is None else scrub.scrub(str(recorded["error"]), keys),
        usage=usage,
    )


def batch_usage(validation: JudgeValidation, spent: Sequence[Usage]) -> dict[str, Any]:
    """What the conversation spent, priced at the provider's batch price (``batch_discount``
    of the interactive price), and marked ``batch`` so that costs are shown apart."""
    usage = validation.usage_record(spent)
    discount = validation.endpoint.batch_discount if validation.endpoint is not None else 1.0
    for key in ("price_input", "price_output"):
        if usage.get(key) is not None:
            usage[key] = usage[key] * discount
    usage["batch"] = True
    return usage


def _failure_record(session: Session, error: str) -> dict[str, Any]:
    return _no_verdict(f"judge '{session.validation.name}': {error}")


def _no_verdict(error: str) -> dict[str, Any]:
    """The record of an item the provider gave no verdict for (it failed, expired, was
    cancelled, or its batch was never made): the one case where a ``--rejudge`` keeps the
    verdict it asked to replace, as the interactive judge keeps it through an outage."""
    return {"metrics": {}, "reasons": {}, "state": "invalid", "error": error, "no_verdict": True}


def _kept_record(task: ValidationTask) -> dict[str, Any] | None:
    """What a ``--rejudge`` keeps if the batch gives no verdict: the previous verdict, when
    it is valid and still current (same judge, same request), as the interactive judge
    decides it; ``None`` otherwise."""
    previous = task.previous or {}
    if not (
        task.previous_current
        and previous.get("state") == "valid"
        and isinstance(previous.get("metrics"), Mapping)
    ):
        return None
    reasons = previous.get("reasons")
    usage = previous.get("usage")
    return {
        "metrics": dict(previous["metrics"]),
        "reasons": dict(reasons) if isinstance(reasons, Mapping) else {},
        "usage": dict(usage) if isinstance(usage, Mapping) else None,
    }


def _keys(validation: JudgeValidation) -> list[str]:
    variable = None if validation.endpoint is None else validation.endpoint.api_key_env
    return scrub.keys_from_environment([variable])


def _write_transcript(session: Session, run: Run, row: sqlite3.Row) -> None:
    from trysquare_judge.mode import _planted_link
    from trysquare_judge.mode import _write_transcript as write

    validation = session.validation
    archive = run.validation_dir / validation.name
    if _planted_link(archive) is not None:
        return
    outcome = _outcome(row, session)
    transcript = {
        "validator": validation.name,
        "provider": validation.provider,
        "type": validation.endpoint.type if validation.endpoint else None,
        "model": validation.model,
        "thinking": validation.thinking,
        "digest": validation.digest(),
        "exchanges": json.loads(row["exchanges"]),
        "usage": dict(outcome.usage or {}),
        "outcome": {"state": outcome.state, "error": outcome.error},
    }
    try:
        write(archive, scrub.scrub_value(transcript, _keys(validation)), root=run.dir)
    except OSError as error:
        _say(
            session, f"trysquare: {run.label}: the judge's transcript could not be written: {error}"
        )


def _pending(row: sqlite3.Row, why: str) -> Outcome:
    return Outcome(state="pending", notes=(f"custom_id {row['custom_id']}: {why}",))


def _message_record(message: Message) -> dict[str, Any]:
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [[c.id, c.name, c.arguments] for c in message.tool_calls],
        "tool_call_id": message.tool_call_id,
    }


def _message(record: Mapping[str, Any]) -> Message:
    return Message(
        role=record["role"],
        content=record.get("content") or "",
        tool_calls=tuple(ToolCall(*call) for call in record.get("tool_calls") or ()),
        tool_call_id=record.get("tool_call_id"),
    )


def _request(validation: JudgeValidation, row: sqlite3.Row) -> Any:
    return validation.request([_message(m) for m in json.loads(row["conversation"])])


def _body_of(entry: Mapping[str, Any]) -> Any:
    """The request body inside a batch entry (OpenAI's ``body``, Anthropic's ``params``)."""
    for key in ("body", "params"):
        if key in entry:
            return entry[key]
    return dict(entry)


def _age(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
