"""The clone's ``.git``, read in Python without running git.

Where the repository is (``.git``, a ``gitdir:`` file, ``commondir``), its object format,
its refs (``refs/replace/`` skipped), a loose object, a tag peeled to its commit, a nested
repository's HEAD: what the shadow needs to be built, and what a symbolic ``base`` can be
resolved from without git ever reading the clone's config.
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path

from trysquare._lazy_pattern import LazyPattern
from trysquare.errors import RepoError
from trysquare.git.hostile import _LOOSE_LIMIT, _read_regular, _read_small

_HEX = LazyPattern(rb"\A(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")


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
    for full, name in _ref_files(os.path.join(os.fspath(common), "refs"), "refs"):
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


def _ref_files(folder: str, name: str) -> Iterator[tuple[str, str]]:
    """(path, ref name) of every entry below ``folder`` that is not a folder, in the order
    of a top-down ``os.walk``: a folder's entries before those of its subfolders, which are
    read in listing order. A link to a folder is not followed; a link to a file is listed
    (read without following, it is no ref). A folder that cannot be listed lists nothing.

    The clone's refs are read for every run (its etalon tag, a symbolic base): plain
    strings here, no path object per entry.
    """
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError:
        return
    folders = []
    for entry in entries:
        try:
            is_folder = entry.is_dir()  # through a link, as os.walk sorts them
        except OSError:
            is_folder = False
        if not is_folder:
            yield entry.path, f"{name}/{entry.name}"
        elif not entry.is_symlink():
            folders.append(entry)
    for entry in folders:
        yield from _ref_files(entry.path, f"{name}/{entry.name}")


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


def _peeled_without_git(repo: Path, rev: str, want: bytes) -> str | None:
    """What ``git rev-parse --verify REV^{commit}`` (``want`` b"commit") or ``^{tree}``
    answers, worked out from the clone's files where that is plain: ``rev`` a full id or
    a simple ref name, every object on the way a loose one that hashes to its id. None
    whenever anything is less plain (packed objects, expressions, short ids, HEAD-like
    names): git is asked then, as before.

    Resolving the base and the etalon tag runs for every run and command: a refs shadow
    and a git process each cost ~5 ms here, this a few file reads.
    """
    found = _peel(repo, rev, want)
    return None if found is None else found[0]


def _commit_and_tree_without_git(repo: Path, rev: str) -> tuple[str, str] | None:
    """``rev^{commit}`` and ``rev^{tree}`` as :func:`_peeled_without_git` answers them, from
    one read of the commit object (an etalon's commit is pinned, its tree checked out)."""
    found = _peel(repo, rev, b"commit")
    if found is None:
        return None
    tree = _header_field(found[1], b"tree")
    return None if tree is None else (found[0], tree)


def _peel(repo: Path, rev: str, want: bytes) -> tuple[str, bytes] | None:
    """:func:`_peeled_without_git`'s answer, with the body of the last object read."""
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
            return oid, body
        if kind == b"tag":
            target = _header_field(body, b"object")
        elif kind == b"commit" and want == b"tree":
            target = _header_field(body, b"tree")
            # As git: the commit's tree id, read, not looked up.
            return None if target is None else (target, body)
        else:
            return None
        if target is None:
            return None
        oid = target
    return None


# A name git's rules turn into a ref (refs/NAME, refs/tags/NAME, refs/heads/NAME, ...):
# no revision syntax, no leading dash or dot, not HEAD-like (root refs live in .git).
_SIMPLE_REF = LazyPattern(r"(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]*[a-z.-][A-Za-z0-9._/-]*\Z")


def _ref_without_git(git_dir: Path, common: Path, name: str) -> str | None:
    """The object id git's rev-parse finds for ref ``name`` among the refs the shadow is given
    (the clone's, replace refs never): the first of its rules that names one. None for a
    name those rules do not cover here (git decides), or one no ref has (git may still
    read it as a short id or a describe name)."""
    if (
        not _SIMPLE_REF.match(name)
        or name.startswith(("/", "."))
        or name.endswith(("/", ".", ".lock"))
    ):
        return None
    if all(c in "0123456789abcdef" for c in name):
        return None  # also a short id: git's own order of trying decides
    if name.split("/", 1)[0] in _SHADOW_ENTRIES:
        return None  # git's first rule reads <shadow>/NAME: one of the shadow's own files
    refs, _head = _clone_refs(git_dir, common)
    for rule in (
        "{}",
        "refs/{}",
        "refs/tags/{}",
        "refs/heads/{}",
        "refs/remotes/{}",
        "refs/remotes/{}/HEAD",
    ):
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
    from trysquare._digests import sha1, sha256  # no OpenSSL for a small object

    digest = sha1 if len(oid) == 40 else sha256
    if digest(content).hexdigest() != oid:
        return None
    return kind, body


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
