"""What the jail shows of this machine, read-only, and what it never shows.

Shown: the system folders, the interpreter trysquare runs with, the folders on ``PATH`` (and
the folder of a pyenv-like manager whose ``shims`` are there) and ``[task] readable``. Never
shown, under any name a link gives it: ``$HOME``, trysquare's cache (its signing key lives
there), a run. The jail's mounts are built from these (:func:`trysquare.jail.jailed_command`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence

# Folders of the system that programs need, shown read-only (those that exist).
SYSTEM_FOLDERS = ("/usr", "/etc", "/opt", "/sys", "/nix", "/gnu")
# Top-level names that are often links into /usr on merged-/usr systems.
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The name version managers give the folder of stand-ins they put on PATH.
_SHIMS = "shims"
# Files of /etc that hold secrets (readable where the jail runs as root): shown empty.
MASKED_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers")
# Folders of /etc that hold keys: shown as empty folders.
MASKED_FOLDERS = ("/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d")


def plain(path: str) -> str:
    """``path`` normalised as a name (``os.path.normpath``), a leading ``//`` made ``/`` too
    (POSIX leaves its meaning open, and no folder here starts with it)."""
    normal = os.path.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies beneath it (both normalised, absolute)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _home_root() -> list[str]:
    """$HOME (none when it is ``/``): never shown whole, though a PATH folder in it may be."""
    home = os.path.expanduser("~")
    return [os.path.realpath(home)] if home and home != "/" else []


def cache_roots() -> list[str]:
    """trysquare's cache (its signing key lives there): nothing in it is ever shown.

    Found where the cache itself is (:func:`trysquare._cache_folder.cache_root`): an unset
    ``XDG_CACHE_HOME`` must not leave the cache unguarded.
    """
    from trysquare._cache_folder import cache_root

    return [os.path.realpath(cache_root())]


def guarded_roots() -> list[str]:
    """Folders the jail never shows, whatever asks for them: $HOME and trysquare's cache."""
    return _home_root() + cache_roots()


def masked_roots(guard: Sequence[str], shown: Sequence[str]) -> list[str]:
    """The guarded folders that lie inside a folder shown whole (a system folder: a run, the
    experiment or $HOME under ``/opt``): covered by an empty folder of their own."""
    masked = sorted(
        {
            root
            for root in guard
            if root != "/" and any(under(root, folder) and root != folder for folder in shown)
        },
        key=len,
    )
    kept: list[str] = []
    for root in masked:
        if not any(under(root, folder) for folder in kept):
            kept.append(root)
    return kept


def shown_readonly(
    extra: Iterable[str],
    guarded: Sequence[str],
    masked: Sequence[str] = (),
    runs: Sequence[str] = (),
) -> list[str]:
    """The folders shown read-only beside the system: the interpreter, PATH (and the folder
    of pyenv-like managers whose ``shims`` are on it), ``readable``.

    A folder that holds a guarded one ($HOME, the cache, a run folder), or lies in trysquare's
    cache or in one of ``runs`` (the run folders, as named and as they really are), is left out,
    judged by where it leads, and so is one named in a run: showing the interpreter must never
    show a run. A folder inside a system folder is shown on its own only when it lies in a
    ``masked`` one (the interpreter in a $HOME under ``/opt``).
    """
    wanted: list[str] = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    wanted.append(os.path.dirname(os.path.realpath(sys.executable)))
    on_path = [plain(p) for p in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(p)]
    wanted += on_path
    # pyenv, rbenv, nodenv and their kin put shims on PATH that hand over to the manager's
    # folder (its libexec, its versions, its version file): shown too, or every shimmed command
    # ends "not found". Only a folder laid out so: another tool's folder of shims (rye's) may
    # keep credentials beside them.
    managers = [os.path.dirname(p) for p in on_path if os.path.basename(p) == _SHIMS]
    wanted += [folder for folder in managers if os.path.isdir(os.path.join(folder, "versions"))]
    wanted += list(extra)
    shown: list[str] = []
    for candidate in wanted:
        if any(under(plain(candidate), root) for root in runs):
            continue  # named in the run (its clone on PATH): the agent's, whatever it leads to
        real = os.path.realpath(candidate)
        # Judged by what it is, not by how it is named: bubblewrap mounts what a link leads to,
        # so a link to $HOME is $HOME (then neither name is shown).
        if any(under(root, real) for root in guarded) or any(
            under(real, root) for root in (*cache_roots(), *runs)
        ):
            continue
        for path in {plain(candidate), real}:
            if path == "/" or not os.path.isdir(path):
                continue
            if path != real and os.path.realpath(path) != real:
                continue  # a link before ".." ("~/tools/.."): the name leads elsewhere
            in_system = any(under(path, s) for s in (*SYSTEM_FOLDERS, *SYSTEM_LINKS))
            if in_system and not any(under(path, root) for root in masked):
                continue  # shown already
            if any(under(root, path) for root in guarded):
                continue  # it would show $HOME, the cache or a run
            if any(under(path, root) for root in cache_roots()):
                continue  # inside the cache
            if path not in shown:
                shown.append(path)
    # One mount a folder: one already shown through a folder holding it costs a mount for nothing.
    shown.sort(key=len)
    kept: list[str] = []
    for path in shown:
        if not any(under(path, folder) for folder in kept):
            kept.append(path)
    return kept
