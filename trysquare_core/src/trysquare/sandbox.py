"""Where the kernel allows it, validators and the suite can write only where they are told.

On Linux with Landlock (ABI >= 1) a child started through
:func:`trysquare._process.run_process` with a :class:`Sandbox` can write only
beneath its own scratch folder and the archive folder trysquare hands it, to the
character devices of :data:`DEVICES` (and the pseudo-terminals beneath
``/dev/pts``), and to ``/dev/shm`` when nothing trysquare protects lies on it
(:func:`shared_memory_refusal`): the measured clone, its ``.git``, the run folder
and the etalon cache stay readable and executable but a write there fails at the
write (``EACCES``). The restriction is inherited by every process the child
starts, and cannot be lifted by it. (It is over 600 lines because the ruleset, the ``/dev/shm``
decision it takes and the libc calls it makes holding the GIL are read and changed together.)

``/dev`` is not granted whole: ``/dev/shm`` is a world-writable tmpfs, and people keep
experiments there for speed. Landlock grants a folder with everything beneath it and cannot
tell a file a child made from one it found, so ``/dev/shm`` (which POSIX shared memory and
semaphores need: Python's ``multiprocessing`` locks, ``shared_memory``) is granted only
while no folder trysquare protects in this process — its cache, the temporary folder its
scratch folders are made in, and what :func:`protecting` names (the experiments, runs and
clones ``validate`` works on) — lies beneath it or on its file system. Otherwise it is
refused and a child's ``sem_open`` fails with ``EACCES``; ``validate`` says why, once.

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
import contextlib
import errno
import os
import platform
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = [
    "DEVICES",
    "DEVICE_FOLDERS",
    "SHARED_MEMORY",
    "SWITCH",
    "Sandbox",
    "landlock_abi",
    "look_ahead",
    "make_spare_ruleset",
    "protecting",
    "protection_line",
    "sandbox_enabled",
    "shared_memory_refusal",
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

# A confined child may open these for writing; reading any file stays allowed whatever is here.
# The data sinks and sources (a redirection to /dev/null, dd from /dev/zero, /dev/full for a
# test of a full disk), the random sources (some tools open them read-write to add entropy),
# the controlling terminal (a child has none here, but a tool may try it before falling back)
# and the pseudo-terminal multiplexer (pty.openpty, pexpect, script(1), node-pty).
DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
)
# Folders of devices, their files writable (nothing made or removed there): the other ends of
# pseudo-terminals (the kernel opens /dev/pts/N on behalf of openpty, and Landlock checks that
# open), and GPU render nodes, which CUDA, ROCm and Mesa open read-write (a validator that
# computes a metric on a GPU). NVIDIA's and AMD's device files in /dev are added when the host
# has them (:func:`_accelerators`).
DEVICE_FOLDERS = ("/dev/pts", "/dev/dri")
# POSIX shared memory and named semaphores (shm_open, sem_open: glibc makes them here, a path
# no variable can move). Granted only while nothing trysquare protects lies on it.
SHARED_MEMORY = "/dev/shm"

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
        refused = shared_memory_refusal()
        shm = "" if refused is None else f" (not {SHARED_MEMORY}: {refused})"
        return (
            f"protection: Landlock (ABI {landlock_abi()}) — validators and the suite can write only "
            f"their scratch and archive folders{shm}, and nothing they start outlives them; {detection}"
        )
    if landlock_abi() >= 1:
        why = f"{SWITCH}=off"
    elif sys.platform == "linux":
        why = "this kernel offers no Landlock"
    else:
        why = f"no Landlock on {sys.platform}"
    return f"protection: detection only ({why}) — {detection}, a stray write makes the run invalid"


class _Protected:
    """Folders named by one :func:`protecting`, and (once asked) the first of them that lies
    on ``/dev/shm``. The folders are looked at once and then let go: ``validate`` names every
    run and clone lazily, and nothing per run is kept for it."""

    __slots__ = ("folders", "found")

    def __init__(self, folders: Iterable[Path | str]) -> None:
        self.folders: Iterable[Path | str] | None = folders  # None once looked at
        self.found: str | None = None


_protected: list[_Protected] = []
_looking = _thread.allocate_lock()  # one thread walks a lazy list of folders, once
# Whether trysquare's own folders lie on /dev/shm, by the text they were named with.
_on_shared_memory: dict[str, bool] = {}
_shared_memory_identity: list[frozenset[int] | None] = []


@contextlib.contextmanager
def protecting(folders: Iterable[Path | str], /) -> Iterator[None]:
    """While in force, children confined in this process get no write to ``/dev/shm`` if one
    of ``folders`` lies beneath it or on its file system.

    ``validate`` names the experiments, their runs and clones; every task its own run folder
    and clone (so a cluster's worker knows them too). Nothing is looked at until a confined
    child starts, and then each folder once (``folders`` may be a generator: it is walked at
    most once, and not kept). Several in force at once (parallel validates, tasks) add up.
    """
    entry = _Protected(folders)
    if isinstance(folders, tuple) and _looked_ahead:
        key = tuple(os.fspath(folder) for folder in folders)
        with _looking:
            if key in _looked_ahead:
                entry.found = _looked_ahead.pop(key)
                entry.folders = None
    _protected.append(entry)
    try:
        yield
    finally:
        _protected.remove(entry)


# Folders looked at ahead (look_ahead), by their text, with the first of them found on
# /dev/shm: taken by the protecting() of the very same folders that follows. A few at most.
_looked_ahead: dict[tuple[str, ...], str | None] = {}
LOOKED_AHEAD_AT_MOST = 16


def look_ahead(folders: tuple[Path | str, ...], /) -> None:
    """Look now whether one of ``folders`` lies on ``/dev/shm``, for a :func:`protecting` of the
    same folders (as a tuple) in this process soon after: ``validate``'s task builder does it
    while a validator runs, so the next task's start does not. Nothing else is believed from
    it, and what is not taken soon is forgotten."""
    key = tuple(os.fspath(folder) for folder in folders)
    found = _first_on_shared_memory(key) if _shared_memory() is not None else None
    with _looking:
        if len(_looked_ahead) >= LOOKED_AHEAD_AT_MOST:
            _looked_ahead.clear()
        _looked_ahead[key] = found


def shared_memory_refusal() -> str | None:
    """Why confined children get no write to ``/dev/shm`` here (the protected folder found
    on it, named), or ``None`` when they do (or there is no ``/dev/shm``).

    Always protected: trysquare's cache (its signing key) and the temporary folder its
    scratch folders are made in (another validation's scratch and archive folders); and
    whatever :func:`protecting` names now.
    """
    if _shared_memory() is None:
        return None
    for folder in _always_protected():
        known = _on_shared_memory.get(folder)
        if known is None:
            known = _on_shared_memory[folder] = _lies_on_shared_memory(folder)
        if known:
            return f"{folder} lies on it"
    for entry in tuple(_protected):
        if entry.folders is not None:
            with _looking:
                if entry.folders is not None:
                    entry.found = _first_on_shared_memory(entry.folders)
                    entry.folders = None
        if entry.found is not None:
            return f"{entry.found} lies on it"
    return None


def _first_on_shared_memory(folders: Iterable[Path | str]) -> str | None:
    """The first of ``folders`` that lies on ``/dev/shm``, as text, or ``None``."""
    for folder in folders:
        text = os.fspath(folder)
        if _lies_on_shared_memory(text):
            return text
    return None


def _always_protected() -> tuple[str, ...]:
    """trysquare's cache as the cache finds it, and the temporary folder."""
    import tempfile

    cache = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(cache):
        cache = os.path.join(os.path.expanduser("~"), ".cache")
    return (os.path.join(cache, "trysquare"), tempfile.gettempdir())


def _shared_memory() -> frozenset[int] | None:
    """The file systems a write beneath ``/dev/shm`` reaches — its own and any mounted
    beneath it — once per process; ``None`` without a ``/dev/shm``."""
    if not _shared_memory_identity:
        try:
            real = os.path.realpath(SHARED_MEMORY)
            devices = {os.stat(real).st_dev}
        except OSError:
            _shared_memory_identity.append(None)
            return None
        devices.update(_mounted_beneath(real))
        _shared_memory_identity.append(frozenset(devices))
    return _shared_memory_identity[0]


def _mounted_beneath(folder: str) -> Iterator[int]:
    """The devices of the mounts beneath ``folder`` (``/proc/self/mountinfo``; none where
    there is no such file)."""
    try:
        with open("/proc/self/mountinfo", "rb") as table:
            lines = table.read().splitlines()
    except OSError:
        return
    inside = os.fsencode(folder).rstrip(b"/") + b"/"
    for line in lines:
        fields = line.split(b" ")
        if len(fields) < 5:
            continue
        # The kernel writes a space, tab, newline or backslash of a mount point in octal; a
        # backslash stands for nothing else there, so the order of these replacements is free.
        point = fields[4]
        for escaped, plain in _MOUNTINFO_ESCAPES:
            point = point.replace(escaped, plain)
        if point.startswith(inside):
            major, _, minor = fields[2].partition(b":")
            if major.isdigit() and minor.isdigit():
                yield os.makedev(int(major), int(minor))


_MOUNTINFO_ESCAPES = ((b"\\040", b" "), (b"\\011", b"\t"), (b"\\012", b"\n"), (b"\\134", b"\\"))


def _lies_on_shared_memory(folder: str) -> bool:
    """Whether a write granted beneath ``/dev/shm`` could reach ``folder``: it lies on a file
    system reachable there (``/dev/shm``'s own, so also through a link or a bind mount
    elsewhere, or one mounted beneath it). One ``stat`` of the folder, or of the nearest
    folder above it that exists (where it would be made)."""
    devices = _shared_memory()
    answer = False
    probe = os.path.abspath(folder)
    while devices is not None:
        try:
            answer = os.stat(probe).st_dev in devices
            break
        except OSError:
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
    return answer


class Sandbox:
    """The folders a confined child may write beneath; everything else is read-only to it.

    ``shared_memory``: whether the child may make and write POSIX shared memory and
    semaphores in ``/dev/shm``; by default, when :func:`shared_memory_refusal` finds nothing
    protected there at the start.
    """

    __slots__ = ("shared_memory", "writable")

    def __init__(
        self, writable: Sequence[Path | str], *, shared_memory: bool | None = None
    ) -> None:
        self.writable = tuple(Path(p) for p in writable)
        self.shared_memory = shared_memory

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
        """A Landlock ruleset allowing writes beneath ``writable``, to the devices and (when
        granted) in ``/dev/shm`` only; its fd. The devices' part is one made ahead
        (:func:`make_spare_ruleset`) when there is one."""
        import ctypes

        abi = landlock_abi()
        handled = _handled(abi)
        shared_memory = self.shared_memory
        if shared_memory is None:
            shared_memory = shared_memory_refusal() is None
        fixed = _fixed_paths()
        fd = _spare_ruleset(fixed)
        if fd < 0:
            fd = _device_ruleset(abi, fixed)
        try:
            # A folder's rule covers all beneath it. The child's own folders are opened for
            # this ruleset alone; the devices are opened once (_fixed_paths).
            for folder in self.writable:
                parent = _open_path(os.fsencode(folder), folder=True)
                if parent < 0:
                    err = ctypes.get_errno()
                    if err in (errno.ENOENT, errno.ENOTDIR):
                        continue
                    raise OSError(err, os.strerror(err), str(folder))
                try:
                    _add_rule(fd, folder, handled, parent)
                finally:
                    _close(parent)
            if shared_memory:
                for device_path, parent in fixed:
                    if device_path == SHARED_MEMORY:
                        # Files only: what shm_open and sem_open make, fill, link into place
                        # and unlink.
                        allowed = _device_access(abi) | _MAKE_REG | _REMOVE_FILE
                        _add_rule(fd, device_path, allowed, parent)
        except BaseException:
            os.close(fd)
            raise
        return fd


def _handled(abi: int) -> int:
    """The write rights a ruleset handles on this ABI (what it does not grant is refused)."""
    return _WRITES_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)


def _device_access(abi: int) -> int:
    """What a device file or device folder is granted: writing its files, nothing made."""
    return _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0)


def _add_rule(fd: int, folder: str | Path, allowed: int, parent: int) -> None:
    """Grant ``allowed`` beneath ``parent`` (an ``O_PATH`` descriptor of ``folder``) in the
    ruleset ``fd``."""
    import ctypes

    rule = _structures()[1](allowed, parent)
    _add_rules(ctypes.c_int(fd), ((folder, ctypes.byref(rule)),))


def _add_rules(fd: Any, rules: Iterable[tuple[str | Path, Any]]) -> None:
    """Add each rule (a reference to a path-beneath structure, with the path it names) to the
    ruleset ``fd`` (a C int)."""
    import ctypes

    syscall = _functions()[0]
    _, add_rule, path_beneath, no_flags = _call_constants()
    for folder, rule in rules:
        if syscall(add_rule, fd, path_beneath, rule, no_flags) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"Landlock rule for {folder}: {os.strerror(err)}")


def _device_ruleset(abi: int, fixed: tuple[tuple[str, int], ...]) -> int:
    """A new ruleset granting the device files and folders of ``fixed`` (not ``/dev/shm``,
    decided per start) and nothing else yet; its fd."""
    import ctypes

    syscall = _functions()[0]
    attr, rules = _device_arguments(abi, fixed)
    create_ruleset, _, _, no_flags = _call_constants()
    ruleset = syscall(
        create_ruleset, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), no_flags
    )
    if ruleset < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"Landlock ruleset: {os.strerror(err)}")
    fd = int(ruleset)
    try:
        _add_rules(ctypes.c_int(fd), rules)
    except BaseException:
        os.close(fd)
        raise
    return fd


# The arguments of the device rules, built once for the descriptors of ``fixed`` they name:
# a ruleset of them is made for every confined start, and building each rule's structure again
# was half the making. Kept with the ``fixed`` they were built from (held, so never mistaken
# for another made later) and the ABI: ``(abi, fixed, (ruleset attribute, rules))``, each rule
# a device's path and a reference to its structure (which the reference keeps alive).
_device_built: list[tuple[int, object, tuple[Any, tuple[tuple[str, Any], ...]]]] = []


def _device_arguments(
    abi: int, fixed: tuple[tuple[str, int], ...]
) -> tuple[Any, tuple[tuple[str, Any], ...]]:
    """The ruleset attribute for ``abi`` and each device rule of ``fixed`` (``/dev/shm`` apart)."""
    if _device_built:
        made_abi, made_from, built = _device_built[0]
        if made_abi == abi and made_from is fixed:
            return built
    import ctypes

    ruleset_attr, path_beneath = _structures()
    rules = tuple(
        (device_path, ctypes.byref(path_beneath(_device_access(abi), parent)))
        for device_path, parent in fixed
        if device_path != SHARED_MEMORY
    )
    built = (ruleset_attr(_handled(abi)), rules)
    _device_built[:] = [(abi, fixed, built)]
    return built


_constants: list[tuple[Any, Any, Any, Any]] = []


def _call_constants() -> tuple[Any, Any, Any, Any]:
    """The unchanging arguments of Landlock's calls, as C values: the numbers of
    ``create_ruleset`` and ``add_rule``, the path-beneath rule type, and no flags."""
    if not _constants:
        import ctypes

        _constants.append(
            (
                ctypes.c_long(_SYS_CREATE_RULESET),
                ctypes.c_long(_SYS_ADD_RULE),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.c_uint32(0),
            )
        )
    return _constants[0]


# Rulesets granting the devices alone, made after a confined start while its child runs
# (make_spare_ruleset), so that the next start adds only its own folders: the device rules are
# the same for every start, and adding them was most of building a ruleset between two
# validators. Each is kept with the fixed descriptors it was made from (never used once those
# are opened again). Their fds close on exec (Landlock makes them so): no child inherits one.
_spares: list[tuple[object, int]] = []
_spares_lock = _thread.allocate_lock()
SPARES_AT_MOST = 2


def _spare_ruleset(fixed: object) -> int:
    """A spare ruleset made from ``fixed``, taken (its fd is the caller's now), or -1."""
    with _spares_lock:
        while _spares:
            made_from, fd = _spares.pop()
            if made_from is fixed:
                return fd
            _close(fd)
    return -1


def make_spare_ruleset() -> None:
    """Make a ruleset for the next confined start ahead (the devices' rules), unless enough
    wait: called after a confined child started, while it runs. Never raises: a start without
    a spare makes its ruleset whole."""
    if not sandbox_enabled():
        return
    with _spares_lock:
        if len(_spares) >= SPARES_AT_MOST:
            return
    try:
        fixed = _fixed_paths()
        fd = _device_ruleset(landlock_abi(), fixed)
    except OSError:
        return
    with _spares_lock:
        if len(_spares) < SPARES_AT_MOST:
            _spares.append((fixed, fd))
            return
    _close(fd)


_fixed: list[tuple[tuple[str, int], ...]] = []
_fixing = _thread.allocate_lock()


def forget_fixed_paths() -> None:
    """In a child forked without an exec (a warm validator's): close the descriptors
    :func:`_fixed_paths` kept for its parent's rulesets, and the spare rulesets made from them
    (:func:`make_spare_ruleset`). They are its parent's, not its own."""
    kept = _fixed.pop() if _fixed else ()
    _device_built.clear()  # rules naming those descriptors
    spares = [fd for _, fd in _spares]
    _spares.clear()  # made for its parent too
    for fd in spares:
        _close(fd)
    for _, parent in kept:
        _close(parent)


def _fixed_paths() -> tuple[tuple[str, int], ...]:
    """The device files and folders every ruleset grants, and ``/dev/shm``, each with an
    ``O_PATH`` descriptor opened once for this process (not once per child started): the
    kernel takes a rule's inode from it. Those absent here are left out. A device file is never
    opened through a final link, a folder only as a folder (see :func:`_open_path`).

    Raises ``OSError`` (and keeps nothing) when one cannot be opened for another reason.
    """
    if _fixed:
        return _fixed[0]
    import ctypes

    with _fixing:
        if _fixed:
            return _fixed[0]
        wanted = [(d, False) for d in (*DEVICES, *_accelerators())]
        wanted += [(d, True) for d in (*DEVICE_FOLDERS, SHARED_MEMORY)]
        opened: list[tuple[str, int]] = []
        try:
            for path, folder in wanted:
                parent = _open_path(os.fsencode(path), folder=folder)
                if parent < 0:
                    err = ctypes.get_errno()
                    if err in (errno.ENOENT, errno.ENOTDIR):
                        continue
                    raise OSError(err, os.strerror(err), path)
                opened.append((path, parent))
        except BaseException:
            for _, parent in opened:
                _close(parent)
            raise
        _fixed.append(tuple(opened))
    return _fixed[0]


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


def _open_path(path: bytes, *, folder: bool = True) -> int:
    """An ``O_PATH`` descriptor of ``path``, or -1 with ``errno`` set. A ``folder`` must be one
    (``O_DIRECTORY``: never a final link to something else); a device is never opened through
    a final link (``O_NOFOLLOW``: a file rule is for the device that is there)."""
    opener = _path_functions()[0]
    kind = os.O_DIRECTORY if folder else os.O_NOFOLLOW
    return int(opener(path, os.O_PATH | os.O_CLOEXEC | kind))


_accelerator_cache: list[tuple[str, ...]] = []


def _accelerators() -> tuple[str, ...]:
    """The GPU device files directly in /dev (``nvidia*``, AMD's ``kfd``), listed once."""
    if not _accelerator_cache:
        try:
            names = os.listdir("/dev")
        except OSError:
            names = []
        found = sorted(n for n in names if n.startswith("nvidia") or n == "kfd")
        _accelerator_cache.append(tuple(os.path.join("/dev", n) for n in found))
    return _accelerator_cache[0]


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
