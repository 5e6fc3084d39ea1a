"""Warm validators: a Python validator imported once, one forked child per run.

A script validator written with :mod:`trysquare.assay` pays an interpreter start and its
imports on every run, most of what it costs. When ``validate`` runs its tasks here (the
local executor), such a validator is served by a *warm server*: one process per validator
and worker thread, started with the validator's environment (secrets withheld, as a cold
run gets it), which imports the interpreter, ``trysquare.assay`` and the validator module
once, then forks one child per run. Each child is set up as the cold path sets up its
process — its own session, the run's working directory and environment, its own Landlock
domain over the same writable folders, ``argv`` as the kernel would hand it — and calls the
validator's ``cli()`` exactly as the script's ``__main__`` block would; its stdout, stderr
and exit status come back to :func:`run_warm`, which returns the
:class:`~trysquare._process.ProcessResult` the cold path would, so the script mode reads it
with the same code and records byte-identical results.

**Which validator is warm-capable** (:func:`entry_point`) is decided by reading the script,
never by running it in trysquare's process: its first line starts the interpreter trysquare
runs in (``#!/usr/bin/env python3`` found first on the ``PATH`` a validator gets, or that
interpreter's own path), its last statement is exactly ``if __name__ == "__main__":
raise SystemExit(NAME.cli())`` (or ``sys.exit(NAME.cli())``), and ``NAME`` is a top-level
function decorated with ``@validator``. Anything else keeps the cold path, and so does a
validator whose module fails to import in the server (what the cold run would then print is
what it records), a table with ``warm = false``, and every executor that runs tasks
elsewhere (a cluster's workers run validators cold).

**The protocol** is a socket pair created for each server: nobody else can connect to it
(no name in any folder), and each child closes its end before any validator code runs. A
request carries the child's argv, working directory, environment and writable folders, and
the write ends of two fresh pipes (``SCM_RIGHTS``) that become the child's stdout and
stderr; the server answers ``started`` (the child's pid, so the caller can kill it at its
timeout or at an interruption) then ``exited`` (its wait status, after every process the
child left behind was ended). Servers are stopped when ``validate`` ends.

**What a server holds**: no secret (it starts with the environment a cold run of this
validator gets, never trysquare's; no result is written or signed there — the runner does
that), and nothing a child can change for the next one: each child is a fresh fork of the
server as it stood after the import (a module global a run changes is gone with that run),
the server is not dumpable (``PR_SET_DUMPABLE`` 0: a same-user process without
``CAP_SYS_PTRACE`` cannot open its ``/proc/<pid>/mem``), a confined child cannot ptrace or
read the memory of a process outside its Landlock domain (the server's, a later child's),
and the server is the subreaper of its children: whatever a child left running (a daemon
that left its session) is killed before the next child starts. A child that kills the server
costs its own run only: that run is run again cold and the next run starts a new server.

The module's top level runs once, in the server, before any run, with the validator's
environment and a private working directory of its own; what it writes to stdout and stderr
is replayed at the start of every child's output, as each cold run would print it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from trysquare import _capped_output, _process, _start_first
from trysquare._process import DEFAULT_CAP, ProcessResult

if TYPE_CHECKING:
    import socket

__all__ = ["entry_point", "run_warm", "servers", "serving"]

# What the server process runs: as little as possible before the validator's own imports.
_BOOT = (
    "import sys; from trysquare._warm_server import _serve; "
    "_serve(int(sys.argv[1]), sys.argv[2], sys.argv[3])"
)
# How long a server may take to import its validator before the cold path is used instead.
_START_TIMEOUT = 60.0
# How long the server may take to end a killed child's leftovers and say so.
_SETTLE_TIMEOUT = 10.0


# --- which validator is warm-capable ----------------------------------------------------

_detected: dict[tuple[str, int, int], str | None] = {}
_detect_lock = threading.Lock()


def entry_point(script: Path, path_env: str | None) -> str | None:
    """The name of the ``@validator`` function whose ``cli()`` the script's ``__main__`` block
    returns, when the script may be served warm; ``None`` otherwise.

    Reads and parses the file only (nothing of it runs here). ``path_env``: the ``PATH`` a
    validator is started with, where ``#!/usr/bin/env python3`` finds its interpreter.
    """
    try:
        found = os.stat(script)
    except OSError:
        return None
    key = (str(script), found.st_mtime_ns, found.st_size)
    # Held across the parse, not only the lookup: CPython 3.11's AST constructor keeps its
    # recursion count per interpreter, so two threads parsing at once can fail with
    # "SystemError: AST constructor recursion depth mismatch" (gh-106905). Workers of one
    # validate then also parse each script once.
    with _detect_lock:
        if key in _detected:
            return _detected[key]
        try:
            source = Path(script).read_bytes()
        except OSError:
            return None
        runs_here = _runs_this_interpreter(source, path_env)
        name = _entry_point(source, path_env) if runs_here else None
        _detected[key] = name
    return name


def _runs_this_interpreter(source: bytes, path_env: str | None) -> bool:
    """Whether the script's first line starts the interpreter trysquare itself runs in."""
    if not source.startswith(b"#!"):
        return False
    words = source[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return False
    if len(words) == 2 and os.path.basename(words[0]) == "env":
        import shutil

        program = shutil.which(words[1], path=path_env)
        if program is None:
            return False
    elif len(words) == 1:
        program = words[0]
    else:
        return False  # interpreter options: not what the server was started with
    here = os.path.abspath(sys.executable)
    there = os.path.abspath(program)
    # The same folder (a virtual environment's bin) and the same binary behind the links.
    return os.path.dirname(there) == os.path.dirname(here) and os.path.realpath(
        there
    ) == os.path.realpath(here)


def _entry_point(source: bytes, path_env: str | None) -> str | None:
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    if not tree.body:
        return None
    name = _main_block_calls_cli(tree.body[-1])
    if name is None:
        return None
    for statement in tree.body[:-1]:
        if (
            isinstance(statement, ast.FunctionDef)
            and statement.name == name
            and any(_is_validator_decorator(d) for d in statement.decorator_list)
        ):
            return name
    return None


def _main_block_calls_cli(statement: object) -> str | None:
    """``NAME`` when ``statement`` is ``if __name__ == "__main__": raise SystemExit(NAME.cli())``
    or ``sys.exit(NAME.cli())``, with nothing else in it."""
    import ast

    if not isinstance(statement, ast.If) or statement.orelse or len(statement.body) != 1:
        return None
    test = statement.test
    if not (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name) and test.left.id == "__name__"
        and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__"
    ):  # fmt: skip
        return None
    body = statement.body[0]
    if isinstance(body, ast.Raise) and body.cause is None and isinstance(body.exc, ast.Call):
        call = body.exc
        if not (isinstance(call.func, ast.Name) and call.func.id == "SystemExit"):
            return None
    elif isinstance(body, ast.Expr) and isinstance(body.value, ast.Call):
        call = body.value
        func = call.func
        if not (
            isinstance(func, ast.Attribute) and func.attr == "exit"
            and isinstance(func.value, ast.Name) and func.value.id == "sys"
        ):  # fmt: skip
            return None
    else:
        return None
    if len(call.args) != 1 or call.keywords:
        return None
    inner = call.args[0]
    if not (
        isinstance(inner, ast.Call) and not inner.args and not inner.keywords
        and isinstance(inner.func, ast.Attribute) and inner.func.attr == "cli"
        and isinstance(inner.func.value, ast.Name)
    ):  # fmt: skip
        return None
    return inner.func.value.id


def _is_validator_decorator(node: object) -> bool:
    import ast

    if isinstance(node, ast.Name):
        return node.id == "validator"
    return isinstance(node, ast.Attribute) and node.attr == "validator"


# --- the servers of one validate ---------------------------------------------------------

_active: list[_Servers] = []
_active_lock = threading.Lock()


class _Servers:
    """The warm servers of one ``validate``: one per validator and worker thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_key: dict[tuple[object, ...], _Server] = {}
        # Validators whose server could not import them: cold for the rest of the validate.
        self.unusable: set[tuple[object, ...]] = set()

    def stop(self) -> None:
        with self.lock:
            servers = list(self.by_key.values())
            self.by_key.clear()
        for server in servers:
            server.stop()


@contextmanager
def servers(enabled: bool = True) -> Iterator[None]:
    """While inside, :func:`run_warm` may serve warm-capable validators; every server is
    stopped on the way out. ``enabled=False`` (an executor running tasks elsewhere): cold."""
    if not enabled:
        yield
        return
    pool = _Servers()
    with _active_lock:
        _active.append(pool)
    try:
        yield
    finally:
        with _active_lock:
            _active.remove(pool)
        pool.stop()


def serving() -> bool:
    """Whether warm servers may be used here and now (inside :func:`servers`)."""
    return bool(_active)


def run_warm(
    script: Path,
    entry: str,
    argv: Sequence[str],
    *,
    cwd: str,
    timeout: float,
    base_env: Mapping[str, str],
    env: Mapping[str, str],
    writable: Sequence[str | Path],
    cap: int = DEFAULT_CAP,
) -> ProcessResult | None:
    """Run ``argv`` (the script and its context) in a child of the warm server, as
    :func:`trysquare._process.run_process` would run it cold with ``sandbox=writable``.

    ``base_env`` is what the server starts with (the validator's environment, no secret);
    ``env`` the child's own. Returns ``None`` when the run must take the cold path: no
    server is active here, the validator does not import in a server, or the server was
    lost before the child's fate was known.
    """
    with _active_lock:
        pool = _active[-1] if _active else None
    if pool is None:
        return None
    key = (str(script), entry, threading.get_ident(), tuple(sorted(base_env.items())))
    validator_key = key[:2] + key[3:]
    with pool.lock:
        if validator_key in pool.unusable:
            return None
        server = pool.by_key.get(key)
    if server is None or not server.alive():
        if server is not None:
            server.stop()
        try:
            server = _Server.start(script, entry, base_env)
        except _Unusable:
            with pool.lock:
                pool.unusable.add(validator_key)
            return None
        except OSError:
            return None
        with pool.lock:
            pool.by_key[key] = server
    try:
        return server.run(argv, cwd=cwd, timeout=timeout, env=env, writable=writable, cap=cap)
    except _Lost:
        server.stop()
        return None


class _Unusable(Exception):
    """The server could not import the validator: it takes the cold path."""


class _Lost(Exception):
    """The server went away before the child's fate was known."""


class _Server:
    """The runner's end of one warm server."""

    def __init__(self, process: object, channel: socket.socket) -> None:
        import subprocess

        assert isinstance(process, subprocess.Popen)
        self.process: subprocess.Popen[bytes] = process
        self.channel = channel
        self.buffer = b""
        self.watcher = select.poll()
        self.watcher.register(channel.fileno(), select.POLLIN)

    @classmethod
    def start(cls, script: Path, entry: str, base_env: Mapping[str, str]) -> _Server:
        import socket  # only where a warm server starts: a shell validator never needs it
        import subprocess

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # As for any child started in a session of its own: until it is in _live_groups,
        # another worker's cold run ending its strays would take the server for one of them.
        _process._spawning.acquire()
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno()), str(script), entry],
                env=dict(base_env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
                cwd="/",
            )
            # A live group of ours: a cold run ending its strays never takes the server (our
            # child in a session of its own) for one, and an interruption kills it.
            _process._live_groups.add(process.pid)
        finally:
            _process._spawning.release()
            theirs.close()
        server = cls(process, ours)
        try:
            said = server._receive(time.monotonic() + _START_TIMEOUT)
        except _Lost:
            server.stop()
            raise _Unusable("the server did not start") from None
        if said.get("ready") is not True:
            server.stop()
            raise _Unusable(str(said.get("unusable", "")))
        return server

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        try:
            self.channel.close()  # the server ends when its end of the pair reads nothing
        except OSError:
            pass
        try:
            self.process.wait(timeout=2)
        except Exception:  # noqa: BLE001 - a server that will not end is killed
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.process.wait()
        _process._live_groups.discard(self.process.pid)

    def _receive(self, deadline: float | None) -> dict[str, object]:
        """The server's next message (one JSON line); ``_Lost`` when it is gone or silent."""
        while b"\n" not in self.buffer:
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if wait == 0.0:
                raise _Lost("no answer")
            # The channel stays blocking and is waited for with poll(2): a socket timeout
            # switches it to non-blocking and back around every call (system calls that each
            # let the GIL go, which costs a switch interval while another thread computes).
            try:
                if not self.watcher.poll(None if wait is None else wait * 1000):
                    raise _Lost("no answer")
                data = self.channel.recv(1 << 16)
            except OSError:
                raise _Lost("no answer") from None
            if not data:
                raise _Lost("gone")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            raise _Lost("garbled") from None
        if not isinstance(message, dict):
            raise _Lost("garbled")
        return message

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        timeout: float,
        env: Mapping[str, str],
        writable: Sequence[str | Path],
        cap: int,
    ) -> ProcessResult:
        from socket import send_fds  # imported by start(): this server exists

        from trysquare.sandbox import shared_memory_refusal, switched_off

        start = time.monotonic()
        deadline = start + timeout
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        confine = not switched_off()
        if confine:
            # As the cold path marks a confined child (its value differs every run there too).
            env = {**env, _process._TOKEN_VAR: f"{os.getpid()}.{next(_process._tokens)}"}
        request = {
            "argv": list(argv),
            "cwd": cwd,
            "env": dict(env),
            "writable": [str(p) for p in writable],
            "confine": confine,
            # Decided here, where validate named what it protects (the server knows nothing).
            "shared_memory": confine and shared_memory_refusal() is None,
        }
        try:
            try:
                send_fds(
                    self.channel, [json.dumps(request).encode() + b"\n"], [out_write, err_write]
                )
            except OSError:
                raise _Lost("gone") from None
        finally:
            os.close(out_write)
            os.close(err_write)
        pid: int | None = None
        try:
            said = self._receive(time.monotonic() + _START_TIMEOUT)
            started = said.get("started")
            if not isinstance(started, int):
                raise _Lost("garbled")
            pid = started
            _start_first.child_started()
            _process._live_groups.add(pid)
            owned = getattr(_process._owned, "groups", None)
            if owned is not None:
                owned.add(pid)
            stdout, stderr, truncated, timed_out = _collect(out_read, err_read, deadline, cap, pid)
            said = self._receive(time.monotonic() + _SETTLE_TIMEOUT)
            status = said.get("exited")
            if not isinstance(status, int):
                raise _Lost("garbled")
        except _Lost:
            if pid is not None:
                _kill(pid)
            raise
        finally:
            os.close(out_read)
            os.close(err_read)
            if pid is not None:
                _process._live_groups.discard(pid)
                owned = getattr(_process._owned, "groups", None)
                if owned is not None:
                    owned.discard(pid)
        return ProcessResult(
            argv,
            None if timed_out else status,
            stdout,
            stderr,
            timed_out,
            truncated,
            time.monotonic() - start,
        )


def _kill(pid: int) -> None:
    """The child and its process group (it leads one), killed; gone already is no error."""
    for kill, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _collect(
    out_fd: int, err_fd: int, deadline: float, cap: int, pid: int
) -> tuple[bytes, bytes, bool, bool]:
    """Read the child's stdout and stderr to their ends (the server closes them by ending
    every process that held them), keeping ``cap`` bytes of each; kill it at ``deadline``."""
    output = _capped_output.CappedOutput((out_fd, err_fd), cap)
    timed_out = False
    # poll(2), not epoll: nothing to create, register or close for two pipes.
    watcher = select.poll()
    for fd in (out_fd, err_fd):
        watcher.register(fd, select.POLLIN)
    open_fds = {out_fd, err_fd}
    while open_fds:
        now = time.monotonic()
        if not timed_out and now >= deadline:
            timed_out = True
            _kill(pid)  # the server then ends what it left, which closes the pipes
        if timed_out and now >= deadline + _SETTLE_TIMEOUT:
            break  # something still holds them: the server is asked no more (_Lost)
        wait = 0.5 if timed_out else max(min(deadline - now, 0.5), 0.0)
        for fd, _ in watcher.poll(wait * 1000):
            if not output.read(fd):
                watcher.unregister(fd)
                open_fds.discard(fd)
    return output.kept(out_fd), output.kept(err_fd), output.truncated, timed_out
