"""Where the kernel allows it, validators and the suite can write only where they are told.

On Linux with Landlock (ABI >= 1) a child started through
:func:`trysquare._process.run_process` with a :class:`Sandbox` can write only
beneath its own scratch folder, the archive folder trysquare hands it, and
``/dev`` (``/dev/null``, ttys, ``/dev/shm``): the measured clone, its ``.git``,
the run folder and the etalon cache stay readable and executable but a write
there fails at the write (``EACCES``). The restriction is inherited by every
process the child starts, and cannot be lifted by it.

Everything that can fail or allocate is done in the parent (the ruleset is
built and its file descriptor opened there); the forked child only makes two
system calls through ctypes functions resolved beforehand, so a threaded parent
cannot deadlock the child.

Elsewhere (no Landlock, another OS, or ``TRYSQUARE_SANDBOX=off``, a switch for
tests and debugging) nothing is prevented and trysquare relies on detection
(:mod:`trysquare.guard`). :func:`protection_line` says which is in force.
Dependency-free: :mod:`trysquare._process` imports it.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["SWITCH", "Sandbox", "landlock_abi", "protection_line", "sandbox_enabled", "switched_off"]

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
    _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG
    | _MAKE_SOCK | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM
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
            ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
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
            f"their scratch and archive folders; {detection}"
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

    def prepare(self) -> tuple[Callable[[], None] | None, Callable[[], None]]:
        """``(preexec, release)``: the function the forked child calls before exec (None
        when confinement is off here), and what the parent calls once the child started.

        Raises ``OSError`` when Landlock is there but the ruleset cannot be built: a
        child that was meant to be confined is never started unconfined.
        """
        if not sandbox_enabled():
            return None, lambda: None
        import ctypes

        abi = landlock_abi()
        handled = _WRITES_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
        libc = _libc()
        assert libc is not None
        syscall = libc.syscall  # type: ignore[attr-defined]
        syscall.restype = ctypes.c_long
        prctl = libc.prctl  # type: ignore[attr-defined]
        prctl.restype = ctypes.c_int

        class _RulesetAttr(ctypes.Structure):
            _fields_ = [("handled_access_fs", ctypes.c_uint64)]

        class _PathBeneath(ctypes.Structure):
            _pack_ = 1  # the kernel's struct is packed: 12 bytes
            _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

        attr = _RulesetAttr(handled)
        ruleset = syscall(
            ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
            ctypes.c_uint32(0),
        )
        if ruleset < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"Landlock ruleset: {os.strerror(err)}")
        fd = int(ruleset)
        try:
            for folder in (*self.writable, Path("/dev")):
                try:
                    parent = os.open(folder, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
                except FileNotFoundError:
                    continue
                try:
                    rule = _PathBeneath(handled, parent)
                    if syscall(
                        ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0),
                    ) < 0:
                        err = ctypes.get_errno()
                        raise OSError(err, f"Landlock rule for {folder}: {os.strerror(err)}")
                finally:
                    os.close(parent)
        except BaseException:
            os.close(fd)
            raise
        # Everything the child needs exists before the fork: the arguments are
        # plain C values, the functions resolved. The child only makes syscalls.
        no_new_privs = (ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0),
                        ctypes.c_ulong(0), ctypes.c_ulong(0))
        restrict = (ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0))

        def preexec() -> None:
            if prctl(*no_new_privs) != 0 or syscall(*restrict) != 0:
                os._exit(126)  # never run a child meant to be confined unconfined

        def release() -> None:
            os.close(fd)

        return preexec, release
