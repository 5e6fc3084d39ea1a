"""Where batch judging keeps its state: ``<experiment>/.trysquare/batches.sqlite``.

SQLite in WAL mode, ``synchronous = FULL``: each change is one transaction, durable when
it returns, so a ``kill -9`` at any point leaves every item in the state it last
committed, never half of one. One file for thousands of items (atomic files would be one
per item, rewritten at each step); the experiment's ``validate.lock`` already keeps a
second ``validate`` out, and the connection is shared by the judge's threads behind a lock.

``items``: one row per verdict asked for, keyed by ``item_key`` (the run folder relative
to the experiment, the validator, its digest and the context digest). Its ``custom_id``
adds a generation, raised each time the item is sent again (an error, an expiry, a
correction turn, ``--rejudge``): an answer to an older generation is never read as
this one's. States: ``queued`` → ``submitting`` (its batch being created) →
``in_flight`` → ``received`` (the raw answer saved, not read yet) → ``ended`` (its
outcome decided) → ``ingested`` (recorded in the run); ``failed`` when attempts ran out.

``batches``: one row per batch, keyed by trysquare's own ``batch_key`` (recorded before
the create call, sent as metadata where the API keeps it); ``remote_id`` once known.
States: ``creating``, ``in_flight``, ``ended``, ``abandoned`` (never created).
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trysquare.api import machine_mac, machine_mac_holds

__all__ = ["STORE_FILE", "Store", "StoreError"]

STORE_FILE = Path(".trysquare") / "batches.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    item_key TEXT PRIMARY KEY,
    custom_id TEXT NOT NULL UNIQUE,
    generation INTEGER NOT NULL DEFAULT 0,
    validator TEXT NOT NULL,
    run TEXT NOT NULL,
    digest TEXT NOT NULL,
    context_digest TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    turn INTEGER NOT NULL DEFAULT 0,
    batch_key TEXT,
    conversation TEXT NOT NULL,
    exchanges TEXT NOT NULL DEFAULT '[]',
    usage TEXT NOT NULL DEFAULT '[]',
    raw TEXT,
    outcome TEXT,
    error TEXT,
    kept TEXT,
    queued_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS items_state ON items (validator, state);
CREATE INDEX IF NOT EXISTS items_batch ON items (batch_key);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    batch_key TEXT PRIMARY KEY,
    validator TEXT NOT NULL,
    provider TEXT NOT NULL,
    remote_id TEXT UNIQUE,
    state TEXT NOT NULL,
    requests INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    status TEXT
);
"""


class StoreError(Exception):
    """The store cannot be opened or used: one sentence naming the file."""


class Store:
    """One experiment's batch state; every method is one transaction."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / STORE_FILE
        for path in (
            self.path.parent,
            self.path,
            Path(f"{self.path}-wal"),
            Path(f"{self.path}-shm"),
        ):
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(info.st_mode):
                raise StoreError(f"{path} is a symlink; trysquare never writes through one")
        found = os.path.lexists(self.path)
        try:
            self.path.parent.mkdir(exist_ok=True)
            self.db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
            self.db.row_factory = sqlite3.Row
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"{self.path} cannot be used ({error})") from None
        if found:
            # A store trysquare did not make here (planted in a run folder given as the
            # experiment) could hold forged verdicts: never read, never written.
            try:
                owner = self.db.execute("SELECT value FROM meta WHERE name = 'owner'").fetchone()
            except sqlite3.Error:
                owner = None
            nonce, _, tag = (str(owner[0]) if owner is not None else "").partition(":")
            if not machine_mac_holds(tag, ["batches", nonce]):
                self.db.close()
                raise StoreError(
                    f"{self.path} was not written by trysquare on this machine; it is never read "
                    "(remove it to judge in batch again)"
                )
        try:
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = FULL")
            self.db.executescript(_SCHEMA)
            columns = {row[1] for row in self.db.execute("PRAGMA table_info(items)")}
            if "kept" not in columns:  # a store made before items could keep a verdict
                self.db.execute("ALTER TABLE items ADD COLUMN kept TEXT")
            if not found:
                nonce = secrets.token_hex(16)
                self.db.execute(
                    "INSERT INTO meta VALUES ('owner', ?)",
                    (f"{nonce}:{machine_mac(['batches', nonce])}",),
                )
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"{self.path} cannot be used ({error})") from None
        self.lock = threading.RLock()

    def close(self) -> None:
        with self.lock:
            self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``), committed when the block ends."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def query(self, sql: str, parameters: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self.lock:
            return list(self.db.execute(sql, parameters))

    # -- items --------------------------------------------------------------------------

    def item(self, item_key: str) -> sqlite3.Row | None:
        rows = self.query("SELECT * FROM items WHERE item_key = ?", (item_key,))
        return rows[0] if rows else None

    def queue(
        self,
        *,
        item_key: str,
        custom_id: str,
        validator: str,
        run: str,
        digest: str,
        context_digest: str,
        conversation: Any,
        kept: Any = None,
    ) -> None:
        """Record a new item as queued (or queue again one whose answer is no longer wanted).

        ``kept`` is the verdict recorded before a ``--rejudge`` (metrics, reasons, usage):
        the one to keep if the batch gives no verdict in its place."""
        now = time.time()
        with self.transaction() as db:
            db.execute(
                "INSERT INTO items (item_key, custom_id, validator, run, digest, context_digest, state,"
                " conversation, kept, queued_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)"
                " ON CONFLICT (item_key) DO UPDATE SET state = 'queued', custom_id = excluded.custom_id,"
                " generation = generation + 1, attempts = 0, turn = 0, batch_key = NULL,"
                " conversation = excluded.conversation, exchanges = '[]', usage = '[]', raw = NULL,"
                " outcome = NULL, error = NULL, kept = excluded.kept, queued_at = excluded.queued_at, updated_at = excluded.updated_at",
                (
                    item_key,
                    custom_id,
                    validator,
                    run,
                    digest,
                    context_digest,
                    json.dumps(conversation),
                    None if kept is None else json.dumps(kept),
                    now,
                    now,
                ),
            )

    def items(self, validator: str, *states: str) -> list[sqlite3.Row]:
        marks = ", ".join("?" for _ in states)
        return self.query(
            f"SELECT * FROM items WHERE validator = ? AND state IN ({marks}) ORDER BY queued_at, item_key",
            (validator, *states),
        )

    def set_item(self, db: sqlite3.Connection, item_key: str, **values: Any) -> None:
        """Change an item inside a :meth:`transaction`."""
        values["updated_at"] = time.time()
        columns = ", ".join(f"{name} = ?" for name in values)
        db.execute(f"UPDATE items SET {columns} WHERE item_key = ?", (*values.values(), item_key))

    # -- batches ------------------------------------------------------------------------

    def batches(self, validator: str | None = None, *states: str) -> list[sqlite3.Row]:
        sql, parameters = "SELECT * FROM batches WHERE 1 = 1", []
        if validator is not None:
            sql += " AND validator = ?"
            parameters.append(validator)
        if states:
            sql += f" AND state IN ({', '.join('?' for _ in states)})"
            parameters.extend(states)
        return self.query(sql + " ORDER BY created_at, batch_key", parameters)

    def known_ids(self) -> set[str]:
        return {
            row["remote_id"]
            for row in self.query("SELECT remote_id FROM batches WHERE remote_id IS NOT NULL")
        }


def open_stores(roots: Sequence[Path]) -> dict[Path, Store]:
    """A store per experiment root (created on first use)."""
    return {root: Store(root) for root in roots}


def exists(root: Path) -> bool:
    return os.path.lexists(root / STORE_FILE)
