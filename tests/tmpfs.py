"""The suite's temporary files in memory: a private tmpfs, where the kernel allows one.

The suite makes hundreds of thousands of files (git repositories, clones, virtual
environments) and removes them again. On an ext4 disk a file costs about ten times the CPU it
costs on a tmpfs: with /tmp in memory, one quiet run of the suite took 171 s against 216 s,
and 72 system CPU-seconds against 108 (the lead's measure). So the pytest process, before it
makes any temporary file, moves into a mount namespace of its own (a user namespace too,
unless it is root), mounts a fresh tmpfs on ``$TMPDIR/tsq-<uid>`` (an empty folder on the
disk) there and makes it the session's ``TMPDIR``: every xdist worker and every process a
test starts inherits it, nothing else on the machine sees it (nor is anything of /tmp
hidden: a clone in /tmp runs as well), and it is gone, with what the tests left, when the
last of them ends (pytest's old ``pytest-of-<user>/pytest-N`` folders then never pile up,
nor cost a removal). Where the kernel refuses (no user namespaces, a container without the
capability), where the temporary folder is a tmpfs already (a nested pytest), or with
``TRYSQUARE_TESTS_TMP=disk`` (to look at a failed test's folder afterwards), the files stay
where they were; :func:`enter` says which in one line, shown in pytest's header.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import sys
import tempfile

CHOICE = "TRYSQUARE_TESTS_TMP"  # "disk": leave TMPDIR as it is; set to "tmpfs" once inside
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000
# A cap, so that a runaway test fills this tmpfs rather than the machine's memory: the
# suite's peak is far below it (about 600 MB, measured on a whole run).
_SIZE = "4g"


def _filesystem(path: str) -> str | None:
    """The type of the file system holding ``path`` (a real path), from its longest mount."""
    best, found = "", None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                point = fields[4].encode().decode("unicode_escape")
                if (path == point or path.startswith(point.rstrip("/") + "/")) and len(
                    point
                ) >= len(best):
                    best, found = point, fields[fields.index("-") + 1]
    except (OSError, ValueError, IndexError):
        return None
    return found


def _single_threaded() -> bool:
    """unshare() takes a process of a single thread (an xdist worker runs several)."""
    return len(os.listdir("/proc/self/task")) == 1


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(f"{what}: {os.strerror(number)}")


def _mount_private_tmpfs(libc: ctypes.CDLL, as_user: bool, folder: str) -> None:
    uid, gid = os.getuid(), os.getgid()
    _check(libc.unshare(_CLONE_NEWNS | (_CLONE_NEWUSER if as_user else 0)), "unshare")
    if as_user:  # the same user and group inside as outside, nothing more
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
                handle.write(text)
        with open("/proc/self/gid_map", "w", encoding="ascii") as handle:
            handle.write(f"{gid} {gid} 1")
    # Private first: a mount made here must never show on the machine.
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    options = f"mode=1777,size={_SIZE}".encode()
    _check(
        libc.mount(b"tmpfs", folder.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options), "mount"
    )


def _try_in_a_child(libc: ctypes.CDLL, folder: str) -> str | None:
    """Why a user namespace with a tmpfs cannot be made here (None: it can), asked of a child
    process, since a half-made one (some kernels allow the namespace but not the mount) could
    not be left again."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            _mount_private_tmpfs(libc, as_user=True, folder=folder)
        except OSError as error:
            os.write(write, str(error).encode()[:500])
            os._exit(1)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        reason = answer.read().decode(errors="replace")
    _, status = os.waitpid(child, 0)
    return None if os.waitstatus_to_exitcode(status) == 0 else reason or "the probe failed"


def enter() -> str:
    """Put this session's temporary folder on a private tmpfs when it can; the line saying where."""
    choice = os.environ.get(CHOICE, "")
    if choice == "tmpfs":
        return f"temporary files: a private tmpfs on {tempfile.gettempdir()} (the session's)"
    if choice == "disk":
        return f"temporary files: on the disk, as {CHOICE}=disk asks"
    if not sys.platform.startswith("linux"):
        return "temporary files: where the system keeps them (a private tmpfs takes Linux)"
    base = os.path.realpath(tempfile.gettempdir())
    if _filesystem(base) == "tmpfs":
        return f"temporary files: {base} is a tmpfs already"
    if not _single_threaded():
        return "temporary files: on the disk (this process already runs threads)"
    folder = os.path.join(base, f"tsq-{os.getuid()}")
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
        found = os.lstat(folder)
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
            raise OSError(f"{folder} is not a folder of this user's")
        if os.geteuid() == 0:
            _mount_private_tmpfs(libc, as_user=False, folder=folder)
        else:
            reason = _try_in_a_child(libc, folder)
            if reason is not None:
                raise OSError(reason)
            _mount_private_tmpfs(libc, as_user=True, folder=folder)
    except OSError as error:
        return f"temporary files: on the disk (no private tmpfs: {error}); slower, same tests"
    os.environ["TMPDIR"] = folder
    tempfile.tempdir = None  # found again from TMPDIR
    os.environ[CHOICE] = "tmpfs"
    return f"temporary files: a private tmpfs on {folder} (tests/tmpfs.py)"
