"""Running one child process the way validation needs it, in one place.

Used by the script mode and by ``run.tests()``: the child gets its own process
group (so a timeout kills grandchildren too), its output is capped (a runaway
child cannot exhaust memory), and a grandchild that keeps the pipes open after
the child exited cannot hang the caller. With ``sandbox=`` the child is confined
(:mod:`trysquare.sandbox`) and nothing it started outlives the call, even a
grandchild that left its process group and session (see :func:`_end_strays`).
Dependency-free: ``trysquare.assay`` imports it. (It is over 600 lines because starting a
child, watching it and hunting what it left share one lock and one table of live groups.)
"""

from __future__ import annotations

import errno
import itertools
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trysquare import _capped_output, _start_first
from trysquare._capped_output import DEFAULT_CAP, TAIL_CHARS, TAIL_LINES
from trysquare.errors import IsolationUnavailable
from trysquare.sandbox import Sandbox, make_spare_ruleset, switched_off

if TYPE_CHECKING:
    from trysquare.jail import JailIds, JailPolicy

__all__ = [
    "DEFAULT_CAP",
    "TAIL_CHARS",
    "TAIL_LINES",
    "ProcessResult",
    "interrupt",
    "interrupted",
    "kill_all",
    "run_process",
]

# How long a grandchild may keep the pipes open after the child itself exited.
LINGER_SECONDS = 1.0
# How often a child whose pipes are open is asked whether it exited.
POLL_SECONDS = 0.05

# Process groups started here and still alive: an interrupted runner ends them.
_live_groups: set[int] = set()
# Per thread, when asked for (owned_groups): the groups this thread's calls started, so
# a cluster worker stopped mid-task kills that task's validator and nothing else.
_owned = threading.local()


@contextmanager
def owned_groups() -> Iterator[set[int]]:
    """The live process groups :func:`run_process` starts in this thread, while inside."""
    previous = getattr(_owned, "groups", None)
    groups: set[int] = set()
    _owned.groups = groups
    try:
        yield groups
    finally:
        _owned.groups = previous


def kill_groups(groups: Iterable[int]) -> None:
    """Kill each of these process groups (SIGKILL); one already gone is no error."""
    for pgid in list(groups):
        _kill_group(pgid)


class ProcessResult:
    """What became of one child process."""

    __slots__ = ("argv", "duration", "returncode", "stderr", "stdout", "timed_out", "truncated")

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int | None,
        stdout: bytes,
        stderr: bytes,
        timed_out: bool,
        truncated: bool,
        duration: float,
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode  # None when it was killed for its timeout
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        self.truncated = truncated  # some output beyond the cap was dropped
        self.duration = duration

    def __repr__(self) -> str:
        return (
            f"ProcessResult(argv={self.argv!r}, returncode={self.returncode!r}, "
            f"timed_out={self.timed_out!r}, truncated={self.truncated!r})"
        )


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """Kill every process group this process started and has not reaped yet."""
    for pgid in list(_live_groups):
        _kill_group(pgid)


# Set when SIGINT/SIGTERM asked the command to stop: what waits on something other than a
# child (a judge's request on the network) looks at it and gives up.
_interrupted = threading.Event()


def interrupt(asked: bool = True) -> None:
    """Say that the user asked to stop (``asked``; kills every child too) or that a new
    command starts (``asked=False``)."""
    if not asked:
        _interrupted.clear()
        return
    _interrupted.set()
    kill_all()


def interrupted() -> bool:
    """Whether the user asked the running command to stop (SIGINT/SIGTERM)."""
    return _interrupted.is_set()


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    timeout: float | None,
    env: Mapping[str, str] | None = None,
    cap: int = DEFAULT_CAP,
    sandbox: Sandbox | None = None,
    jail: JailPolicy | None = None,
    guarded: Sequence[str | Path] = (),
    jail_ids: JailIds | None = None,
    shown_as: str | None = None,
) -> ProcessResult:
    """Run ``argv`` (no shell) in ``cwd`` and collect its output.

    With ``sandbox``, the child can write only beneath ``sandbox.writable`` where
    the kernel allows it (Landlock), and every process it started — also one that
    left its session — is killed when the call returns (Linux).

    With ``jail`` (the agent's code) and a ``sandbox`` naming its writable folders,
    the child runs in the jail (:mod:`trysquare.jail`): its own namespaces, only
    ``sandbox.writable`` writable, ``guarded`` folders never shown. Where the jail
    cannot start it falls back to ``sandbox``, unless the policy requires the jail:
    then :class:`~trysquare.jail.IsolationUnavailable` is raised and nothing runs.
    ``jail_ids``: the user the caller already handed ``sandbox.writable`` over to (steps of
    one :func:`run_steps` share one, so what ``prepare`` made is not handed over again).
    ``shown_as``: the jail shows ``sandbox``'s one writable folder at this path instead of its
    own (a copy of a prepared tree, where ``prepare`` built it); only in the jail.

    Raises ``OSError`` when the program cannot be started at all; every other
    outcome (exit code, timeout, signal) is reported in the result.
    """
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    token = None
    jailed = False
    if jail is not None:
        from trysquare.jail import (  # only when jailing
            availability,
            hand_over,
            jail_environment,
            jailed_command,
            new_jail_ids,
        )

        if sandbox is None:
            raise ValueError("a jailed command needs the folders it may write (sandbox=)")
        if availability().available:
            program = _program_path(argv, cwd, env)
            ids = jail_ids
            if ids is None:  # as root: a user of its own, for this command alone
                ids = new_jail_ids()
                hand_over([str(p) for p in sandbox.writable], ids)
            writable = [str(p) for p in sandbox.writable]
            inside = str(cwd)
            moved: dict[str, str] = {}
            if shown_as is not None:
                if len(writable) != 1:
                    raise ValueError("shown_as= moves the one writable folder; there are several")
                moved = {writable[0]: shown_as}
                inside = os.path.join(shown_as, os.path.relpath(str(cwd), writable[0]))
            argv = jailed_command(
                argv,
                cwd=inside,
                writable=writable,
                policy=jail,
                shown_as=moved,
                guarded=[str(p) for p in guarded],
                # The command's own files (the scenario's: a script it names by path).
                programs=[
                    program,
                    *(w for w in argv[1:] if os.path.isabs(w) and os.path.isfile(w)),
                ],
                ids=ids,
            )
            env = jail_environment(os.environ if env is None else env)
            jailed = True
            # bwrap cannot build its mounts under Landlock; the jail confines more, and its
            # PID namespace ends whatever the command left (no stray hunt needed).
            sandbox = None
        elif jail.must_jail:
            raise IsolationUnavailable(
                f"the jail is required and cannot start here ({availability().reason})"
            )
        elif shown_as is not None:
            raise IsolationUnavailable(
                f"a prepared tree is shown at its own path only in the jail ({availability().reason})"
            )
    if sandbox is not None and sys.platform == "linux" and not switched_off():
        _become_subreaper()
        token = f"{os.getpid()}.{next(_tokens)}"
        env = {**(os.environ if env is None else env), _TOKEN_VAR: token}
    # Held while a child is being started: until it is in _live_groups, another
    # thread's _end_strays would take the new session leader for a stray.
    _spawning.acquire()

    # The pipes are made here and read with bare reads: pipes Popen makes are wrapped in file
    # objects (three system calls each, every one letting the GIL go) that nothing here uses.
    out_fd, out_write = os.pipe()
    err_fd, err_write = os.pipe()

    def spawn() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=_devnull(),
            stdout=out_write,
            stderr=err_write,
            start_new_session=True,
        )

    try:
        try:
            proc = spawn() if sandbox is None else sandbox.start(spawn)
        except BaseException:
            os.close(out_fd)
            os.close(err_fd)
            raise
        finally:
            os.close(out_write)
            os.close(err_write)
        _live_groups.add(proc.pid)
        owned = getattr(_owned, "groups", None)
        if owned is not None:
            owned.add(proc.pid)
    finally:
        _spawning.release()
        _start_first.child_started()
    if token is not None:
        # While the child runs, not between two starts: the next confined start's device rules.
        make_spare_ruleset()
    output = _capped_output.CappedOutput((out_fd, err_fd), cap)
    timed_out = False
    exited_at: float | None = None
    # Readable once the child has exited (Linux 5.3 on): its exit wakes the wait for output
    # at once, instead of being asked for now and then and slept for after the pipes close.
    exit_fd = _pidfd(proc.pid)
    try:
        # poll(2), not epoll: nothing to create, register or close for two pipes.
        watcher = select.poll()
        for fd in (out_fd, err_fd):
            watcher.register(fd, select.POLLIN)
        if exit_fd >= 0:
            watcher.register(exit_fd, select.POLLIN)
        open_fds = {out_fd, err_fd}
        spoke = True  # the last look found output (none yet: no need to ask)
        asked_at = start
        while open_fds:
            now = time.monotonic()
            # Whether the child exited is asked when its pipes were quiet, or every
            # POLL_SECONDS while they speak: each waitpid lets the GIL go (which costs a
            # switch interval while another thread computes), and a child that printed
            # its verdict usually closes both pipes by exiting. (Told by its pidfd where
            # there is one.)
            if exited_at is None and exit_fd < 0 and (not spoke or now - asked_at >= POLL_SECONDS):
                asked_at = now
                if proc.poll() is not None:
                    exited_at = now
            if exited_at is not None and now - exited_at > LINGER_SECONDS:
                break  # a grandchild holds the pipes; the group is killed below
            if deadline is not None and now >= deadline:
                timed_out = True
                break
            wait = POLL_SECONDS if exited_at is None else LINGER_SECONDS
            if deadline is not None:
                wait = min(wait, deadline - now)
            ready = watcher.poll(max(wait, 0.0) * 1000)
            spoke = bool(ready)
            for fd, _ in ready:
                if fd == exit_fd:
                    watcher.unregister(exit_fd)
                    proc.poll()  # reaped now: it has exited
                    exited_at = now
                elif not output.read(fd):
                    watcher.unregister(fd)
                    open_fds.discard(fd)
        if not timed_out:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if exit_fd >= 0 and exited_at is None:
                # The pipes closed first (the child is exiting, or went on without them):
                # waited on its pidfd, not by waitpid and sleeps of a growing length.
                timed_out = not _exited_within(exit_fd, remaining)
            else:
                try:
                    proc.wait(timeout=remaining)
                except subprocess.TimeoutExpired:
                    timed_out = True
    finally:
        if exit_fd >= 0:
            os.close(exit_fd)
        # Whatever happened, nothing of this child's group outlives the call. A jail's own init
        # (bubblewrap's inner process, in a session of its own) dies after the group by some
        # milliseconds, and the agent's processes with it: held before the kill and waited for
        # after, so that nothing of the agent's runs while the caller acts on its folders
        # (removes or copies them, as root).
        # Only while bubblewrap is not reaped: its pid is its own until then, never reused.
        inits = _jail_inits(proc.pid) if jailed and proc.returncode is None else []
        _kill_group(proc.pid)
        proc.wait()
        _end_jail_inits(inits)
        _live_groups.discard(proc.pid)
        if owned is not None:
            owned.discard(proc.pid)
        if token is not None:
            _end_strays(proc.pid, token)
        os.close(out_fd)
        os.close(err_fd)
        # Nothing of this child is left: a worker is between children from here on.
        _start_first.child_exited()
    return ProcessResult(
        argv,
        None if timed_out else proc.returncode,
        output.kept(out_fd),
        output.kept(err_fd),
        timed_out,
        output.truncated,
        time.monotonic() - start,
    )


def _jail_inits(pid: int) -> list[int]:
    """A pidfd of each child of the still running bubblewrap ``pid``: the jail's init (none
    once bubblewrap has ended, which it does only after its init)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as listing:
            children = [int(word) for word in listing.read().split()]
    except (OSError, ValueError):
        return []
    held = [_pidfd(child) for child in children]
    return [fd for fd in held if fd >= 0]


def _end_jail_inits(inits: list[int], seconds: float = 10.0) -> None:
    """Kill each jail init (a pidfd) and wait until it has exited: its PID namespace, the
    agent's processes, has ended by then (the kernel ends them before their init)."""
    for fd in inits:
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass  # gone already
        _exited_within(fd, seconds)
        try:
            os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG)  # ours where we are a subreaper
        except (ChildProcessError, OSError):
            pass
        os.close(fd)


def _pidfd(pid: int) -> int:
    """A descriptor that becomes readable when the child ``pid`` exits; -1 where the kernel
    (or Python) offers none, and the child is then asked with waitpid."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return -1
    try:
        return int(opener(pid))
    except OSError:
        return -1


def _exited_within(exit_fd: int, seconds: float | None) -> bool:
    """Whether the child whose pidfd is ``exit_fd`` exits within ``seconds`` (None: waits)."""
    watcher = select.poll()
    watcher.register(exit_fd, select.POLLIN)
    # Interrupted by a signal, poll is called again for what is left of the time (PEP 475).
    return bool(watcher.poll(None if seconds is None else seconds * 1000))


_devnull_fd: list[int] = []


def _devnull() -> int:
    """``/dev/null``, opened once (not inherited): every child's standard input."""
    if not _devnull_fd:
        with _devnull_lock:
            if not _devnull_fd:
                _devnull_fd.append(os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC))
    return _devnull_fd[0]


_devnull_lock = threading.Lock()


def _program_path(argv: Sequence[str], cwd: Path | str, env: Mapping[str, str] | None) -> str:
    """The file ``argv[0]`` names, found as starting it directly would; the ``OSError`` that
    would raise otherwise — before it goes in the jail, where a missing program would only
    be an exit 127 from inside."""
    if not argv:
        raise ValueError("an empty command")
    program = argv[0]
    if "/" in program:
        found = os.path.join(cwd, program)
        if not os.path.exists(found):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        return os.path.abspath(found)
    import shutil

    search = (os.environ if env is None else env).get("PATH", os.defpath)
    located = shutil.which(program, path=search)
    if located is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    return os.path.abspath(located)


# --- nothing a confined child started outlives it (Linux) -------------------------------

# Set in every confined child's environment; a grandchild that left the session
# (setsid, a double fork) is still recognised by it.
_TOKEN_VAR = "TRYSQUARE_VALIDATION"
_tokens = itertools.count(1)
_PR_SET_CHILD_SUBREAPER = 36
_subreaper: list[bool] = []
_spawning = threading.Lock()


def _become_subreaper() -> None:
    """Orphans of our children come to us, not to init: so they can be found and ended."""
    if _subreaper:
        return
    _subreaper.append(False)
    try:
        import ctypes

        answer = ctypes.CDLL(None, use_errno=True).prctl(
            _PR_SET_CHILD_SUBREAPER,
            ctypes.c_ulong(1),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )
        _subreaper[0] = answer == 0
    except (OSError, AttributeError):
        pass  # then an orphan goes to init; the session and token still find it


# <linux/wait.h>: children of every kind, also one cloned to end with no signal to its parent
# (the kernel gives an adopted orphan the ordinary signal again; asked for all the same).
_WALL = 0x40000000


def _childless() -> bool:
    """Whether this process has no child at all — running, stopped or not yet reaped, of any
    kind — as one ``waitid`` says (nothing is reaped). As the subreaper of our children's
    orphans, a process with no child has no descendant left anywhere."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT | _WALL)
    except ChildProcessError:
        return True
    except OSError:
        return False
    return False


def _processes() -> dict[int, tuple[int, int]]:
    """Every visible process: pid -> (parent pid, session id), from /proc."""
    table: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        try:
            table[int(name)] = (int(fields[1]), int(fields[3]))
        except (IndexError, ValueError):
            continue
    return table


def _read_proc(path: str) -> bytes | None:
    """A small /proc file's whole text (a thread's children, a process's stat), or None.

    Runs for every thread of trysquare after every confined validation, so it is read with
    bare system calls that keep the GIL (:func:`trysquare.sandbox._gil_held_libc`): letting
    it go for each of them cost the worker a switch interval apiece while another thread
    computed. Reading these files never blocks.
    """
    import ctypes

    opener, closer, reader = _proc_functions()
    fd = opener(os.fsencode(path), os.O_RDONLY | os.O_CLOEXEC)
    if fd < 0:
        return None
    try:
        buffer = ctypes.create_string_buffer(_PROC_CHUNK)
        parts: list[bytes] = []
        while True:
            count = reader(fd, buffer, _PROC_CHUNK)
            if count < 0:
                return None
            if count == 0:
                return b"".join(parts)
            parts.append(buffer.raw[:count])
    finally:
        closer(fd)


_PROC_CHUNK = 1 << 13
_proc_calls: list[tuple[Any, Any, Any]] = []


def _proc_functions() -> tuple[Any, Any, Any]:
    """libc's ``open``, ``close`` and ``read``, called with the GIL held."""
    if not _proc_calls:
        import ctypes

        from trysquare.sandbox import _gil_held_libc, _path_functions

        opener, closer = _path_functions()
        reader = _gil_held_libc().read
        reader.restype = ctypes.c_ssize_t
        reader.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        _proc_calls.append((opener, closer, reader))
    return _proc_calls[0]


_children_files: list[bool] = []


def _has_children_files() -> bool:
    """Whether this kernel lists a thread's children (``/proc/<pid>/task/<tid>/children``)."""
    if not _children_files:
        _children_files.append(
            os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")
        )
    return _children_files[0]


def _descendants(me: int, passed_over: Collection[int] = ()) -> dict[int, tuple[int, int]]:
    """Our descendants only: pid -> (parent pid, session id), following each thread's children.

    Every stray is a descendant of ours (we are the subreaper of our children's
    orphans), so the table :func:`_find_strays` needs is this, not all of /proc:
    reading every process on a busy machine cost more than the trivial validator
    it followed. A child of ours in ``passed_over`` is left out with all below it.
    """
    table: dict[int, tuple[int, int]] = {}
    todo = [me]
    while todo:
        parent = todo.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in threads:
            for field in (_read_proc(f"/proc/{parent}/task/{tid}/children") or b"").split():
                pid = int(field)
                if pid in table or (parent == me and pid in passed_over):
                    continue
                stat = _read_proc(f"/proc/{pid}/stat")
                if stat is None:
                    continue  # gone already
                fields = stat[stat.rfind(b")") + 2 :].split()
                try:
                    table[pid] = (int(fields[1]), int(fields[3]))
                except (IndexError, ValueError):
                    continue
                todo.append(pid)
    return table


def _carries(pid: int, token: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return f"{_TOKEN_VAR}={token}".encode() in handle.read().split(b"\0")
    except OSError:
        return False


def _end_strays(leader: int, token: str) -> None:
    """Kill what the finished child ``leader`` left running: our descendants in its
    session or carrying its token, and adopted orphans that left every session of
    ours (with concurrent children, such an orphan cannot be told apart, and is
    ended by whichever call ends first). Repeated until none is left, since a stray
    may fork while it is being killed; adopted ones are reaped.
    """
    if _subreaper and _subreaper[0] and _childless():
        return  # no child of ours at all: nothing it started can be running anywhere
    me = os.getpid()
    my_session = os.getsid(0)
    for _ in range(20):
        with _spawning:  # no child is half-started while we look
            strays, table = _find_strays(me, my_session, leader, token)
            for pid in strays:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if not strays:
            return
        for pid in strays:
            if table[pid][0] == me:
                try:
                    os.waitpid(pid, 0)
                except (ChildProcessError, OSError):
                    pass


def _find_strays(
    me: int, my_session: int, leader: int, token: str
) -> tuple[list[int], dict[int, tuple[int, int]]]:
    """Our descendants that are strays of ``leader``, and the process table they came from.

    Another validator still running (a leader in ``_live_groups``, ``leader`` itself reaped
    and gone from it) and all below it are not looked at: orphans go up to the nearest
    subreaper among their ancestors, and the other validator is no ancestor of anything
    ``leader`` started, so nothing of ``leader``'s can be below it; whatever it left is
    ended as its own call returns. At two jobs and more that is most of the table.
    """
    if _has_children_files():
        table = _descendants(me, passed_over=frozenset(_live_groups))
    else:
        table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _sid) in table.items():
        children.setdefault(ppid, []).append(pid)
    strays = []
    todo = [(pid, False) for pid in children.get(me, ())]
    while todo:
        pid, detached = todo.pop()
        ppid, sid = table[pid]
        if ppid == me and pid not in _live_groups and sid not in _live_groups and sid != my_session:
            # Adopted (we are its subreaper) and in no session of ours: a grandchild
            # that detached itself (setsid, double fork), with or without its
            # environment. Our own helpers (git) share our session.
            detached = True
        todo.extend((child, detached) for child in children.get(pid, ()))
        if detached or sid == leader or _carries(pid, token):
            strays.append(pid)
    return strays, table


def tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last ``lines`` lines of ``text``, at most ``chars`` characters."""
    kept = "\n".join(text.rstrip().splitlines()[-lines:])
    if len(kept) > chars:
        kept = "..." + kept[-chars:]
    return kept


def output_text(result: ProcessResult) -> str:
    """A finished child's stdout then stderr, decoded (undecodable bytes replaced)."""
    stdout = result.stdout.decode("utf-8", "replace")
    stderr = result.stderr.decode("utf-8", "replace")
    return stdout + ("\n" if stdout and stderr else "") + stderr


class Steps:
    """What became of steps run in turn under one deadline (:func:`run_steps`)."""

    __slots__ = ("last", "problem", "transcript")

    def __init__(self, last: ProcessResult | None, problem: str | None, transcript: bytes) -> None:
        # The last step that ran: the command itself when ``problem`` is None.
        self.last = last
        # Why the command's outcome cannot be read: a step that could not start or
        # timed out, a step before the command that failed. None otherwise.
        self.problem = problem
        # Each step's "$ argv" line, its stdout, stderr and "[exit N]", in order.
        self.transcript = transcript


def _hand_over_once(jail: JailPolicy | None, sandbox: Sandbox | None) -> JailIds | None:
    """One jail user for every step of a :func:`run_steps` call, the scratch handed over once."""
    if jail is None or sandbox is None:
        return None
    from trysquare.jail import availability, hand_over, new_jail_ids

    if not availability().available:
        return None
    ids = new_jail_ids()
    hand_over([str(p) for p in sandbox.writable], ids)
    return ids


def _replaced(folder: Path | str, made: os.stat_result) -> str | None:
    """How ``folder`` is no longer the folder it was (``made``, its lstat then); or None."""
    try:
        now = os.lstat(folder)
    except OSError as error:
        return f"removed the folder it ran in ({error.strerror})"
    if not stat.S_ISDIR(now.st_mode) or (now.st_dev, now.st_ino) != (made.st_dev, made.st_ino):
        return "put something else in the place of the folder it ran in"
    return None


def run_steps(
    steps: Sequence[tuple[str, Sequence[str]]],
    *,
    cwd: Path | str,
    timeout: float,
    env: Mapping[str, str] | None = None,
    sandbox: Sandbox | None = None,
    consequence: str = "so the command did not run",
    tail_lines: int = TAIL_LINES,
    jail: JailPolicy | None = None,
    guarded: Sequence[str | Path] = (),
    shown_as: str | None = None,
) -> Steps:
    """Run ``(label, argv)`` steps in turn within one ``timeout`` for them all.

    Every step but the last (``prepare``) must exit 0; the last one (the command)
    may fail: its result is returned for the caller to read. A ``problem`` names
    the step; for a failed step it says ``consequence`` and ends with the tail of
    that step's output. ``shown_as``: see :func:`run_process`.
    """
    deadline = time.monotonic() + timeout
    transcript: list[bytes] = []
    done: ProcessResult | None = None
    ids = _hand_over_once(jail, sandbox)
    try:
        folder: os.stat_result | None = os.lstat(cwd)
    except OSError:
        folder = None  # the first step says it cannot start there
    for index, (label, argv) in enumerate(steps):
        shown = " ".join(argv)
        transcript.append(f"$ {shown}\n".encode())
        try:
            done = run_process(
                argv,
                cwd=cwd,
                timeout=max(deadline - time.monotonic(), 0.0),
                env=env,
                sandbox=sandbox,
                jail=jail,
                guarded=guarded,
                jail_ids=ids,
                shown_as=shown_as,
            )
        except IsolationUnavailable as error:
            problem = f"{label} `{shown}` was not run: {error}"
            return Steps(done, problem, b"".join(transcript))
        except OSError as error:
            problem = f"{label} `{shown}` could not start: {error.strerror or error}"
            return Steps(done, problem, b"".join(transcript))
        transcript += [done.stdout, done.stderr, f"[exit {done.returncode}]\n".encode()]
        replaced = None if folder is None else _replaced(cwd, folder)
        if replaced is not None:
            # The step may write the folder holding its own: a link put in that one's place
            # would lead whatever trysquare does there next (copy it, place hidden tests in it,
            # read a report) to a folder of the machine the agent chose.
            problem = f"{label} `{shown}` {replaced}, {consequence}"
            return Steps(done, problem, b"".join(transcript))
        if done.timed_out:
            problem = f"{label} `{shown}` did not finish within the timeout of {timeout:g} s"
            return Steps(done, problem, b"".join(transcript))
        if index < len(steps) - 1 and done.returncode != 0:
            kept = tail(output_text(done), tail_lines)
            evidence = f":\n{kept}" if kept.strip() else " (it printed nothing)"
            problem = f"{label} `{shown}` failed (exit {done.returncode}), {consequence}{evidence}"
            return Steps(done, problem, b"".join(transcript))
    return Steps(done, None, b"".join(transcript))
