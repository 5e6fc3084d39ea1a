"""The shadow ``GIT_DIR``: a repository trysquare writes in its own cache, borrowing the clone's objects.

Every git command runs against a shadow, never the clone's ``.git`` (see
:mod:`trysquare.git` for why). This module writes shadows (config, ``info/exclude``,
``info/attributes``, an index read from the base tree), keys and caches them under
``$XDG_CACHE_HOME/trysquare/shadow/``, prunes the ones unused for
``SHADOW_UNUSED_DAYS``, and holds ``_Refs``: a throwaway shadow carrying the clone's
refs for the few commands that must resolve a name.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from trysquare._cache_folder import cache_root
from trysquare._digests import sha256
from trysquare.errors import RepoError
from trysquare.git.dotgit import _HEX, _clone_refs, _git_dirs, _good_ref, _object_format
from trysquare.git.hostile import _check_attribute_files, _check_object_store, _folders_of
from trysquare.git.quoting import _quote
from trysquare.git.running import _failure, _git_many, _run, _split_z

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


_cache_root = cache_root  # the name the git layer and the API know it by


_SHADOW_ROOTS: dict[Path, Path] = {}
_MADE_ROOTS: set[Path] = set()  # _mkcache: made once per process (a prune never removes one)


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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return _run(self.dir, None, self.repo, args, input)


# Bumped when what a shadow holds changes: an older one is never read (and is pruned).
_SHADOW_LAYOUT = b"3"


def _shadow_key(repo: Path, common: Path, commit: str, excluded: Sequence[str]) -> str:
    hasher = sha256(_SHADOW_LAYOUT + b"\0")
    for part in (os.fsencode(Path(repo).resolve()), os.fsencode(common.resolve()), commit.encode()):
        hasher.update(part + b"\0")
    for pattern in excluded:
        hasher.update(os.fsencode(pattern) + b"\n")
    return hasher.hexdigest()[:32]


class _Shadow:
    """The shadow GIT_DIR of one clone at one base commit (see the module docstring)."""

    # The clone's object store named to git per process (a shared shadow), or None: the
    # shadow's own alternates file names it.
    borrowed: bytes | None = None

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
        base = _base_of(self.repo, common, commit)
        scratch = Path(tempfile.mkdtemp(prefix=".build.", dir=root))
        try:
            # The clone's own part (its objects, through alternates) is written here; the
            # base's part is copied from the base folder, built once for every clone.
            _write_shadow(scratch, common, commit.encode("ascii"))
            shutil.copyfile(base / "index", scratch / "index")
            for name in ("folders", "paths", "attributes"):
                shutil.copyfile(base / "info" / name, scratch / "info" / name)
            extra = b"".join(os.fsencode(p) + b"\n" for p in excluded)
            (scratch / "info" / "exclude").write_bytes(
                (base / "info" / "base-exclude").read_bytes() + extra
            )
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

    @classmethod
    def shared(cls, repo: Path, commit: str, excluded: Sequence[str]) -> _Shadow:
        """The base folder of ``commit`` itself as the shadow, for reads that write nothing
        (``diff-files``, ``ls-files``, ``check-attr``): no folder built per clone.

        The base folder holds every file git reads from a GIT_DIR (our config, HEAD at
        base, the index read from the base tree, ``info/attributes``) and no alternates
        file: the clone's objects are named to each git process by
        ``GIT_ALTERNATE_OBJECT_DIRECTORIES``, so no clone's store is ever another's. Not
        for ``status``, which would refresh an index every clone at that base reads.
        """
        repo = Path(repo)
        _git_dir, common = _git_dirs(repo)
        objects = common / "objects"
        _check_object_store(objects)  # what the clone holds now: it may have changed
        shadow = cls.__new__(cls)
        shadow.repo, shadow.commit = repo, commit
        shadow.dir = _base_of(repo, common, commit)
        shadow.borrowed = _borrowed_entry(os.fsencode(objects.resolve()), common)
        shadow.exclude = _exclude_file(shadow.dir, excluded)
        return shadow

    def folders(self) -> list[bytes]:
        """Every folder of the base tree (b"" the top): where git reads ``.gitattributes``
        for a tracked path."""
        return (self.dir / "info" / "folders").read_bytes().split(b"\0")

    def paths(self) -> bytes:
        """Every path of the base tree (what ``ls-files --cached`` would list), NUL-ended:
        written when the shadow was built, so reading them starts no git."""
        return (self.dir / "info" / "paths").read_bytes()

    def has_attributes(self) -> bool:
        """Whether the base commit holds a ``.gitattributes`` rule (else every attribute a
        read depends on is unspecified, by the reset line alone)."""
        return (self.dir / "info" / "attributes").stat().st_size > len(_ATTRIBUTE_RESET)

    def run(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return _run(self.dir, self.repo, self.repo, args, input, self.borrowed)

    def git(self, *args: str, input: bytes | None = None) -> bytes:
        done = self.run(*args, input=input)
        if done.returncode != 0:
            raise _failure(self.repo, args, done)
        return done.stdout

    def refuse_waits(self) -> None:
        """Refuse a ``.gitattributes`` git would wait on, in a folder of the base tree:
        before ``status`` or ``diff-files`` starts."""
        _check_attribute_files(self.repo, self.folders())

    def others(self) -> bytes:
        """``ls-files --others`` (new paths not ignored at base), its complaints about a
        path it could not read failing the read (after :meth:`refuse_waits`)."""
        return _git_many(self.dir, self.repo, _others_args(self), borrowed=self.borrowed)[0]

    def others_if_any(self) -> bytes:
        """:meth:`others`, without starting git when a walk of the work tree finds nothing
        it could list: every entry but folders (and the top ``.git``) a path of the base
        tree. Anything else met, or a folder that cannot be listed, and git is asked."""
        return self.others() if _may_hold_others(self.repo, _base_paths(self.dir)) else b""

    def status(self, *more: Sequence[str]) -> list[bytes]:
        """The outputs of ``git status`` (base -> work tree), ``ls-files --others`` and
        ``more``, run at once (after :meth:`refuse_waits`)."""
        assert self.borrowed is None, "status refreshes the index: never in a shared shadow"
        return _git_many(self.dir, self.repo, _STATUS_ARGS, _others_args(self), *more)


_BASE_PATHS: dict[Path, frozenset[bytes]] = {}
_BASE_PATHS_LOCK = threading.Lock()


def _base_paths(folder: Path) -> frozenset[bytes]:
    """The base tree's paths a shadow folder lists (written once, never changed), as a set:
    read once per process and base (the last few kept)."""
    with _BASE_PATHS_LOCK:
        found = _BASE_PATHS.get(folder)
    if found is None:
        found = frozenset(_split_z((folder / "info" / "paths").read_bytes()))
        with _BASE_PATHS_LOCK:
            _BASE_PATHS[folder] = found
            while len(_BASE_PATHS) > 4:
                _BASE_PATHS.pop(next(iter(_BASE_PATHS)))
    return found


def _may_hold_others(repo: Path, tracked: frozenset[bytes]) -> bool:
    """Whether ``ls-files --others`` could list anything in ``repo``: False only when every
    entry below it (the top ``.git`` aside) is a folder or a path in ``tracked``.

    git lists files, links and nested repositories, never a bare folder, and only what
    ``tracked`` lacks; a nested ``.git``, anything special, a folder that cannot be listed
    (git would say so, and that must fail the read) all answer True. Stops at the first.
    """
    todo: list[tuple[bytes, bytes]] = [(os.fsencode(repo), b"")]
    while todo:
        folder, prefix = todo.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    name = entry.name
                    if not prefix and name == b".git":
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        todo.append((entry.path, prefix + name + b"/"))
                    elif prefix + name not in tracked:
                        return True
        except OSError:
            return True
    return False


def _borrowed_entry(objects: bytes, common: Path) -> bytes:
    """``objects`` as one entry of ``GIT_ALTERNATE_OBJECT_DIRECTORIES`` (":"-separated; an
    entry opening with a double quote is C-quoted)."""
    if b"\n" in objects:
        raise RepoError(f"{common} cannot be read: its path holds a newline")
    if b":" not in objects and not objects.startswith(b'"'):
        return objects
    quoted = _quote(objects)
    return quoted if quoted.startswith(b'"') else b'"' + quoted + b'"'


def _exclude_file(base: Path, excluded: Sequence[str]) -> Path:
    """The ignore rules of a shared shadow: the base's, plus run.toml's ``excluded``
    patterns in a file of their own, named by them (written once, renamed into place)."""
    rules = base / "info" / "base-exclude"
    if not excluded:
        return rules
    extra = b"".join(os.fsencode(p) + b"\n" for p in excluded)
    target = base / "info" / f"exclude-{sha256(extra).hexdigest()[:32]}"
    if not target.is_file():
        with tempfile.NamedTemporaryFile(
            dir=base / "info", prefix=".exclude.", delete=False
        ) as out:
            out.write(rules.read_bytes() + extra)
        os.replace(out.name, target)
    return target


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


def _base_of(repo: Path, common: Path, commit: str) -> Path:
    """The folder holding what a shadow takes from its base commit alone: the index read
    from the base tree, the base's ignore and attribute rules, its folders and its paths.

    Built once per commit and shared by every clone at that commit (the runs of an
    experiment), so a new clone's shadow starts no git. Shared only because every object
    it was read from was hashed against its id first: a clone whose store was rewritten
    under the base's ids cannot hand its own base tree to the runs of other clones.
    """
    root = _shadow_root()
    folder = root / f"base-{_SHADOW_LAYOUT.decode('ascii')}-{commit}"
    if (folder / "index").is_file():
        _touch(folder)
        return folder
    with _BUILDING_BASE:  # contexts built side by side wait for the first build, not repeat it
        if (folder / "index").is_file():
            return folder
        return _build_base(repo, common, commit, root, folder)


_BUILDING_BASE = threading.Lock()


def _build_base(repo: Path, common: Path, commit: str, root: Path, folder: Path) -> Path:
    scratch = Path(tempfile.mkdtemp(prefix=".build.", dir=root))
    try:
        _write_shadow(scratch, common, commit.encode("ascii"))
        ignores, attributes, paths = _base_rules(scratch, repo, commit)
        done = _run(scratch, None, repo, ("read-tree", "--end-of-options", commit))
        if done.returncode != 0:
            raise _failure(repo, ("read-tree",), done)
        (scratch / "objects" / "info" / "alternates").unlink()  # never a GIT_DIR again
        (scratch / "info" / "base-exclude").write_bytes(ignores)
        (scratch / "info" / "folders").write_bytes(b"\0".join(sorted(_folders_of(paths))))
        (scratch / "info" / "paths").write_bytes(b"".join(path + b"\0" for path in paths))
        (scratch / "info" / "attributes").write_bytes(_ATTRIBUTE_RESET + attributes)
        try:
            os.rename(scratch, folder)
        except OSError:
            if not (folder / "index").is_file():
                raise
            shutil.rmtree(scratch, ignore_errors=True)  # another process built it first
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return folder


def _object_id(kind: bytes, data: bytes, width: int) -> bytes:
    """The id git gives an object of ``kind`` holding ``data`` (SHA-1, or SHA-256 at 64 digits)."""
    import hashlib  # OpenSSL's speed for a file's blob, loaded when one is hashed

    digest = hashlib.sha256 if width == 64 else hashlib.sha1
    return digest(kind + b" %d\0" % len(data) + data).hexdigest().encode("ascii")


def _rewritten(repo: Path, object_id: bytes) -> RepoError:
    return RepoError(
        f"{repo}: the object {object_id.decode('ascii', 'replace')} does not hold what its id"
        " names: the clone's object store was rewritten, so its base tree cannot be trusted"
    )


def _read_checked(git_dir: Path, repo: Path, names: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
    """(id, content) of each object ``names`` names, read by one ``cat-file --batch`` and
    each hashed against its id (git itself never checks, and the store is the agent's)."""
    done = _run(git_dir, None, repo, ("cat-file", "--batch"), b"".join(n + b"\n" for n in names))
    if done.returncode != 0:
        raise _failure(repo, ("cat-file",), done)
    out, at, found = done.stdout, 0, []
    for name in names:
        header_end = out.find(b"\n", at)
        header = out[at:header_end].split(b" ")
        if header_end < 0 or len(header) != 3 or not header[2].isdigit():
            raise RepoError(
                f"git cat-file could not read {name.decode('ascii', 'replace')} in {repo}"
            )
        object_id, kind, size = header[0], header[1], int(header[2])
        data = out[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
        if len(data) != size or _object_id(kind, data, len(object_id)) != object_id:
            raise _rewritten(repo, object_id)
        found.append((object_id, data))
    return found


def _base_rules(git_dir: Path, repo: Path, commit: str) -> tuple[bytes, bytes, list[bytes]]:
    """The base commit's .gitignore and .gitattributes files, anchored and joined, and
    the base tree's paths (files, links and gitlinks, in git's order).

    Ordered shallow to deep: in one exclude file the last match wins, as a deeper
    .gitignore wins over its parents. The commit, every tree and every rule file are
    hashed against their ids (:func:`_read_checked`).
    """
    listing = _run(git_dir, None, repo, ("ls-tree", "-r", "-t", "-z", "--full-tree", commit))
    if listing.returncode != 0:
        raise _failure(repo, ("ls-tree",), listing)
    wanted: list[tuple[int, bytes, bytes, bytes]] = []
    paths = []
    trees = []
    for item in _split_z(listing.stdout):
        meta, _, path = item.partition(b"\t")
        if meta.split(b" ")[1] == b"tree":
            trees.append(meta.split(b" ")[2])
            continue
        paths.append(path)
        folder, _, name = path.rpartition(b"/")
        if name in (b".gitignore", b".gitattributes") and meta.startswith(b"100"):
            wanted.append((folder.count(b"/") + bool(folder), folder, name, meta.split(b" ")[2]))
    wanted.sort()
    tip = commit.encode("ascii")
    checked = _read_checked(
        git_dir, repo, [tip, tip + b"^{tree}", *trees, *(oid for *_, oid in wanted)]
    )
    (commit_id, commit_text), (root_tree, _) = checked[0], checked[1]
    if commit_id != tip or not commit_text.startswith(b"tree " + root_tree + b"\n"):
        raise _rewritten(repo, tip)
    ignores: list[bytes] = []
    attributes: list[bytes] = []
    for (_depth, folder, name, _oid), (_, text) in zip(
        wanted, checked[2 + len(trees) :], strict=True
    ):
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
    return b"".join(ignores), b"".join(attributes), paths


#
# In the shadow, HEAD = index = base: `git status -uno` is base -> working tree for
# every path tracked at base (refreshing and keeping the shadow index's stat info,
# which is ours to write), and `ls-files --others --exclude-from` lists what is new.
# The three calls run concurrently, each walking the tree on its own core.

_STATUS_ARGS = (
    "status", "--porcelain=v2", "-z", "--untracked-files=no", "--no-renames",
    "--ignore-submodules=dirty",
)  # fmt: skip


def _others_args(shadow: _Shadow) -> tuple[str, ...]:
    return ("ls-files", "-z", "--others", f"--exclude-from={shadow.exclude}")


def _mkcache() -> Path:
    root = _shadow_root()
    if root not in _MADE_ROOTS:
        root.mkdir(parents=True, exist_ok=True)
        _MADE_ROOTS.add(root)
    return root
