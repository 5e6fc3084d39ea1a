"""The warm server's side of :mod:`trysquare._warm`: the process that imports a validator once
and forks one child per run, each set up as the cold path sets up its process.

It is a module of its own so that the server imports as little of trysquare as it can
before the validator's own imports (what its boot line names), and so that the runner's
side, which never runs here, stays apart from it.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from trysquare import _process
from trysquare._warm import _main_block_calls_cli

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
            # Both answers are formatted by hand, not by json: after a fork every page the server
            # writes is copied first, and the encoder's machinery is many pages away.
            channel.sendall(b'{"started": %d}\n' % pid)
            _, status = os.waitpid(pid, 0)
            _end_leftovers()
            channel.sendall(b'{"exited": %d}\n' % os.waitstatus_to_exitcode(status))


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
    sandbox = Sandbox(writable, shared_memory=request.get("shared_memory") is True)
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
    from trysquare.sandbox import forget_fixed_paths

    forget_fixed_paths()  # the server's descriptors of the devices its rulesets grant
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
    _take_environment(environment)
    argv = [str(word) for word in request["argv"]]  # type: ignore[attr-defined]
    sys.argv = argv
    if "random" in sys.modules:
        sys.modules["random"].seed()  # as a fresh interpreter would: not the server's sequence
    for fd, text in zip((1, 2), printed, strict=True):
        if text:
            os.write(fd, text)
    return _call_cli(function)


def _take_environment(wanted: Mapping[str, str]) -> None:
    """Make this process's environment ``wanted``, in ``wanted``'s order (the order a cold
    run's ``execve`` hands it, which a validator printing it or starting a process shows).

    The run's environment is the server's plus a few names (``TMPDIR``, the run's token, the
    task's own): when the server's names are the first of ``wanted``'s, in order, only the
    values that differ are set and the new names added — setting every name again cost a
    fresh child more than the validator it then ran. Otherwise all of it is set afresh.
    """
    present = list(os.environ)
    if present == list(wanted)[: len(present)]:
        for name, value in wanted.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
        return
    os.environ.clear()
    os.environ.update(wanted)


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
