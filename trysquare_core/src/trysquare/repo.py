"""The one core module that knows git: what a measured clone holds and how it changed.

Everything trysquare reads from a measured clone goes through here, and nothing
here writes into it — ``.git`` included.

**The clone's ``.git`` is hostile** (docs/security.md): the measured agent wrote it. Its
config can name programs (``filter.*.clean``/``smudge``/``process``,
``diff.*.textconv``/``command``, ``diff.external``, ``core.fsmonitor``,
``core.pager``, ``core.hooksPath``, ``include.path`` to a FIFO that hangs us), its
index can hide work (``assume-unchanged``, ``skip-worktree``, a forged index), and
its refs can lie (``refs/replace/``, ``info/grafts``, a moved tag). So no git
command ever runs with the clone's ``.git`` as its repository. Instead each call
runs against a *shadow* ``GIT_DIR`` that trysquare builds in its own cache
(``$XDG_CACHE_HOME/trysquare/shadow/``, never in the run folder, which the agent
could pre-plant):

- ``config`` written by us (no drivers, ``core.fsmonitor=false``, hooks at
  ``/dev/null``); ``GIT_CONFIG_NOSYSTEM=1``, ``GIT_CONFIG_GLOBAL=/dev/null`` and
  no inherited ``GIT_*`` variable, so no other config is read at all;
- ``objects/info/alternates`` naming the clone's object store (found by reading
  ``.git``, a ``gitdir:`` file and ``commondir`` in Python): objects are
  content-addressed, so borrowing them is safe;
- no replace refs, no grafts, no shallow file (``GIT_NO_REPLACE_OBJECTS=1`` too);
  for resolving a symbolic ``base`` once, the clone's refs are read in Python
  (``refs/replace/`` skipped) into a throwaway shadow's ``packed-refs``;
- an index made by ``read-tree <base>``: a stat cache of the base commit, which
  ``git status`` refreshes and keeps (the shadow is ours to write), so
  ``status``/``diff-files`` compare the *working tree with the base commit
  object* directly — the clone's index, its flags and its HEAD play no part;
- ``info/exclude``: the ``.gitignore`` files *as they are at base* (a nested one
  anchored to its folder) plus run.toml's ``excluded`` patterns, given to
  ``ls-files --others --exclude-from`` — never ``--exclude-standard``, which would
  read the work tree's ``.gitignore`` (the agent's edits), ``.git/info/exclude``
  and ``core.excludesFile``;
- ``info/attributes`` (the highest-precedence attributes file): first a line
  resetting ``text``/``eol``/``crlf``/``ident``/``filter``/``diff``/
  ``working-tree-encoding`` for every path, then the ``.gitattributes`` files *as
  they are at base*. So the work tree's ``.gitattributes`` never changes how a
  file is hashed or diffed: the agent's edit of ``.gitattributes`` is itself a
  touched file (seen in ``touched`` and the patch), not a lens over the others.
  Base attributes are kept because a project's own ``eol``/``text`` rules decide
  what its checked-out files look like. With no driver in our config, a
  ``filter=``/``diff=`` attribute names nothing that could run.

A submodule counts as touched when its checked-out commit moves (read from its
refs in Python); its uncommitted edits are not inspected, since that would run git
with the submodule's own config.

Paths are POSIX, relative to the repository root, decoded with
:func:`os.fsdecode` (undecodable bytes survive as surrogates). Stdlib only:
``trysquare.assay`` imports this module.

- ``touched`` (:func:`changed_files`) compares ``base`` with the working tree, never
  the history: an agent commit reverted in the working tree touches nothing.
- ``files`` (:func:`working_files`) is what the working tree holds now.
- :func:`touched_and_files` computes both from one ``git status`` pass.
- :func:`diff_patch` is ``git diff <base>`` plus untracked files rendered exactly
  as ``git diff --no-index /dev/null <file>`` renders them.
- :func:`context_facts` is all three from one walk: what a context build calls.
- :func:`materialise_etalon` writes a reference tree into a shared cache, never a
  worktree of the clone.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import math
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import BinaryIO, TypeVar

from trysquare._pool import io_workers
from trysquare.errors import RepoError

__all__ = [
    "changed_files",
    "context_facts",
    "copy_tree",
    "diff_patch",
    "git",
    "is_git_repo",
    "materialise_etalon",
    "missing_at",
    "commits_between",
    "parent_of",
    "paths_between",
    "resolve_commit",
    "touched_and_files",
    "worktree_status",
    "write_diff_patch",
    "working_files",
]

# Config pinned on every call, on top of the shadow's own config file.
_CONFIG = (
    "-c", "core.fsmonitor=false",
    "-c", "core.quotepath=off",  # readable non-ASCII paths in the patch
    "-c", "diff.suppressBlankEmpty=false",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
)  # fmt: skip

# The shadow repository's whole configuration: nothing here names a program.
_SHADOW_CONFIG = """\
[core]
\trepositoryformatversion = {version}
\tbare = false
\tfilemode = true
\tsymlinks = true
\tignorecase = false
\tprecomposeunicode = false
\tautocrlf = false
\tsafecrlf = false
\tfsmonitor = false
\tuntrackedCache = false
\tsplitIndex = false
\tsparseCheckout = false
\thooksPath = /dev/null
\tquotepath = off
\tlogAllRefUpdates = false
[gc]
\tauto = 0
[index]
\tversion = 2
{extensions}"""

# Resets every attribute that could change how a path is hashed or diffed; the
# base commit's own .gitattributes follow it in the same (highest-precedence) file.
_ATTRIBUTE_RESET = b"* !text !eol !crlf !ident !filter !diff !working-tree-encoding\n"

# The patch's options, pinned so a user's diff.* settings cannot change it.
_PATCH_OPTIONS = (
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",  # same view as `touched`: a rename is a deletion plus an addition
    "--ignore-submodules=dirty",  # "none" would run `git status` inside the submodule
    "--submodule=short",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--abbrev=12",  # fixed, so untracked files rendered here match git's own lines
    "--unified=3",
    "--inter-hunk-context=0",
    "--diff-algorithm=myers",
    "--indent-heuristic",
    "-O/dev/null",  # no diff.orderFile: git's path order
)

_ABBREV = 12
# git renders files above core.bigFileThreshold (512 MiB by default) as binary.
_BIG_FILE = 512 * 1024 * 1024
# git's binary sniff: a NUL byte within the first 8000 bytes.
_SNIFF = 8000
_HEX = re.compile(rb"\A(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
_SMALL = 4096  # .git/HEAD, a gitfile, a loose ref: anything longer is not one


def _env(git_dir: Path, work_tree: Path | None, index: Path | None = None) -> dict[str, str]:
    # Built per call (cheap): a caller that changes os.environ later is honoured. Every
    # inherited GIT_* variable is dropped: none may point us at another repository,
    # config (GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT) or program (GIT_EXTERNAL_DIFF).
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_DIR=os.fspath(git_dir),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_LITERAL_PATHSPECS="1",  # every path we pass is a path, never a pattern
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        LC_ALL="C",  # stable, parseable messages
    )
    if work_tree is not None:
        env["GIT_WORK_TREE"] = os.fspath(work_tree)
    if index is not None:
        env["GIT_INDEX_FILE"] = os.fspath(index)
    return env


# --- the clone's .git, read without git ----------------------------------------------------


def _read_small(path: Path) -> bytes | None:
    """A small regular file's bytes (never through a FIFO or device), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, _SMALL + 1)[:_SMALL]
    finally:
        os.close(fd)


# --- what git would wait on ------------------------------------------------------------------
#
# git opens the files it reads with a plain open(): on a FIFO it waits for a writer for
# ever, on a character device it may read without end. No config is needed for that, so
# the shadow does not help: what can be seen beforehand is refused here, by name, and
# every git process runs under git_timeout() for the rest.


def _special(path: bytes | str, mode: int) -> str | None:
    """What ``path`` is when git must not open it ("a FIFO", "a link to a device", ...):
    anything but a regular file or a folder, a link read through (git follows it)."""
    link = stat.S_ISLNK(mode)
    if link:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return None  # a dangling link: git fails to open it, and says so
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}.get(stat.S_IFMT(mode), "a device")
    return f"a link to {kind}" if link else kind


def _refuse_special(path: bytes | str, kind: str) -> RepoError:
    return RepoError(f"{os.fsdecode(path)} is {kind} where git reads a file: git would wait on it")


_ALTERNATES_DEPTH = 5  # as git: alternates of alternates, so deep and no deeper


def _check_object_store(objects: Path) -> None:
    """Refuse an object store holding anything but folders and regular files.

    Loose objects, packs and their indexes, the multi-pack index, commit-graphs, the
    alternates file: git opens any of them, none deeper than ``info/commit-graphs/``, so
    two levels are listed (an entry's type comes with the listing), links read through,
    and the store's alternates followed as git follows them. A folder is listed again
    when it is reached nearer a store's top than before (a link may lead back up).
    """
    nearest: dict[tuple[int, int], int] = {}
    stores = [(os.fsencode(objects), 0)]
    while stores:
        store, depth = stores.pop()
        todo = [(store, 0)]
        while todo:
            folder, level = todo.pop()
            try:
                info = os.stat(folder)
                key = (info.st_dev, info.st_ino)
                if nearest.get(key, 3) <= level:
                    continue
                nearest[key] = level
                entries = list(os.scandir(folder))
            except OSError:
                continue  # unreadable: git cannot open it either, and says so
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    continue
                if entry.is_dir(follow_symlinks=True):
                    if level < 2:
                        todo.append((entry.path, level + 1))
                elif kind := _special(entry.path, entry.stat(follow_symlinks=False).st_mode):
                    raise _refuse_special(entry.path, kind)
        if depth < _ALTERNATES_DEPTH:
            # As git: a relative one from this store, through its links (and named so).
            stores.extend((os.path.realpath(os.path.join(store, alt)), depth + 1) for alt in _alternates(store))


_ALTERNATES_LIMIT = 1 << 24


def _alternates(store: bytes) -> list[bytes]:
    """The object stores ``<store>/info/alternates`` names, read as git reads them: lines
    split on LF only, ``#`` comments and empty lines skipped, a C-quoted line unquoted
    (kept as it is when it does not unquote), nothing stripped; a link followed."""
    path = os.path.join(store, b"info", b"alternates")
    data = _read_regular(path, _ALTERNATES_LIMIT, follow=True)
    if data is None:  # absent, or not a file (a FIFO here was refused by the listing), or too large
        with contextlib.suppress(OSError):
            if (size := os.stat(path).st_size) > _ALTERNATES_LIMIT:
                raise RepoError(f"{os.fsdecode(path)} holds {size} bytes: too many to be a list of object stores")
        return []
    found: list[bytes] = []
    for line in data.split(b"\n"):
        if not line or line.startswith(b"#"):
            continue
        if line.startswith(b'"'):
            try:
                line = _unquote(line, 0)
            except (ValueError, IndexError):
                pass  # git takes such a line as it is
        found.append(line)
    return found


def _folders_of(paths: Iterable[bytes]) -> set[bytes]:
    """Every folder on the way to each path, the top (b"") included."""
    folders = {b""}
    for path in paths:
        folder = path.rpartition(b"/")[0]
        while folder and folder not in folders:
            folders.add(folder)
            folder = folder.rpartition(b"/")[0]
    return folders


def _check_attribute_files(repo: Path, folders: Iterable[bytes]) -> None:
    """Refuse a ``.gitattributes`` in one of ``folders`` of the work tree that is not a
    file: git reads every one on the way to a path whose attributes it needs."""
    top = os.fsencode(repo)
    for folder in folders:
        path = os.path.join(top, folder, b".gitattributes")
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode) and (kind := _special(path, mode)):
            raise _refuse_special(path, kind)


def _git_dirs(repo: Path) -> tuple[Path, Path]:
    """(git dir, common dir) of the work tree at ``repo``: read, never run.

    ``.git`` is a folder, or a ``gitdir:`` file (a linked worktree or a submodule),
    whose folder may name a ``commondir`` holding the shared objects and refs.
    """
    dot = Path(repo) / ".git"
    if dot.is_dir():
        git_dir = dot
    else:
        text = _read_small(dot)
        if text is None or not text.startswith(b"gitdir:"):
            raise RepoError(f"{repo} is not a git repository")
        git_dir = Path(repo) / os.fsdecode(text[len(b"gitdir:") :].strip())
    common = git_dir
    pointer = _read_small(git_dir / "commondir")
    if pointer is not None and pointer.strip():
        common = git_dir / os.fsdecode(pointer.strip())
    if not (git_dir / "HEAD").is_file() or not (common / "objects").is_dir():
        raise RepoError(f"{repo} is not a git repository")
    return git_dir, common


def _object_format(common: Path) -> str:
    """sha1 or sha256, read from the clone's config as text (never included or run)."""
    text = _read_small(common / "config") or b""
    found = re.search(rb"(?im)^\s*objectformat\s*=\s*(\w+)", text)
    return "sha256" if found and found.group(1).lower() == b"sha256" else "sha1"


def _clone_refs(git_dir: Path, common: Path) -> tuple[dict[str, bytes], bytes]:
    """The clone's refs ({name: object id}) and its HEAD line, read as files.

    ``refs/replace/`` is never read (replace refs must not change what a commit
    is); a malformed entry is skipped, never trusted.
    """
    refs: dict[str, bytes] = {}
    packed = common / "packed-refs"
    data = b""
    try:
        if packed.is_file() and not packed.is_symlink():
            data = packed.read_bytes()
    except OSError:
        data = b""
    for line in data.splitlines():
        oid, _, packed_name = line.partition(b" ")
        if _HEX.match(oid) and _good_ref(packed_name):
            refs[packed_name.decode("ascii")] = oid
    symbolic: dict[str, str] = {}
    for current, folders, files in os.walk(common / "refs"):
        folders[:] = [f for f in folders if not (Path(current) / f).is_symlink()]
        for file in files:
            full = Path(current) / file
            name = full.relative_to(common).as_posix()
            if not _good_ref(name.encode("utf-8", "surrogateescape")):
                continue
            text = (_read_small(full) or b"").strip()
            if _HEX.match(text):
                refs[name] = text
            elif text.startswith(b"ref: "):
                symbolic[name] = text[5:].decode("utf-8", "replace")
    for name, target in symbolic.items():
        if target in refs:
            refs[name] = refs[target]
    for name in [n for n in refs if n.startswith("refs/replace/")]:
        del refs[name]
    head = (_read_small(git_dir / "HEAD") or b"").strip()
    return refs, head


def _good_ref(name: bytes) -> bool:
    return (
        name.startswith(b"refs/")
        and not name.startswith(b"refs/replace/")
        and re.fullmatch(rb"[\x21-\x7e]+", name) is not None
        and b".." not in name
    )


def is_git_repo(path: Path) -> bool:
    """True when ``path`` is the top of a git working tree (not a folder inside one).

    Decided by reading ``.git``, never by running git in it.
    """
    path = Path(path)
    if not path.is_dir():
        return False
    try:
        _git_dirs(path)
    except RepoError:
        return False
    return True


# --- shadow repositories -----------------------------------------------------------------


def _cache_root() -> Path:
    root = os.environ.get("XDG_CACHE_HOME", "")
    # XDG: a relative value is invalid and must be ignored.
    base = Path(root) if root and os.path.isabs(root) else Path.home() / ".cache"
    return base / "trysquare"


_SHADOW_ROOTS: dict[Path, Path] = {}


def _shadow_root() -> Path:
    """Where shadow repositories are built: trysquare's cache, or, in a process that may
    not write there (a validator confined by the sandbox), its own temporary folder.

    Probed once per cache folder and process: a confined child sees EACCES at the write.
    """
    cache = _cache_root() / "shadow"
    found = _SHADOW_ROOTS.get(cache)
    if found is None:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tempfile.mkdtemp(prefix=".probe.", dir=cache))
            found = cache
        except PermissionError:
            found = Path(tempfile.gettempdir()) / "trysquare-shadow"
            found.mkdir(parents=True, exist_ok=True)
        _SHADOW_ROOTS[cache] = found
        prune_shadows(found)
    return found


# A shadow holds a copy of its clone's index: at 10,000 runs of a large repository the cache
# would grow by gigabytes per experiment. One unused this long is removed (rebuilt if needed).
SHADOW_UNUSED_DAYS = 30
_PRUNE_EVERY_SECONDS = 24 * 3600


def prune_shadows(root: Path, *, now: float | None = None) -> list[str]:
    """Remove the shadows under ``root`` not used for :data:`SHADOW_UNUSED_DAYS` days, at most
    once a day per cache (a ``.pruned`` stamp says when); the names removed.

    Each use touches its shadow (:func:`_touch`). A shadow is renamed away before it is
    deleted, so a process that finds it again rebuilds it rather than reading half of one.
    """
    now = time.time() if now is None else now
    stamp = root / ".pruned"
    try:
        if now - stamp.stat().st_mtime < _PRUNE_EVERY_SECONDS:
            return []
    except FileNotFoundError:
        pass
    except OSError:
        return []
    removed = []
    try:
        stamp.touch()
        entries = list(os.scandir(root))
    except OSError:
        return []
    for entry in entries:
        # A build or a removal a killed process left behind is a day-old dot folder.
        leftover = entry.name.startswith((".build.", ".prune."))
        if (entry.name.startswith(".") and not leftover) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
            if age < (86400 if leftover else SHADOW_UNUSED_DAYS * 86400):
                continue
            doomed = Path(tempfile.mkdtemp(prefix=".prune.", dir=root))
            os.rename(entry.path, doomed / entry.name)
        except OSError:
            continue  # in use, gone already, or not ours to remove: left alone
        shutil.rmtree(doomed, ignore_errors=True)
        removed.append(entry.name)
    return removed


def _touch(folder: Path) -> None:
    """Mark a shadow as used now (what :func:`prune_shadows` goes by)."""
    try:
        os.utime(folder)
    except OSError:
        pass  # a confined process may not write there: the shadow is still used


def _write_shadow(git_dir: Path, common: Path, head: bytes) -> None:
    """The bare bones of a shadow GIT_DIR in ``git_dir`` (which exists, empty)."""
    _check_object_store(common / "objects")
    sha256 = _object_format(common) == "sha256"
    (git_dir / "config").write_text(
        _SHADOW_CONFIG.format(
            version=1 if sha256 else 0,
            extensions="[extensions]\n\tobjectformat = sha256\n" if sha256 else "",
        ),
        encoding="utf-8",
    )
    (git_dir / "refs").mkdir()
    (git_dir / "objects" / "info").mkdir(parents=True)
    (git_dir / "info").mkdir()
    objects = os.fsencode((common / "objects").resolve())
    if b"\n" in objects:
        raise RepoError(f"{common} cannot be read: its path holds a newline")
    (git_dir / "objects" / "info" / "alternates").write_bytes(objects + b"\n")
    (git_dir / "HEAD").write_bytes(head + b"\n")


class _Refs:
    """A throwaway shadow holding a copy of the clone's refs: for resolving names."""

    def __init__(self, repo: Path) -> None:
        self.repo = Path(repo)
        git_dir, common = _git_dirs(self.repo)
        refs, head = _clone_refs(git_dir, common)
        root = _shadow_root()
        root.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="refs.", dir=root))
        try:
            if _HEX.match(head):
                head_line = head
            elif head.startswith(b"ref: ") and _good_ref(head[5:]):
                target = head[5:].decode("ascii")
                head_line = refs[target] if target in refs else b"ref: " + head[5:]
            else:
                head_line = b"ref: refs/heads/unborn"
            _write_shadow(self.dir, common, head_line)
            lines = sorted(b"%s %s\n" % (oid, name.encode("ascii")) for name, oid in refs.items())
            (self.dir / "packed-refs").write_bytes(b"".join(lines))
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def __enter__(self) -> _Refs:
        return self

    def __exit__(self, *_: object) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return _run(self.dir, None, self.repo, args, input)


# Bumped when what a shadow holds changes: an older one is never read (and is pruned).
_SHADOW_LAYOUT = b"2"


def _shadow_key(repo: Path, common: Path, commit: str, excluded: Sequence[str]) -> str:
    hasher = hashlib.sha256(_SHADOW_LAYOUT + b"\0")
    for part in (os.fsencode(Path(repo).resolve()), os.fsencode(common.resolve()), commit.encode()):
        hasher.update(part + b"\0")
    for pattern in excluded:
        hasher.update(os.fsencode(pattern) + b"\n")
    return hasher.hexdigest()[:32]


class _Shadow:
    """The shadow GIT_DIR of one clone at one base commit (see the module docstring)."""

    def __init__(self, repo: Path, commit: str, excluded: Sequence[str] = ()) -> None:
        self.repo = Path(repo)
        self.commit = commit
        _git_dir, common = _git_dirs(self.repo)
        root = _shadow_root()
        self.dir = root / _shadow_key(self.repo, common, commit, excluded)
        self.exclude = self.dir / "info" / "exclude"
        if (self.dir / "index").is_file():
            _check_object_store(common / "objects")  # the clone may have changed since it was built
            _touch(self.dir)
            return
        root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".build.", dir=root))
        try:
            _write_shadow(scratch, common, commit.encode("ascii"))
            done = _run(scratch, None, self.repo, ("read-tree", "--end-of-options", commit))
            if done.returncode != 0:
                raise _failure(self.repo, ("read-tree",), done)
            ignores, attributes, folders = _base_rules(scratch, self.repo, commit)
            extra = b"".join(os.fsencode(p) + b"\n" for p in excluded)
            (scratch / "info" / "exclude").write_bytes(ignores + extra)
            (scratch / "info" / "folders").write_bytes(b"\0".join(sorted(folders)))
            (scratch / "info" / "attributes").write_bytes(_ATTRIBUTE_RESET + attributes)
            try:
                os.rename(scratch, self.dir)
            except OSError:
                if not (self.dir / "index").is_file():
                    raise
                shutil.rmtree(scratch, ignore_errors=True)  # another process built it first
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise

    @classmethod
    def existing(cls, repo: Path, commit: str, excluded: Sequence[str]) -> _Shadow | None:
        """The shadow already built for ``commit``, or None."""
        _git_dir, common = _git_dirs(repo)
        folder = _shadow_root() / _shadow_key(repo, common, commit, excluded)
        if not (folder / "index").is_file():
            return None
        _check_object_store(common / "objects")  # the clone may have changed since it was built
        _touch(folder)
        shadow = cls.__new__(cls)
        shadow.repo, shadow.commit, shadow.dir = Path(repo), commit, folder
        shadow.exclude = folder / "info" / "exclude"
        return shadow

    def folders(self) -> list[bytes]:
        """Every folder of the base tree (b"" the top): where git reads ``.gitattributes``
        for a tracked path."""
        return (self.dir / "info" / "folders").read_bytes().split(b"\0")

    def run(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return _run(self.dir, self.repo, self.repo, args, input)

    def git(self, *args: str, input: bytes | None = None) -> bytes:
        done = self.run(*args, input=input)
        if done.returncode != 0:
            raise _failure(self.repo, args, done)
        return done.stdout

    def refuse_waits(self) -> None:
        """Refuse a ``.gitattributes`` git would wait on, in a folder of the base tree:
        before ``status`` or ``diff-files`` starts."""
        _check_attribute_files(self.repo, self.folders())

    def status(self, *more: Sequence[str]) -> list[bytes]:
        """The outputs of ``git status`` (base -> work tree), ``ls-files --others`` and
        ``more``, run at once (after :meth:`refuse_waits`)."""
        return _git_many(self.dir, self.repo, _STATUS_ARGS, _others_args(self), *more)


def _escape_glob(folder: bytes) -> bytes:
    return re.sub(rb"([*?\[\\])", rb"\\\1", folder)


def _anchor(line: bytes, folder: bytes, *, negatable: bool) -> bytes | None:
    """One pattern line of ``<folder>/.gitignore`` (or attributes) made root-relative."""
    line = line.rstrip(b"\r")
    if not line.strip() or line.startswith(b"#"):
        return None
    if not folder:
        return line
    negated = negatable and line.startswith(b"!")
    body = line[1:] if negated else line
    if body.startswith(b'"'):
        return None  # a C-quoted attributes pattern: rare; left out rather than misread
    pattern, sep, rest = body.partition(b" ") if not negatable else (body, b"", b"")
    if not negatable and b"\t" in pattern:
        pattern, _, tail = pattern.partition(b"\t")
        rest, sep = tail + (b" " + rest if sep else b""), b"\t"
    trimmed = pattern[:-1] if pattern.endswith(b"/") else pattern
    prefix = b"/" + _escape_glob(folder)
    if pattern.startswith(b"/"):
        anchored = prefix + pattern
    elif b"/" in trimmed:
        anchored = prefix + b"/" + pattern
    else:
        anchored = prefix + b"/**/" + pattern
    return (b"!" if negated else b"") + anchored + sep + rest


def _base_rules(git_dir: Path, repo: Path, commit: str) -> tuple[bytes, bytes, set[bytes]]:
    """The base commit's .gitignore and .gitattributes files, anchored and joined, and
    the base tree's folders.

    Ordered shallow to deep: in one exclude file the last match wins, as a deeper
    .gitignore wins over its parents.
    """
    listing = _run(git_dir, None, repo, ("ls-tree", "-r", "-z", "--full-tree", commit))
    if listing.returncode != 0:
        raise _failure(repo, ("ls-tree",), listing)
    wanted: list[tuple[int, bytes, bytes, bytes]] = []
    paths = []
    for item in _split_z(listing.stdout):
        meta, _, path = item.partition(b"\t")
        paths.append(path)
        folder, _, name = path.rpartition(b"/")
        if name in (b".gitignore", b".gitattributes") and meta.startswith(b"100"):
            wanted.append((folder.count(b"/") + bool(folder), folder, name, meta.split(b" ")[2]))
    folders = _folders_of(paths)
    if not wanted:
        return b"", b"", folders
    wanted.sort()
    done = _run(
        git_dir, None, repo, ("cat-file", "--batch"),
        b"".join(oid + b"\n" for *_, oid in wanted),
    )  # fmt: skip
    if done.returncode != 0:
        raise _failure(repo, ("cat-file",), done)
    out, at = done.stdout, 0
    ignores: list[bytes] = []
    attributes: list[bytes] = []
    for _depth, folder, name, _oid in wanted:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split(b" ")[2])
        text = out[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
        for line in text.split(b"\n"):
            if name == b".gitattributes":
                if line.startswith(b"[attr]") and folder:
                    continue  # git honours macros only at the top
                anchored = _anchor(line, folder, negatable=False)
                if anchored is not None:
                    attributes.append(anchored + b"\n")
            else:
                anchored = _anchor(line, folder, negatable=True)
                if anchored is not None:
                    ignores.append(anchored + b"\n")
    return b"".join(ignores), b"".join(attributes), folders


# --- running git -----------------------------------------------------------------------------


def _argv(args: Sequence[str]) -> list[str]:
    return ["git", *_CONFIG, *args]


GIT_TIMEOUT_VARIABLE = "TRYSQUARE_GIT_TIMEOUT"
_GIT_TIMEOUT_SECONDS = 120.0


def git_timeout() -> float:
    """How long one git process may run, in seconds: ``$TRYSQUARE_GIT_TIMEOUT``, else 120.

    A hostile clone can hold git for ever without naming a program: a FIFO where git opens
    a file (a nested repository's ``HEAD``, an object, a ``.gitattributes``). What can be
    seen beforehand is refused by name (:func:`_check_object_store`,
    :func:`_check_attribute_files`); this bounds the rest. Read per call, so a caller that
    sets the variable later is honoured.
    """
    text = os.environ.get(GIT_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return _GIT_TIMEOUT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise RepoError(f"{GIT_TIMEOUT_VARIABLE} must be a number of seconds above 0, not {text!r}")
    return seconds


def _timed_out(repo: Path, args: Sequence[str], seconds: float) -> RepoError:
    return RepoError(
        f"git {args[0] if args else ''} did not finish within {seconds:g} s in {repo} and was"
        f" stopped: something in the clone keeps it waiting (a FIFO or a device where git reads"
        f" a file?); {GIT_TIMEOUT_VARIABLE} sets the limit"
    )


def _run(
    git_dir: Path,
    work_tree: Path | None,
    repo: Path,
    args: Sequence[str],
    input: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    seconds = git_timeout()
    try:
        return subprocess.run(
            _argv(args),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            env=_env(git_dir, work_tree),
            cwd=work_tree if work_tree is not None else git_dir,
            check=False,
            timeout=seconds,
        )
    except FileNotFoundError:
        raise RepoError(f"git is not installed or not on PATH (needed to read {repo})") from None
    except subprocess.TimeoutExpired:
        raise _timed_out(repo, args, seconds) from None


def _failure(
    repo: Path, args: Sequence[str], done: subprocess.CompletedProcess[bytes]
) -> RepoError:
    lines = [ln for ln in done.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    # The last "fatal:"/"error:" line is git's own one-sentence reason.
    reasons = [ln for ln in lines if ln.startswith(("fatal:", "error:"))] or lines
    reason = reasons[-1].split(":", 1)[-1].strip() if reasons else f"exit status {done.returncode}"
    return RepoError(f"git {args[0] if args else ''} failed in {repo}: {reason}")


def git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    """Run a read-only ``git args...`` on ``repo``'s objects and refs; return its stdout.

    Runs against a shadow holding a copy of the clone's refs, never the clone's own
    ``.git`` (whose config could name programs). Raises :class:`RepoError` naming the
    repository and git's reason on failure.
    """
    with _Refs(Path(repo)) as refs:
        done = refs.run(*args, input=input)
    if done.returncode != 0:
        raise _failure(Path(repo), args, done)
    return done.stdout


def _git_many(git_dir: Path, repo: Path, *calls: Sequence[str]) -> list[bytes]:
    """Run independent git calls concurrently (each one walks the tree on its own core)."""
    results: list[subprocess.CompletedProcess[bytes] | BaseException | None] = [None] * len(calls)

    def work(index: int) -> None:
        try:
            results[index] = _run(git_dir, repo, repo, calls[index])
        except BaseException as error:  # re-raised below, in the caller's thread
            results[index] = error

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, len(calls))]
    for thread in threads:
        thread.start()
    work(0)
    for thread in threads:
        thread.join()
    out: list[bytes] = []
    for args, done in zip(calls, results, strict=True):
        if isinstance(done, BaseException):
            raise done
        assert done is not None
        if done.returncode != 0:
            raise _failure(repo, args, done)
        _check_warnings(repo, done.stderr)
        out.append(done.stdout)
    return out


_UNREADABLE = (
    "warning: could not open directory",
    "warning: unable to access",
    "error: could not open",
    "error: unable to",
    "warning: could not stat",
    "error: could not lstat",
)


# git does not read a .gitattributes that is a link (git >= 2.32) and says so. Harmless
# here: the shadow's info/attributes decides every attribute trysquare's reads depend on,
# so a work tree's .gitattributes, read or not, changes nothing (a committed link to the
# real file is a project's own choice, not a reason to refuse the run).
_ATTRIBUTES_UNREAD = re.compile(
    r"warning: unable to access '(?:.*/)?\.gitattributes': Too many levels of symbolic links\Z"
)


def _check_warnings(repo: Path, stderr: bytes) -> None:
    """git's complaints about paths it could not read (a path longer than PATH_MAX,
    500 nested folders) fail the read, naming the path: a part of the work tree git
    skipped would silently be missing from ``touched``."""
    for line in stderr.decode("utf-8", "backslashreplace").splitlines():
        if line.startswith(_UNREADABLE) and not _ATTRIBUTES_UNREAD.match(line):
            said = line.split(":", 1)[1].strip()
            if len(said) > 300:  # name it, but keep the sentence readable
                said = f"{said[:140]}...{said[-140:]} ({len(said)} characters)"
            raise RepoError(f"git could not read part of {repo}: {said}")


def resolve_commit(repo: Path, rev: str, *, what: str = "base") -> str:
    """The full object id of the commit ``rev`` names (a sha, short sha, tag, branch).

    Refs are read from the clone's files (replace refs never), so a name resolves
    as it does now: a caller that must not let it move pins the answer.
    """
    repo = Path(repo)
    found = _peeled_without_git(repo, rev, b"commit")
    if found is not None:
        return found
    with _Refs(repo) as refs:
        done = refs.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if done.returncode != 0 or not done.stdout.strip():
        raise RepoError(f"{what} {rev!r} does not resolve to a commit in {repo}")
    return done.stdout.decode("ascii").strip()


def _peeled_without_git(repo: Path, rev: str, want: bytes) -> str | None:
    """What ``git rev-parse --verify REV^{commit}`` (``want`` b"commit") or ``^{tree}``
    answers, worked out from the clone's files where that is plain: ``rev`` a full id or
    a simple ref name, every object on the way a loose one that hashes to its id. None
    whenever anything is less plain (packed objects, expressions, short ids, HEAD-like
    names): git is asked then, as before.

    Resolving the base and the etalon tag runs for every run and command: a refs shadow
    and a git process each cost ~5 ms here, this a few file reads.
    """
    try:
        git_dir, common = _git_dirs(repo)
    except RepoError:
        return None
    if _HEX.match(rev.encode("ascii", "replace")):
        oid = rev
    else:
        found = _ref_without_git(git_dir, common, rev)
        if found is None:
            return None
        oid = found
    for _ in range(8):  # a tag of a tag of ... : git peels them all; so deep is unusual
        loose = _loose_object(common, oid)
        if loose is None:
            return None
        kind, body = loose
        if kind == want:
            return oid
        if kind == b"tag":
            target = _header_field(body, b"object")
        elif kind == b"commit" and want == b"tree":
            target = _header_field(body, b"tree")
            return target  # as git: the commit's tree id, read, not looked up
        else:
            return None
        if target is None:
            return None
        oid = target
    return None


# A name git's rules turn into a ref (refs/NAME, refs/tags/NAME, refs/heads/NAME, ...):
# no revision syntax, no leading dash or dot, not HEAD-like (root refs live in .git).
_SIMPLE_REF = re.compile(r"(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]*[a-z.-][A-Za-z0-9._/-]*\Z")


def _ref_without_git(git_dir: Path, common: Path, name: str) -> str | None:
    """The object id git's rev-parse finds for ref ``name`` among the refs the shadow is given
    (the clone's, replace refs never): the first of its rules that names one. None for a
    name those rules do not cover here (git decides), or one no ref has (git may still
    read it as a short id or a describe name)."""
    if not _SIMPLE_REF.match(name) or name.startswith(("/", ".")) or name.endswith(("/", ".", ".lock")):
        return None
    if all(c in "0123456789abcdef" for c in name):
        return None  # also a short id: git's own order of trying decides
    if name.split("/", 1)[0] in _SHADOW_ENTRIES:
        return None  # git's first rule reads <shadow>/NAME: one of the shadow's own files
    refs, _head = _clone_refs(git_dir, common)
    for rule in ("{}", "refs/{}", "refs/tags/{}", "refs/heads/{}", "refs/remotes/{}", "refs/remotes/{}/HEAD"):
        oid = refs.get(rule.format(name))
        if oid is not None:
            return oid.decode("ascii")
    return None


# What a shadow GIT_DIR holds (_write_shadow, _Refs): git's first rule looks there.
_SHADOW_ENTRIES = frozenset({"HEAD", "config", "info", "objects", "packed-refs"})


def _header_field(body: bytes, field: bytes) -> str | None:
    """The id on a commit's or tag's first ``field`` header line (``tree``, ``object``)."""
    for line in body.split(b"\n\n", 1)[0].split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == field:
            return value.decode("ascii") if _HEX.match(value) else None
    return None


def _loose_object(common: Path, oid: str) -> tuple[bytes, bytes] | None:
    """The type and body of the loose object ``oid`` in the clone's object folder, checked
    against its id as git checks it; None when there is no sound loose object of that id
    (packed, in an alternate, absent, damaged, larger than 1 MiB)."""
    path = common / "objects" / oid[:2] / oid[2:]
    compressed = _read_regular(path, _LOOSE_LIMIT)
    if compressed is None:
        try:
            form = stat.S_IFMT(os.lstat(path).st_mode)
        except OSError:
            return None
        if form not in (stat.S_IFREG, stat.S_IFLNK):
            # A FIFO, socket or device where the object should be: git would wait on it
            # for ever. Refused here, named, rather than handed to git.
            raise RepoError(f"{path} is not a regular file, as every git object is")
        return None
    inflate = zlib.decompressobj()
    try:
        content = inflate.decompress(compressed, 16 * _LOOSE_LIMIT)
    except zlib.error:
        return None
    if not inflate.eof:
        return None  # truncated, or beyond what is read here
    kind, space, rest = content.partition(b" ")
    size, nul, body = rest.partition(b"\0")
    if not space or not nul or not size.isdigit() or int(size) != len(body):
        return None
    digest = hashlib.sha1 if len(oid) == 40 else hashlib.sha256
    if digest(content).hexdigest() != oid:
        return None
    return kind, body


_LOOSE_LIMIT = 1 << 20


def _read_regular(path: Path | bytes, limit: int, *, follow: bool = False) -> bytes | None:
    """A regular file's bytes, if it holds at most ``limit`` (never through a FIFO; through
    a link only when ``follow``)."""
    nofollow = 0 if follow else getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | nofollow | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return os.read(fd, limit + 1)[: limit + 1]
    except OSError:
        return None
    finally:
        os.close(fd)


def _split_z(data: bytes) -> list[bytes]:
    items = data.split(b"\0")
    if items and items[-1] == b"":
        items.pop()
    return items


def _names(data: bytes) -> list[str]:
    """NUL-separated git output as str paths: decoded once, whole (20k paths cost ~1 ms
    this way, ~10 ms one by one). Undecodable bytes survive as surrogates, like
    :func:`os.fsdecode`.
    """
    items = os.fsdecode(data).split("\0")
    if items and items[-1] == "":
        items.pop()
    return items


def missing_at(repo: Path, commit: str, paths: Iterable[str]) -> list[str]:
    """The ``paths`` that are not files (or links) in ``commit``'s tree, in order.

    One ``cat-file --batch-check`` fed on stdin: no path reaches a command line.
    """
    wanted = [p for p in paths]
    if not wanted:
        return []
    if any("\n" in p for p in wanted):
        raise RepoError(f"a path holding a newline cannot be looked up in {repo}")
    with _Refs(Path(repo)) as refs:
        done = refs.run(
            "cat-file", "--batch-check=%(objecttype)",
            input=b"".join(f"{commit}:{p}\n".encode("utf-8", "surrogateescape") for p in wanted),
        )
    if done.returncode != 0:
        raise _failure(Path(repo), ("cat-file",), done)
    answers = done.stdout.decode("ascii", "replace").splitlines()
    return [p for p, kind in zip(wanted, answers, strict=True) if kind != "blob"]


def parent_of(repo: Path, commit: str) -> str | None:
    """The first parent of ``commit`` (as stored: no replace refs, no grafts), or None."""
    done = _refs_run(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^1")
    return done.stdout.decode("ascii").strip() if done.returncode == 0 else None


def paths_between(repo: Path, old: str, new: str) -> set[str]:
    """Paths that differ between two commits' trees."""
    out = git(repo, "diff-tree", "-r", "-z", "--name-only", "--no-renames", "--end-of-options", old, new)
    return set(_names(out))


def commits_between(repo: Path, old: str, new: str) -> int:
    """How many commits ``new`` is past ``old`` (``git rev-list --count old..new``)."""
    return int(git(repo, "rev-list", "--count", "--end-of-options", f"{old}..{new}").strip() or 0)


def _refs_run(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    with _Refs(Path(repo)) as refs:
        return refs.run(*args)


# --- touched and files -----------------------------------------------------------------
#
# In the shadow, HEAD = index = base: `git status -uno` is base -> working tree for
# every path tracked at base (refreshing and keeping the shadow index's stat info,
# which is ours to write), and `ls-files --others --exclude-from` lists what is new.
# The three calls run concurrently, each walking the tree on its own core.

_STATUS_ARGS = (
    "status", "--porcelain=v2", "-z", "--untracked-files=no", "--no-renames",
    "--ignore-submodules=dirty",
)  # fmt: skip
_CACHED_ARGS = ("ls-files", "-z", "--cached")
_ABSENT = "000000"


def _others_args(shadow: _Shadow) -> tuple[str, ...]:
    return ("ls-files", "-z", "--others", f"--exclude-from={shadow.exclude}")


class _Status:
    """``git status --porcelain=v2 -z`` in the shadow, parsed: {path: (XY, worktree mode)}."""

    __slots__ = ("entries",)

    def __init__(self, data: bytes) -> None:
        self.entries: dict[str, tuple[str, str]] = {}
        for item in _names(data):
            if item[:1] == "1":
                _, xy, _sub, _m_head, _m_index, m_tree, _rest = item.split(" ", 6)
                self.entries[item.split(" ", 8)[8]] = (xy, m_tree)


def _untracked(data: bytes) -> set[str]:
    # A nested repository is listed as "dir/": one path, like a gitlink.
    return {path[:-1] if path.endswith("/") else path for path in _names(data)}


def _files(cached: bytes, status: _Status, untracked: set[str]) -> set[str]:
    """Paths at base still on disk, plus new not-ignored ones."""
    present = set(_names(cached))
    present.difference_update(path for path, entry in status.entries.items() if entry[1] == _ABSENT)
    present |= untracked
    # A tracked file replaced by a folder of untracked files is a folder now, not a file.
    for path in untracked:
        cut = path.rfind("/")
        while cut > 0:
            present.discard(path[:cut])
            cut = path.rfind("/", 0, cut)
    return present


def _open_shadow(repo: Path, base: str, excluded: Sequence[str]) -> _Shadow:
    repo = Path(repo)
    if not is_git_repo(repo):
        raise RepoError(f"{repo} is not a git repository")
    if _HEX.match(base.encode("ascii", "replace")):
        # A full id whose shadow exists was checked to be a commit when it was built:
        # no need to read the clone's refs again (the common case: a pinned base).
        shadow = _Shadow.existing(repo, base, excluded)
        if shadow is not None:
            return shadow
    return _Shadow(repo, resolve_commit(repo, base), excluded)


def _snapshot(
    repo: Path, base: str, excluded: Sequence[str], *, files: bool
) -> tuple[set[str], set[str]]:
    shadow = _open_shadow(repo, base, excluded)
    shadow.refuse_waits()
    out = shadow.status(*([_CACHED_ARGS] if files else []))
    status = _Status(out[0])
    untracked = _untracked(out[1])
    touched = set(status.entries) | untracked
    return touched, (_files(out[2], status, untracked) if files else set())


def changed_files(repo: Path, base: str, excluded: Sequence[str] = ()) -> frozenset[str]:
    """``touched``: every path whose existence, content or mode differs between ``base``
    and the working tree (agent commits, staged, unstaged, deleted, new and not ignored
    at base; a rename counts both paths; ignored files and ``.git/`` never appear).

    Compares the base commit object with the working tree, never the history or the
    clone's index: a commit the agent made and then undid touches nothing, and index
    flags hide nothing. ``excluded`` holds gitignore-style patterns of what a harness
    injected (run.toml's ``excluded``).
    """
    return frozenset(_snapshot(Path(repo), base, excluded, files=False)[0])


def _head_base(repo: Path) -> str:
    """The clone's HEAD commit, or the empty tree's stand-in when HEAD is unborn."""
    try:
        return resolve_commit(repo, "HEAD")
    except RepoError:
        if not is_git_repo(repo):
            raise
        return ""


def _shadow_at_head(repo: Path, excluded: Sequence[str]) -> _Shadow | None:
    commit = _head_base(Path(repo))
    return _Shadow(Path(repo), commit, excluded) if commit else None


def worktree_status(repo: Path) -> dict[str, str]:
    """Every path that differs from the clone's HEAD commit, with a two-letter code.

    Not a fact of the run (that is :func:`changed_files`): a cheap picture of the
    clone, taken before and after validation, to see a validator writing into it.
    Read through the shadow like everything else, so the clone's config runs nothing.
    """
    repo = Path(repo)
    shadow = _shadow_at_head(repo, ())
    if shadow is None:
        return {path: "??" for path in _unborn_files(repo)}
    shadow.refuse_waits()
    out = shadow.status()
    status: dict[str, str] = {path: xy for path, (xy, _) in _Status(out[0]).entries.items()}
    status.update((path, "??") for path in _untracked(out[1]))
    return status


def _unborn_files(repo: Path) -> set[str]:
    """Every file of a clone with no commit yet (no ignore rules exist at a base)."""
    _git_dir, common = _git_dirs(repo)
    with tempfile.TemporaryDirectory(prefix="empty.", dir=_mkcache()) as scratch:
        _write_shadow(Path(scratch), common, b"ref: refs/heads/unborn")
        done = _run(Path(scratch), repo, repo, ("ls-files", "-z", "--others"))
    if done.returncode != 0:
        raise _failure(repo, ("ls-files",), done)
    return _untracked(done.stdout)


def _mkcache() -> Path:
    root = _shadow_root()
    root.mkdir(parents=True, exist_ok=True)
    return root


def working_files(repo: Path, excluded: Sequence[str] = ()) -> frozenset[str]:
    """``files``: what the working tree holds now, tracked or new and not ignored.

    Ignore rules are those of the clone's HEAD commit (there is no base here).
    """
    repo = Path(repo)
    shadow = _shadow_at_head(repo, excluded)
    if shadow is None:
        return frozenset(_unborn_files(repo))
    shadow.refuse_waits()
    status, others, cached = shadow.status(_CACHED_ARGS)
    return frozenset(_files(cached, _Status(status), _untracked(others)))


def touched_and_files(
    repo: Path, base: str, excluded: Sequence[str] = ()
) -> tuple[frozenset[str], frozenset[str]]:
    """``(changed_files(repo, base), files)`` for the price of one: a single
    ``git status`` pass serves both (a context build also wants the patch:
    :func:`context_facts`).

    ``files`` here follows the ignore rules of ``base`` (the context's view).
    """
    touched, files = _snapshot(Path(repo), base, excluded, files=True)
    return frozenset(touched), frozenset(files)


# --- diff.patch ------------------------------------------------------------------------

_NAMED_ESCAPES = {
    0x07: b"\\a", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0B: b"\\v",
    0x0C: b"\\f", 0x0D: b"\\r", 0x22: b'\\"', 0x5C: b"\\\\",
}  # fmt: skip
_UNESCAPES = {value[1]: key for key, value in _NAMED_ESCAPES.items()}


def _quote(name: bytes) -> bytes:
    """git's C-style quoting of a path label, as with ``core.quotepath=off``."""
    if not any(c < 0x20 or c in (0x22, 0x5C, 0x7F) for c in name):
        return name
    out = bytearray(b'"')
    for c in name:
        if c in _NAMED_ESCAPES:
            out += _NAMED_ESCAPES[c]
        elif c < 0x20 or c == 0x7F:
            out += b"\\%03o" % c
        else:
            out.append(c)
    out += b'"'
    return bytes(out)


def _unquote(text: bytes, start: int) -> bytes:
    """The C-quoted string opening at ``text[start]`` (a double quote), unescaped."""
    out = bytearray()
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == 0x22:
            return bytes(out)
        if c == 0x5C:
            nxt = text[i + 1]
            if 0x30 <= nxt <= 0x37:
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
            out.append(_UNESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    raise ValueError("unterminated quoted path")


_HEADER = b"diff --git "
_BLOCK = 1 << 20


def _chunk_starts(handle: BinaryIO) -> list[tuple[int, bytes]]:
    """(offset, path) of each file's chunk in a ``--no-renames`` patch on disk.

    Read in blocks, never whole: a header is the only line that starts with
    "diff --git " (hunk lines start with " ", "+", "-" or "\\", and git quotes any
    newline inside a path).
    """
    offsets: list[int] = []
    handle.seek(0)
    position, tail = 0, b"\n"  # the file's start counts as a line start
    while True:
        block = handle.read(_BLOCK)
        if not block:
            break
        window = tail + block
        at = window.find(b"\n" + _HEADER)
        while at != -1:
            offsets.append(position - len(tail) + at + 1)
            at = window.find(b"\n" + _HEADER, at + 1)
        tail = window[-len(_HEADER) :]
        position += len(block)
    starts: list[tuple[int, bytes]] = []
    for offset in offsets:
        handle.seek(offset)
        line = handle.readline(1 << 16)
        header = line[len(_HEADER) :].rstrip(b"\n")
        if header.startswith(b'"'):
            path = _unquote(header, 0)[2:]  # drop "a/"
        else:
            # "a/<p> b/<p>": without renames both sides name the same path.
            width = (len(header) - 5) // 2
            path = header[2 : 2 + width]
        starts.append((offset, path))
    return starts


def _copy_range(source: BinaryIO, start: int, end: int, out: BinaryIO) -> None:
    source.seek(start)
    left = end - start
    while left > 0:
        block = source.read(min(_BLOCK, left))
        if not block:
            break
        out.write(block)
        left -= len(block)


def _diff_attributes(shadow: _Shadow, paths: Sequence[bytes]) -> dict[bytes, bytes]:
    """The ``diff`` attribute of each path ("unset" for ``-diff``/``binary``), as base says."""
    _check_attribute_files(shadow.repo, _folders_of(paths))
    out = shadow.git(
        "check-attr", "-z", "--stdin", "diff", input=b"".join(p + b"\0" for p in paths)
    )
    items = _split_z(out)
    return {items[i]: items[i + 2] for i in range(0, len(items) - 2, 3)}


def _file_facts(full: bytes, size: int, width: int) -> tuple[str, bool, bool]:
    """(blob id, holds a NUL in git's sniff window, ends with a newline): one streamed read."""
    algo = hashlib.sha256 if width == 64 else hashlib.sha1
    hasher = algo(b"blob %d\0" % size)
    head = b""
    last = b""
    with open(full, "rb") as handle:
        while True:
            block = handle.read(_BLOCK)
            if not block:
                break
            if len(head) < _SNIFF:
                head += block[: _SNIFF - len(head)]
            hasher.update(block)
            last = block[-1:]
    return hasher.hexdigest(), b"\0" in head, last == b"\n"


def _write_new_file(
    repo: Path, path: bytes, width: int, attribute: bytes, out: BinaryIO
) -> None:
    """An untracked file as ``git diff --no-index /dev/null <path>`` shows it, streamed."""
    full = os.path.join(os.fsencode(repo), path)
    try:
        info = os.lstat(full)
    except OSError:
        return  # vanished since it was listed
    binary = attribute == b"unset"
    a_label, b_label = _quote(b"a/" + path), _quote(b"b/" + path)
    if stat.S_ISLNK(info.st_mode):
        mode, data = b"120000", os.fsencode(os.readlink(full))
        blob, complete = _blob_id(data, width), data.endswith(b"\n")
        size = len(data)
    elif stat.S_ISREG(info.st_mode):
        mode = b"100755" if info.st_mode & stat.S_IXUSR else b"100644"
        data = None
        try:
            blob, nul, complete = _file_facts(full, info.st_size, width)
        except OSError:
            return  # unreadable now; git would skip it too
        size = info.st_size
        if attribute != b"set":
            binary = binary or size > _BIG_FILE or nul
    elif stat.S_ISDIR(info.st_mode):
        out.write(_new_repository(full, path))
        return
    else:
        return  # a socket or fifo: git lists no content for it either
    out.write(b"diff --git %s %s\n" % (a_label, b_label))
    out.write(b"new file mode %s\n" % mode)
    out.write(b"index %s..%s\n" % (b"0" * _ABBREV, blob[:_ABBREV].encode("ascii")))
    if not size:
        return
    if binary:
        out.write(b"Binary files /dev/null and %s differ\n" % b_label)
        return
    # git ends a label holding a space with a tab, so `patch` reads the name whole.
    out.write(b"--- /dev/null\n+++ %s%s\n" % (b_label, b"\t" if b" " in b_label else b""))
    lines = _count_lines(full, size) if data is None else data.count(b"\n") + (not complete)
    out.write(b"@@ -0,0 +1 @@\n" if lines == 1 else b"@@ -0,0 +1,%d @@\n" % lines)
    with contextlib.ExitStack() as stack:
        if data is not None:
            blocks: Iterable[bytes] = [data]
        else:
            handle = stack.enter_context(open(full, "rb"))
            blocks = iter(lambda: handle.read(_BLOCK), b"")
        at_line_start = True
        for block in blocks:
            # "+" at every line start; the block's own newlines carry through.
            text = block.replace(b"\n", b"\n+")
            if block.endswith(b"\n"):
                text = text[:-1]
            out.write((b"+" if at_line_start else b"") + text)
            at_line_start = block.endswith(b"\n")
    if not complete:
        out.write(b"\n\\ No newline at end of file\n")


def _count_lines(full: bytes, size: int) -> int:
    count, last = 0, b""
    with open(full, "rb") as handle:
        while True:
            block = handle.read(_BLOCK)
            if not block:
                break
            count += block.count(b"\n")
            last = block[-1:]
    return count + (1 if size and last != b"\n" else 0)


def _blob_id(data: bytes, width: int) -> str:
    algo = hashlib.sha256 if width == 64 else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data).hexdigest()


def _nested_head(full: bytes) -> bytes | None:
    """The commit a nested repository has checked out, read from its files, never run."""
    try:
        git_dir, common = _git_dirs(Path(os.fsdecode(full)))
    except RepoError:
        return None
    refs, head = _clone_refs(git_dir, common)
    if _HEX.match(head):
        return head
    if head.startswith(b"ref: "):
        return refs.get(head[5:].decode("ascii", "replace"))
    return None


def _new_repository(full: bytes, path: bytes) -> bytes:
    """An untracked nested repository, shown as git shows a newly added gitlink."""
    head = _nested_head(full)
    if not head:
        return b""  # no commit yet: nothing a gitlink could record
    label = _quote(b"b/" + path)
    return b"".join(
        [
            b"diff --git %s %s\n" % (_quote(b"a/" + path), label),
            b"new file mode 160000\n",
            b"index %s..%s\n" % (b"0" * _ABBREV, head[:_ABBREV]),
            b"--- /dev/null\n+++ %s%s\n" % (label, b"\t" if b" " in label else b""),
            b"@@ -0,0 +1 @@\n+Subproject commit %s\n" % head,
        ]
    )


def write_diff_patch(
    repo: Path, base: str, out: BinaryIO, excluded: Sequence[str] = ()
) -> int:
    """Write ``base`` .. working tree as one unified git patch to ``out``; return its size.

    Streamed: git's part goes through a temporary file, untracked files are read in
    blocks, so a 2 GB file costs constant memory. Untracked files are rendered as new
    files byte for byte as ``git diff --no-index /dev/null <file>`` renders them,
    binary ones as git shows them ("Binary files ... differ"), all sorted by path.
    Writes nothing into the clone: ``diff-files -p`` against the shadow index.
    """
    shadow = _open_shadow(Path(repo), base, excluded)
    shadow.refuse_waits()
    with tempfile.TemporaryFile(dir=_mkcache()) as tracked:
        others = _diff_files(shadow, tracked, lambda: shadow.git(*_others_args(shadow)))
        return _render_patch(shadow, tracked, others, out)


def context_facts(
    repo: Path, base: str, out: BinaryIO, excluded: Sequence[str] = ()
) -> tuple[frozenset[str], frozenset[str]]:
    """:func:`touched_and_files`, with :func:`write_diff_patch` writing to ``out`` on the way.

    What a context build calls: git's walk for new files serves both, and ``status``,
    ``ls-files`` and ``diff-files`` run at once.
    """
    shadow = _open_shadow(Path(repo), base, excluded)
    shadow.refuse_waits()
    with tempfile.TemporaryFile(dir=_mkcache()) as tracked:
        status_out, others, cached = _diff_files(shadow, tracked, lambda: shadow.status(_CACHED_ARGS))
        _render_patch(shadow, tracked, others, out)
    status = _Status(status_out)
    untracked = _untracked(others)
    return frozenset(set(status.entries) | untracked), frozenset(_files(cached, status, untracked))


_T = TypeVar("_T")


def _diff_files(shadow: _Shadow, tracked: BinaryIO, meanwhile: Callable[[], _T]) -> _T:
    """``git diff-files -p`` (base -> work tree, tracked paths) into ``tracked``, while
    ``meanwhile()`` runs; its answer. Under one deadline; the process never outlives us."""
    seconds = git_timeout()
    started = time.monotonic()
    process = subprocess.Popen(
        _argv(("diff-files", "-p", *_PATCH_OPTIONS, "--")),
        stdin=subprocess.DEVNULL,
        stdout=tracked,
        stderr=subprocess.PIPE,
        env=_env(shadow.dir, shadow.repo),
        cwd=shadow.repo,
    )
    try:
        answer = meanwhile()
        _stdout, stderr = process.communicate(timeout=max(0.0, started + seconds - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise _timed_out(shadow.repo, ("diff-files",), seconds) from None
    finally:
        if process.returncode is None:
            process.kill()
            process.communicate()
    if process.returncode != 0:
        unsupported = re.search(rb"(?m)^error: (.+): unsupported file type$", stderr)
        if unsupported:  # a tracked file the agent replaced by a FIFO, socket or device
            path = os.path.join(os.fsencode(shadow.repo), unsupported.group(1))
            try:
                kind = _special(path, os.lstat(path).st_mode) or "no file"
            except OSError:
                kind = "no file"
            raise RepoError(
                f"{os.fsdecode(path)} is {kind} where base has a file: git cannot hash it, so"
                " the run's diff cannot be written"
            )
        done = subprocess.CompletedProcess([], process.returncode, b"", stderr)
        raise _failure(shadow.repo, ("diff-files",), done)
    _check_warnings(shadow.repo, stderr)
    return answer


def _render_patch(shadow: _Shadow, tracked: BinaryIO, others: bytes, out: BinaryIO) -> int:
    """git's patch of tracked paths (in ``tracked``) merged in path order with the new
    files ``others`` lists, rendered as git renders them; the bytes written to ``out``."""
    width = len(shadow.commit)
    written = 0

    class _Counting:
        def write(self, data: bytes) -> None:
            nonlocal written
            written += len(data)
            out.write(data)

    sink: BinaryIO = _Counting()  # type: ignore[assignment]
    end = tracked.seek(0, os.SEEK_END)
    starts = _chunk_starts(tracked)
    # Bytes here: the patch is bytes, and a nested repository's "dir/" is one path.
    untracked = sorted({p[:-1] if p.endswith(b"/") else p for p in _split_z(others)})
    attributes = _diff_attributes(shadow, untracked) if untracked else {}
    keyed: list[tuple[bytes, int, int]] = [(path, 0, n) for n, (_, path) in enumerate(starts)]
    keyed += [(path, 1, -1) for path in untracked]
    # git's own order is byte order of the path; a deletion precedes a re-creation.
    keyed.sort(key=lambda entry: (entry[0], entry[1]))
    for path, kind, number in keyed:
        if kind == 0:
            stop = starts[number + 1][0] if number + 1 < len(starts) else end
            _copy_range(tracked, starts[number][0], stop, sink)
        else:
            _write_new_file(shadow.repo, path, width, attributes.get(path, b"unspecified"), sink)
    return written


def diff_patch(repo: Path, base: str, excluded: Sequence[str] = ()) -> str:
    """``base`` .. working tree as one unified git patch (see :func:`write_diff_patch`).

    In memory, for small trees and tests; a context build streams the patch to disk
    instead. Bytes that are not UTF-8 become U+FFFD: the patch is for reading.
    """
    buffer = io.BytesIO()
    write_diff_patch(repo, base, buffer, excluded)
    return buffer.getvalue().decode("utf-8", "replace")


# --- the etalon checkout ---------------------------------------------------------------


def _default_cache() -> Path:
    return _cache_root() / "etalons"


def _safe_parts(path: bytes) -> list[bytes]:
    parts = path.split(b"/")
    if any(part in (b"", b".", b"..") for part in parts):
        raise RepoError(f"refusing to materialise an unsafe path {os.fsdecode(path)!r}")
    return parts


def _write_tree(repo: Path, tree: str, dest: Path, refs: _Refs) -> None:
    """Write ``tree``'s files under ``dest`` straight from git's object store.

    Not ``git archive``: it honours the tree's ``export-ignore``/``export-subst``
    attributes (a project that keeps ``/tests export-ignore`` would lose its tests),
    while the etalon must be the tree exactly. ``ls-tree`` + ``cat-file --batch``
    read objects only; nothing is written into the clone.
    """
    done = refs.run("ls-tree", "-r", "-t", "-z", "--full-tree", tree)
    if done.returncode != 0:
        raise _failure(repo, ("ls-tree",), done)
    listing = done.stdout
    entries: list[tuple[bytes, bytes, bytes]] = []
    trees = [tree.encode("ascii")]
    for item in _split_z(listing):
        meta, _, path = item.partition(b"\t")
        mode, kind, object_id = meta.split(b" ")
        if kind == b"tree":
            trees.append(object_id)
        else:
            entries.append((mode, object_id, path))
    # git never checks a stored object against its id, and the store is the agent's: every tree
    # ls-tree walked is hashed before a file is written, every blob as it is written.
    _verify_objects(repo, refs, b"tree", trees)
    blobs = [entry for entry in entries if entry[0] != b"160000"]
    root = os.fsencode(dest)
    made: set[bytes] = {b""}
    links: set[bytes] = set()  # lower-cased: a case-insensitive disk must not write through one

    def folder(parts: list[bytes]) -> bytes:
        for depth in range(1, len(parts)):
            prefix = b"/".join(parts[:depth])
            if prefix.lower() in links:
                raise RepoError(
                    f"refusing to write {os.fsdecode(b'/'.join(parts))!r} through a symlink"
                )
            if prefix not in made:
                os.makedirs(os.path.join(root, prefix), exist_ok=True)
                made.add(prefix)
        return os.path.join(root, b"/".join(parts))

    for mode, _object_id, path in entries:
        if mode == b"160000":  # a submodule: an empty folder, as `git archive` leaves it
            os.makedirs(folder(_safe_parts(path) + [b"."]), exist_ok=True)
    if not blobs:
        return
    process = subprocess.Popen(
        _argv(("cat-file", "--batch")),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(refs.dir, None),
        cwd=refs.dir,
    )
    requests, answers = process.stdin, process.stdout
    assert requests is not None and answers is not None

    def feed() -> None:
        # From a thread: git answers while we still write, so neither pipe fills up.
        try:
            requests.write(b"".join(object_id + b"\n" for _, object_id, _ in blobs))
        except BrokenPipeError:
            pass
        finally:
            try:
                requests.close()
            except BrokenPipeError:
                pass

    seconds = git_timeout()
    stopped = threading.Event()

    def stop() -> None:  # a git that holds on past its time is killed: the reads below end
        stopped.set()
        process.kill()

    watchdog = threading.Timer(seconds, stop)
    watchdog.daemon = True
    feeder = threading.Thread(target=feed)
    feeder.start()
    watchdog.start()
    read_all = False
    try:
        for mode, object_id, path in blobs:
            header = answers.readline().split(b" ")
            if len(header) != 3 or header[0] != object_id or not header[2].strip().isdigit():
                raise RepoError(f"git cat-file could not read {os.fsdecode(path)!r} in {repo}")
            size = int(header[2])
            data = answers.read(size + 1)
            if len(data) != size + 1:  # git stopped mid-object: never cache half a file
                raise RepoError(f"git cat-file could not read {os.fsdecode(path)!r} in {repo}")
            data = data[:-1]
            if _hash_object(b"blob", data, len(object_id)) != object_id:
                raise _forged(repo, object_id, path)
            target = folder(_safe_parts(path))
            if mode == b"120000":
                os.symlink(data, target)
                links.add(path.lower())
                continue
            with open(target, "wb") as handle:
                handle.write(data)
            # Read-only: the cache is shared by every run with this tree.
            os.chmod(target, 0o555 if mode == b"100755" else 0o444)
        read_all = True
    except RepoError:
        if stopped.is_set():
            raise _timed_out(repo, ("cat-file",), seconds) from None
        raise
    finally:
        if not read_all and process.poll() is None:
            process.kill()  # a git still waiting on an object would hold process.wait() for ever
        answers.close()  # before the join: a failed read must not leave the feeder blocked
        feeder.join()
        process.wait()
        watchdog.cancel()


def _hash_object(kind: bytes, data: bytes, width: int) -> bytes:
    """The id git gives an object of ``kind`` holding ``data`` (SHA-1, or SHA-256 at 64 digits)."""
    header = kind + b" " + str(len(data)).encode("ascii") + b"\0"
    digest = hashlib.sha256 if width == 64 else hashlib.sha1
    return digest(header + data).hexdigest().encode("ascii")


def _forged(repo: Path, object_id: bytes, path: bytes | None = None) -> RepoError:
    where = f" ({os.fsdecode(path)!r})" if path else ""
    return RepoError(
        f"{repo}: the object {object_id.decode('ascii', 'replace')}{where} does not hold what its "
        "id names: the clone's object store was rewritten, so its base tree cannot be trusted"
    )


def _verify_objects(repo: Path, refs: _Refs, kind: bytes, ids: Sequence[bytes]) -> None:
    """Raise :class:`RepoError` unless each object in ``ids`` hashes to its id."""
    if not ids:
        return
    done = refs.run("cat-file", "--batch", input=b"".join(i + b"\n" for i in ids))
    if done.returncode != 0:
        raise _failure(repo, ("cat-file",), done)
    answers = io.BytesIO(done.stdout)
    for object_id in ids:
        header = answers.readline().rstrip(b"\n").split(b" ")
        if len(header) != 3 or header[0] != object_id or header[1] != kind:
            raise _forged(repo, object_id)
        size = int(header[2])
        data = answers.read(size + 1)[:size]
        if len(data) != size or _hash_object(kind, data, len(object_id)) != object_id:
            raise _forged(repo, object_id)


def materialise_etalon(repo: Path, rev: str, cache: Path | None = None) -> Path:
    """The tree ``rev`` names, as plain files in a content-addressed cache folder.

    ``<cache>/<tree id>/`` (default ``$XDG_CACHE_HOME/trysquare/etalons``, else
    ``~/.cache/...``), reused when present. Written beside it under a temporary name,
    then renamed into place: a reader never sees half a tree, and a concurrent
    materialiser losing the race just drops its copy. Files are read-only (the folder
    is shared by every run at that tree); folders stay writable so the cache can be
    deleted. Never a worktree of the clone: nothing is written into it.
    """
    repo = Path(repo)
    if not is_git_repo(repo):
        raise RepoError(f"{repo} is not a git repository")
    tree = _peeled_without_git(repo, rev, b"tree")
    if tree is not None:
        target = (Path(cache) if cache is not None else _default_cache()) / tree
        if target.is_dir():
            return target  # materialised before: nothing to ask git
    with _Refs(repo) as refs:
        done = refs.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{tree}}")
        if done.returncode != 0 or not done.stdout.strip():
            raise RepoError(f"etalon {rev!r} does not resolve in {repo}")
        tree = done.stdout.decode("ascii").strip()
        _verify_commit_tree(repo, refs, rev, tree)
        return _materialise(repo, tree, cache, refs)


def _verify_commit_tree(repo: Path, refs: _Refs, rev: str, tree: str) -> None:
    """Where ``rev`` names a commit, that its object hashes to its id and names ``tree``: a
    commit rewritten under its id must not hand another tree to the etalon."""
    done = refs.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if done.returncode != 0 or not done.stdout.strip():
        return  # a tree named directly: the trees below are checked as they are read
    commit = done.stdout.strip()
    _verify_objects(repo, refs, b"commit", [commit])
    shown = refs.run("cat-file", "commit", commit.decode("ascii"))
    if not shown.stdout.startswith(b"tree " + tree.encode("ascii") + b"\n"):
        raise _forged(repo, commit)


def _materialise(repo: Path, tree: str, cache: Path | None, refs: _Refs) -> Path:
    root = Path(cache) if cache is not None else _default_cache()
    target = root / tree
    if target.is_dir():
        return target
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{tree}.", dir=root))
    try:
        _write_tree(repo, tree, scratch, refs)
        os.chmod(scratch, 0o755)
        try:
            os.rename(scratch, target)
        except OSError:
            if not target.is_dir():
                raise
            shutil.rmtree(scratch)  # another process materialised it first: same content
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return target


# --- a throwaway copy for a test suite -------------------------------------------------


# A sparse file is copied hole for hole where the kernel says where the data is
# (SEEK_DATA/SEEK_HOLE); where it cannot, a sparse file above this size is refused
# rather than written out as gigabytes of zeros.
SPARSE_COPY_LIMIT = 256 * 1024 * 1024


def _copy_sparse(src: bytes, dst: bytes, size: int) -> None:
    """Copy only the data extents of ``src``: the copy takes no more disk than the original."""
    source = os.open(src, os.O_RDONLY)
    try:
        target = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(target, size)
            offset = 0
            while offset < size:
                try:
                    start = os.lseek(source, offset, os.SEEK_DATA)
                except OSError as error:
                    if error.errno == errno.ENXIO:
                        break  # only a hole remains
                    raise
                end = os.lseek(source, start, os.SEEK_HOLE)
                os.lseek(source, start, os.SEEK_SET)
                os.lseek(target, start, os.SEEK_SET)
                left = end - start
                while left > 0:
                    block = os.read(source, min(_BLOCK, left))
                    if not block:
                        break
                    os.write(target, block)
                    left -= len(block)
                offset = end
        finally:
            os.close(target)
    except (AttributeError, OSError) as error:
        if isinstance(error, OSError) and error.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise
        if size > SPARSE_COPY_LIMIT:
            raise RepoError(
                f"refusing to copy {os.fsdecode(src)!r}: a sparse file of {size} bytes, and this "
                "file system cannot say where its holes are"
            ) from None
        shutil.copyfile(src, dst)
    finally:
        os.close(source)


def _skip_git(_folder: object, names: list[bytes] | list[str]) -> set[bytes | str]:
    return {name for name in names if name in (".git", b".git")}


def copy_tree(repo: Path, dest: Path) -> Path:
    """Copy the working tree's ``files`` (tracked + untracked-not-ignored) into ``dest``.

    What the test suite runs on is what validators see as ``files``: ignored files
    (``node_modules``, build output, caches) are left behind — ``prepare`` rebuilds
    them — and ``.git`` is excluded (a suite must not reach the clone's history, and
    copying it would dominate the cost). Symlinks stay links, file modes are kept,
    a submodule or nested repository is copied whole without its ``.git``. ``dest``
    must not exist or be empty.
    """
    repo, dest = Path(repo), Path(dest)
    paths = sorted(os.fsencode(p) for p in working_files(repo))
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise RepoError(f"cannot copy {repo} into {dest}: it is not empty")
    source, target = os.fsencode(repo), os.fsencode(dest)
    folders = {path.rpartition(b"/")[0] for path in paths} - {b""}
    for folder in sorted(folders):
        os.makedirs(os.path.join(target, folder), exist_ok=True)

    def copy(path: bytes) -> None:
        src, dst = os.path.join(source, path), os.path.join(target, path)
        try:
            info = os.lstat(src)
        except FileNotFoundError:
            return  # deleted since it was listed
        if stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(src), dst)
        elif stat.S_ISDIR(info.st_mode):
            # bytes paths: names that are not valid UTF-8 are copied as they are.
            shutil.copytree(src, dst, symlinks=True, ignore=_skip_git)  # type: ignore[type-var, arg-type]
        elif stat.S_ISREG(info.st_mode):
            if info.st_blocks * 512 < info.st_size:
                _copy_sparse(src, dst, info.st_size)  # holes stay holes
            else:
                shutil.copyfile(src, dst)  # sendfile/copy_file_range: no Python-level loop
            os.chmod(dst, stat.S_IMODE(info.st_mode))

    # Copying is system-call bound: threads overlap it well.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=io_workers()) as pool:
        for _ in pool.map(copy, paths, chunksize=64):
            pass
    return dest
