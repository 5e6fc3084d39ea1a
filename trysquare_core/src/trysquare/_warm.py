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

import atexit
import json
import os
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from trysquare import _process
from trysquare._process import DEFAULT_CAP, ProcessResult

__all__ = ["entry_point", "run_warm", "servers", "serving"]

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
    with _detect_lock:
        if key in _detected:
            return _detected[key]
    try:
        source = Path(script).read_bytes()
    except OSError:
        return None
    name = _entry_point(source, path_env) if _runs_this_interpreter(source, path_env) else None
    with _detect_lock:
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

    @classmethod
    def start(cls, script: Path, entry: str, base_env: Mapping[str, str]) -> _Server:
        import subprocess

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
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
        finally:
            theirs.close()
        # A live group of ours: a cold run ending its strays never takes the server (our
        # child in a session of its own) for one, and an interruption kills it.
        _process._live_groups.add(process.pid)
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
            self.channel.settimeout(wait)
            try:
                data = self.channel.recv(1 << 16)
            except (TimeoutError, OSError):
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
        from trysquare.sandbox import switched_off

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
        }
        self.channel.settimeout(None)  # a receive's deadline is no sender's
        try:
            try:
                socket.send_fds(
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
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    sizes = dict.fromkeys(chunks, 0)
    truncated = timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            now = time.monotonic()
            if not timed_out and now >= deadline:
                timed_out = True
                _kill(pid)  # the server then ends what it left, which closes the pipes
            if timed_out and now >= deadline + _SETTLE_TIMEOUT:
                break  # something still holds them: the server is asked no more (_Lost)
            wait = 0.5 if timed_out else max(min(deadline - now, 0.5), 0.0)
            for selected, _ in selector.select(timeout=wait):
                fd = selected.fd
                data = os.read(fd, 1 << 16)
                if not data:
                    selector.unregister(fd)
                    continue
                room = cap - sizes[fd]
                if room > 0:
                    chunks[fd].append(data[:room])
                if len(data) > room:
                    truncated = True
                sizes[fd] += len(data)
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd]), truncated, timed_out


# --- the server ---------------------------------------------------------------------------

# What the server process runs: as little as possible before the validator's own imports.
_BOOT = "import sys; from trysquare._warm import _serve; _serve(int(sys.argv[1]), sys.argv[2], sys.argv[3])"

_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


_libc: list[object] = []


def _prctl(option: int, value: int) -> bool:
    import ctypes

    try:
        if not _libc:
            _libc.append(ctypes.CDLL(None, use_errno=True))
        answer = _libc[0].prctl(  # type: ignore[attr-defined]
            option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
        )
        return int(answer) == 0
    except (OSError, AttributeError):
        return False


def _serve(channel_fd: int, script: str, entry: str) -> None:
    """The server's whole life: import the validator, then fork one child per request."""
    import tempfile

    channel = socket.socket(fileno=channel_fd)
    # Nobody of our user without CAP_SYS_PTRACE opens our memory; orphans come to us.
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner says when to stop
    home = tempfile.mkdtemp(prefix="trysquare-warm-")
    try:
        loaded = _import(script, entry, home)
        if isinstance(loaded, str):
            channel.sendall(json.dumps({"unusable": loaded}).encode() + b"\n")
            return
        function, printed = loaded
        channel.sendall(b'{"ready": true}\n')
        _requests(channel, script, function, printed)
    finally:
        import shutil

        _end_leftovers()  # nothing the top level or a child started outlives the server
        shutil.rmtree(home, ignore_errors=True)


def _import(script: str, entry: str, home: str) -> tuple[object, tuple[bytes, bytes]] | str:
    """Run the script's top level once as ``__main__`` (its ``__main__`` block left out):
    the ``@validator`` object and what the top level printed, or why it cannot be served."""
    import ast
    import types

    from trysquare import assay

    try:
        source = Path(script).read_bytes()
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError) as error:
        return f"cannot read the script: {error}"
    if not tree.body or _main_block_calls_cli(tree.body[-1]) != entry:
        return "the script changed"
    tree.body = tree.body[:-1]
    module = types.ModuleType("__main__")
    module.__file__ = script
    module.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = module
    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.realpath(script))
    os.chdir(home)
    # What the top level prints goes to files, replayed at the start of each child's output.
    sys.stdout.flush()
    sys.stderr.flush()
    captured = [_capture_file(home, "stdout"), _capture_file(home, "stderr")]
    saved = [os.dup(1), os.dup(2)]
    os.dup2(captured[0], 1)
    os.dup2(captured[1], 2)
    try:
        exec(compile(tree, script, "exec"), module.__dict__)  # noqa: S102 - the experimenter's validator, as the cold path runs it
    except BaseException as error:  # noqa: BLE001 - then every run takes the cold path
        return f"the top level raised {type(error).__name__}"
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
    function = module.__dict__.get(entry)
    if not isinstance(function, assay._Validator):
        return f"{entry} is not a @validator"
    # Forking a process with threads can deadlock the child; what the top level started
    # would be ended with the first run: such a module is the cold path's.
    if threading.active_count() > 1:
        return "the top level started a thread"
    if _process._descendants(os.getpid()):
        return "the top level started a process"
    printed = []
    for fd in captured:
        os.lseek(fd, 0, os.SEEK_SET)
        parts = []
        while chunk := os.read(fd, 1 << 16):
            parts.append(chunk)
        os.close(fd)
        printed.append(b"".join(parts))
    import gc

    gc.collect()
    gc.freeze()  # what the import built stays shared with every child (copy-on-write)
    return function, (printed[0], printed[1])


def _capture_file(folder: str, name: str) -> int:
    return os.open(
        os.path.join(folder, name), os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600
    )


def _requests(
    channel: socket.socket, script: str, function: object, printed: tuple[bytes, bytes]
) -> None:
    buffer = b""
    descriptors: list[int] = []
    while True:
        data, fds, _flags, _address = socket.recv_fds(channel, 1 << 20, 4)
        descriptors.extend(fds)
        if not data:
            return  # the runner closed its end: validate is over
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            request = json.loads(line)
            out_fd, err_fd = descriptors[0], descriptors[1]
            del descriptors[:2]
            pid = _fork_child(channel, request, function, printed, out_fd, err_fd)
            os.close(out_fd)
            os.close(err_fd)
            channel.sendall(json.dumps({"started": pid}).encode() + b"\n")
            _, status = os.waitpid(pid, 0)
            _end_leftovers()
            channel.sendall(
                json.dumps({"exited": os.waitstatus_to_exitcode(status)}).encode() + b"\n"
            )


def _fork_child(
    channel: socket.socket,
    request: Mapping[str, object],
    function: object,
    printed: tuple[bytes, bytes],
    out_fd: int,
    err_fd: int,
) -> int:
    from trysquare.sandbox import Sandbox

    writable = [str(p) for p in request["writable"]]  # type: ignore[attr-defined]
    # The ruleset is built here (building one restricts nobody); the child applies it.
    ruleset = None
    sandbox = Sandbox(writable)
    if request["confine"]:
        from trysquare.sandbox import sandbox_enabled

        if sandbox_enabled():
            try:
                ruleset = sandbox._ruleset()
            except OSError:
                ruleset = -1
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        if ruleset is not None and ruleset >= 0:
            os.close(ruleset)
        return pid
    # The child: nothing of the server's channel survives into validator code.
    try:
        code = _child(channel, request, function, printed, out_fd, err_fd, ruleset)
    except BaseException:  # noqa: BLE001 - whatever happens, the child never returns into the server
        code = 1
    os._exit(code)


def _child(
    channel: socket.socket,
    request: Mapping[str, object],
    function: object,
    printed: tuple[bytes, bytes],
    out_fd: int,
    err_fd: int,
    ruleset: int | None,
) -> int:
    os.setsid()
    channel.close()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(
            number, signal.SIG_DFL if number != signal.SIGINT else signal.default_int_handler
        )
    if ruleset is not None:
        from trysquare.sandbox import _restrict_this_thread

        if ruleset < 0:
            os.write(2, b"trysquare: the validator could not be confined (Landlock ruleset)\n")
            return 126
        try:
            _restrict_this_thread(ruleset)
        except OSError as error:
            os.write(2, f"trysquare: the validator could not be confined: {error}\n".encode())
            return 126
        os.close(ruleset)
    # Like an exec'd process: dumpable again (the server is not), so its own tools read it.
    _prctl(_PR_SET_DUMPABLE, 1)
    os.chdir(str(request["cwd"]))
    environment = request["env"]
    assert isinstance(environment, dict)
    os.environ.clear()
    os.environ.update(environment)
    argv = [str(word) for word in request["argv"]]  # type: ignore[attr-defined]
    sys.argv = argv
    if "random" in sys.modules:
        sys.modules["random"].seed()  # as a fresh interpreter would: not the server's sequence
    for fd, text in zip((1, 2), printed, strict=True):
        if text:
            os.write(fd, text)
    return _call_cli(function)


def _call_cli(function: object) -> int:
    """What ``raise SystemExit(NAME.cli())`` then the interpreter's exit make of it."""
    try:
        code: object = function.cli()  # type: ignore[attr-defined]
    except SystemExit as exit_:
        code = exit_.code
    except BaseException:  # noqa: BLE001 - printed as the interpreter would, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    sys.stderr.flush()
    return 1


def _end_leftovers() -> None:
    """Kill and reap every process still below the server (a child's daemon, adopted by us
    as subreaper): none outlives its run, none meets the next one."""
    me = os.getpid()
    for _ in range(100):
        below = _process._descendants(me)
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        # A killed orphan is ours to reap (we are its subreaper); its children come to us next.
        for pid, (parent, _session) in below.items():
            if parent == me:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        if not below:
            break
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
