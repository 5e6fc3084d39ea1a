"""Where the kernel allows it, validators and the suite can write only where they are told.

On Linux with Landlock (ABI >= 1) a child started through
:func:`trysquare._process.run_process` with a :class:`Sandbox` can write only
beneath its own scratch folder, the archive folder trysquare hands it, and
``/dev`` (``/dev/null``, ttys, ``/dev/shm``): the measured clone, its ``.git``,
the run folder and the etalon cache stay readable and executable but a write
there fails at the write (``EACCES``). The restriction is inherited by every
process the child starts, and cannot be lifted by it.

Landlock confines a thread and everything it starts: the child is started from
a short-lived thread that confined itself first (:meth:`Sandbox.start`), so
trysquare's own threads stay free, the child is started the ordinary way (vfork
and exec, nothing run between them), and a threaded parent cannot deadlock it.

Elsewhere (no Landlock, another OS, or ``TRYSQUARE_SANDBOX=off``, a switch for
tests and debugging) nothing is prevented and trysquare relies on detection
(:mod:`trysquare.clone_guard`, :mod:`trysquare.result_guard`). :func:`protection_line` says
which is in force.
Dependency-free: :mod:`trysquare._process` imports it.
"""

from __future__ import annotations

import _thread
import errno
import os
import platform
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = [
    "SWITCH",
    "Sandbox",
    "landlock_abi",
    "protection_line",
    "sandbox_enabled",
    "switched_off",
]

# The test and debugging switch: TRYSQUARE_SANDBOX=off runs children unconfined,
# so that detection alone can be shown to hold.
SWITCH = "TRYSQUARE_SANDBOX"

# <linux/landlock.h>; the syscall numbers are the same on every architecture
# that uses the generic table (x86_64, aarch64, riscv64, ...).
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE = 1 << 1
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3

# Only writes are handled: reading and executing anything stays allowed (a
# validator reads the clone, runs interpreters, imports packages).
_WRITES_V1 = (
    _WRITE_FILE
    | _REMOVE_DIR
    | _REMOVE_FILE
    | _MAKE_CHAR
    | _MAKE_DIR
    | _MAKE_REG
    | _MAKE_SOCK
    | _MAKE_FIFO
    | _MAKE_BLOCK
    | _MAKE_SYM
)

_abi_cache: list[int] = []


def _libc() -> object | None:
    if sys.platform != "linux":
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers, 0 when it offers none (or not Linux)."""
    if _abi_cache:
        return _abi_cache[0]
    abi = 0
    libc = _libc()
    if libc is not None and platform.machine() in _GENERIC_SYSCALL_MACHINES:
        import ctypes

        syscall = libc.syscall  # type: ignore[attr-defined]
        syscall.restype = ctypes.c_long
        answer = syscall(
            ctypes.c_long(_SYS_CREATE_RULESET),
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(_CREATE_RULESET_VERSION),
        )
        abi = max(int(answer), 0)
    _abi_cache.append(abi)
    return abi


_GENERIC_SYSCALL_MACHINES = frozenset({"x86_64", "aarch64", "arm64", "riscv64", "loongarch64"})


def switched_off() -> bool:
    """``TRYSQUARE_SANDBOX=off``: no prevention at all (no Landlock, strays not ended), for
    tests and debugging — what detection alone catches can then be shown."""
    return os.environ.get(SWITCH, "").strip().lower() in {"off", "0", "no", "false"}


def sandbox_enabled() -> bool:
    """Whether children will be confined: Landlock is there and not switched off."""
    return not switched_off() and landlock_abi() >= 1


def protection_line() -> str:
    """One line: which protection of the measured clone is in force on this machine."""
    detection = "the clone and its .git are also checked before and after every validation"
    if sandbox_enabled():
        return (
            f"protection: Landlock (ABI {landlock_abi()}) — validators and the suite can write only "
            f"their scratch and archive folders, and nothing they start outlives them; {detection}"
        )
    if landlock_abi() >= 1:
        why = f"{SWITCH}=off"
    elif sys.platform == "linux":
        why = "this kernel offers no Landlock"
    else:
        why = f"no Landlock on {sys.platform}"
    return f"protection: detection only ({why}) — {detection}, a stray write makes the run invalid"


class Sandbox:
    """The folders a confined child may write beneath; everything else is read-only to it."""

    __slots__ = ("writable",)

    def __init__(self, writable: Sequence[Path | str]) -> None:
        self.writable = tuple(Path(p) for p in writable)

    def __repr__(self) -> str:
        return f"Sandbox(writable={[str(p) for p in self.writable]!r})"

    def start(self, spawn: Callable[[], T]) -> T:
        """Call ``spawn`` (which starts the child) so that the child is confined.

        Landlock confines a thread and what it starts: ``spawn`` runs in a fresh
        thread that confines itself first and ends after the start, so trysquare's
        own threads stay unconfined and the child is started the ordinary way
        (vfork and exec: no Python code runs between fork and exec, so a threaded
        parent cannot deadlock the child). Where confinement is off here,
        ``spawn`` is simply called.

        Raises ``OSError`` when Landlock is there but the ruleset cannot be built or
        applied: a child meant to be confined is never started unconfined.
        """
        if not sandbox_enabled():
            return spawn()
        fd = self._ruleset()
        outcome: list[Any] = []
        # A bare thread, not a threading.Thread: a quarter of the cost, and it lives
        # only while the caller waits for it.
        finished = _thread.allocate_lock()
        finished.acquire()

        def confined() -> None:
            try:
                _restrict_this_thread(fd)
                outcome.append((True, spawn()))
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                outcome.append((False, error))
            finally:
                finished.release()

        try:
            _thread.start_new_thread(confined, ())
            finished.acquire()
        finally:
            _close(fd)
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    def _ruleset(self) -> int:
        """A Landlock ruleset allowing writes beneath ``writable`` and /dev only; its fd."""
        import ctypes

        abi = landlock_abi()
        handled = _WRITES_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
        syscall = _functions()[0]
        ruleset_attr, path_beneath = _structures()
        attr = ruleset_attr(handled)
        ruleset = syscall(
            ctypes.c_long(_SYS_CREATE_RULESET),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
            ctypes.c_uint32(0),
        )
        if ruleset < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"Landlock ruleset: {os.strerror(err)}")
        fd = int(ruleset)
        try:
            for folder in (*self.writable, Path("/dev")):
                parent = _open_path(os.fsencode(folder))
                if parent < 0:
                    err = ctypes.get_errno()
                    if err == errno.ENOENT:
                        continue
                    raise OSError(err, os.strerror(err), str(folder))
                try:
                    rule = path_beneath(handled, parent)
                    if (
                        syscall(
                            ctypes.c_long(_SYS_ADD_RULE),
                            ctypes.c_int(fd),
                            ctypes.c_int(_RULE_PATH_BENEATH),
                            ctypes.byref(rule),
                            ctypes.c_uint32(0),
                        )
                        < 0
                    ):
                        err = ctypes.get_errno()
                        raise OSError(err, f"Landlock rule for {folder}: {os.strerror(err)}")
                finally:
                    _close(parent)
        except BaseException:
            os.close(fd)
            raise
        return fd


def _restrict_this_thread(fd: int) -> None:
    """Confine the calling thread (and all it starts) to the ruleset ``fd``, for good."""
    import ctypes

    syscall, prctl = _functions()
    # Landlock requires no_new_privs (a confined process cannot gain privileges by exec).
    if (
        prctl(
            ctypes.c_int(_PR_SET_NO_NEW_PRIVS),
            ctypes.c_ulong(1),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )
        != 0
    ):
        err = ctypes.get_errno()
        raise OSError(err, f"no_new_privs: {os.strerror(err)}")
    if syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"Landlock restrict_self: {os.strerror(err)}")


_resolved: list[tuple[Any, Any]] = []
_held: list[tuple[Any, Any]] = []


def _functions() -> tuple[Any, Any]:
    """libc's ``syscall`` and ``prctl``, resolved once, called with the GIL held (see
    :func:`_gil_held_libc`)."""
    if not _resolved:
        import ctypes

        libc = _gil_held_libc()
        syscall = libc.syscall
        syscall.restype = ctypes.c_long
        prctl = libc.prctl
        prctl.restype = ctypes.c_int
        _resolved.append((syscall, prctl))
    return _resolved[0]


def _gil_held_libc() -> Any:
    """libc, its functions called without letting the GIL go (``ctypes.PyDLL``).

    Every call that lets the GIL go costs the calling thread up to a switch interval (5 ms)
    to get it back whenever another thread is computing (the runner's main thread writing
    results): confining one start took a dozen such calls, each a few microseconds in the
    kernel. The calls made here (Landlock's, ``prctl``, ``open`` of a folder as a path,
    ``close``) never block, so holding the GIL across them costs nothing.
    """
    import ctypes

    return ctypes.PyDLL(None, use_errno=True)


def _path_functions() -> tuple[Any, Any]:
    """libc's ``open`` and ``close``, resolved once, called with the GIL held."""
    if not _held:
        import ctypes

        libc = _gil_held_libc()
        opener = libc.open
        opener.restype = ctypes.c_int
        opener.argtypes = [ctypes.c_char_p, ctypes.c_int]
        closer = libc.close
        closer.restype = ctypes.c_int
        closer.argtypes = [ctypes.c_int]
        _held.append((opener, closer))
    return _held[0]


def _open_path(folder: bytes) -> int:
    """An ``O_PATH`` descriptor of the folder ``folder`` (never through a final link it is
    not: ``O_DIRECTORY``), or -1 with ``errno`` set."""
    opener = _path_functions()[0]
    return int(opener(folder, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY))


def _close(fd: int) -> None:
    _path_functions()[1](fd)


_structs: list[tuple[Any, Any]] = []


def _structures() -> tuple[Any, Any]:
    """The kernel's two argument structures, built on first use (importing stays cheap)."""
    if _structs:
        return _structs[0]
    import ctypes

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1  # the kernel's struct is packed: 12 bytes
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    _structs.append((RulesetAttr, PathBeneath))
    return _structs[0]
