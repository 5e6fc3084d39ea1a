"""The runner runs the suite a validator asks for: in the jail, once, and signs what it found.

A script validator is confined by Landlock, and a Landlock-confined process cannot
build the jail's mount namespace; what such a process reported about the suite
would also be only its word. So for every task whose scenario declares a suite,
the process that starts the validator opens a door — a unix socket in a private
folder, named to the validator in ``TRYSQUARE_SUITE_SOCKET`` — and ``run.tests()``
asks through it (:mod:`trysquare._suiteslot`). The service answers with the
outcome it signed earlier for this same clone content and suite
(:mod:`trysquare._suitecache`), or runs ``prepare`` and ``test_command`` in the
jail (:func:`trysquare._suite.run_suite`) and keeps a judged outcome, signed.

The suite runs at most once per task; when the validator ends before the suite
does (its timeout, a crash), the suite's processes are killed with it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from trysquare import _suitecache
from trysquare._process import kill_groups, owned_groups
from trysquare._suiteslot import SOCKET_ENV

if TYPE_CHECKING:
    from trysquare.task_records import PlannedTask

__all__ = ["SuiteService"]

# A request is {"timeout": seconds}: anything longer is not one.
_REQUEST_CAP = 4096


class SuiteService:
    """The door one validator process asks the suite through (a context manager)."""

    def __init__(self, planned: PlannedTask) -> None:
        self.planned = planned
        self.task = planned.task
        self.key = _suitecache.task_key(planned)
        self.notes: list[str] = []
        # Set when running the suite failed inside trysquare: the task is then invalid.
        self.crash: str | None = None
        self._answer: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._groups: set[int] = set()
        self._folder = tempfile.mkdtemp(prefix="trysquare-suite-", dir=_short_tmp())
        self.path = os.path.join(self._folder, "door")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(8)
        self._thread = threading.Thread(target=self._serve, name="trysquare-suite", daemon=True)

    @property
    def environment(self) -> dict[str, str]:
        return {SOCKET_ENV: self.path}

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Shut the door; a suite still running (its validator is gone) is killed."""
        self._closed.set()
        kill_groups(self._groups)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() below at once
        except OSError:
            pass
        self._thread.join(timeout=30)
        self._listener.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    # --- the serving thread ---------------------------------------------------------

    def _serve(self) -> None:
        with owned_groups() as groups:
            self._groups = groups
            while not self._closed.is_set():
                try:
                    connection, _ = self._listener.accept()
                except OSError:
                    return  # shut by close()
                with connection:
                    self._answer_one(connection)

    def _answer_one(self, connection: socket.socket) -> None:
        connection.settimeout(10)
        try:
            request = b""
            while b"\n" not in request and len(request) < _REQUEST_CAP:
                chunk = connection.recv(_REQUEST_CAP)
                if not chunk:
                    break
                request += chunk
            asked = json.loads(request.split(b"\n", 1)[0] or b"{}")
            timeout = float(asked.get("timeout", 600.0)) if isinstance(asked, dict) else 600.0
            if not 0 < timeout < float("inf"):
                timeout = 600.0
        except (OSError, ValueError, TypeError):
            return
        connection.settimeout(None)
        try:
            answer = self.verdict(timeout)
        except Exception as error:  # noqa: BLE001 - trysquare's own failure: said, never unjudged
            self.crash = f"trysquare could not run the suite: {type(error).__name__}: {error}"
            answer = {"value": None, "reason": self.crash}
        try:
            connection.sendall(json.dumps(answer).encode())
        except OSError:
            pass  # the validator is gone

    def verdict(self, timeout: float) -> dict[str, Any]:
        """The suite's verdict for this task (run once; later calls get the same answer)."""
        with self._lock:
            if self._answer is None:
                self._answer = self._decide(timeout)
            return self._answer

    def _decide(self, timeout: float) -> dict[str, Any]:
        task = self.task
        reused = None if self.key is None else _suitecache.reusable(self.planned, self.key)
        if reused is not None:
            self.notes.append(
                f"run.tests() reused the suite's outcome recorded at {reused['at']} for this "
                "same clone content, test_command, prepare and etalon (--rerun-suite runs it again)"
            )
            return {"value": reused["value"], "reason": reused["reason"]}
        from trysquare._suite import run_suite

        context = task.context
        verdict = run_suite(
            Path(str(context["repo"])),
            context["test_command"],
            [str(step) for step in context.get("prepare") or ()],
            timeout=timeout,
            pass_env=tuple(task.suite_pass_env),
            protected=task.protected_env,
            jail=task.jail,
            guarded=[task.run.dir],
            base=str(context["base"]) if context.get("base") else None,
        )
        if self._closed.is_set():
            return {"value": None, "reason": "the validator ended before the suite did"}
        if verdict.judged and self.key is not None:
            _suitecache.store(self.planned, self.key, bool(verdict.value), verdict.reason or "")
        return {"value": verdict.value if verdict.judged else None, "reason": verdict.reason or ""}


def _short_tmp() -> str | None:
    """A temporary folder whose paths fit a unix socket's 107 bytes (``/tmp`` otherwise)."""
    folder = tempfile.gettempdir()
    return folder if len(folder) < 60 else ("/tmp" if os.path.isdir("/tmp") else None)
