"""The one core module that knows git: what a measured clone holds and how it changed.

Everything trysquare reads from a measured clone goes through here, and nothing
here writes into it — ``.git`` included. Every git call runs with
``GIT_OPTIONAL_LOCKS=0`` (so nothing refreshes the index behind our back),
``core.fsmonitor`` off (an agent can edit ``.git/config``; it must not make us run
a program) and the repository-locating variables of the caller's environment
removed (a ``GIT_DIR`` inherited from a hook must not redirect us).

Paths are POSIX, relative to the repository root, decoded with
:func:`os.fsdecode`. Stdlib only: ``trysquare.assay`` imports this module.

- ``touched`` (:func:`changed_files`) compares ``base`` with the working tree, never
  the history: an agent commit reverted in the working tree touches nothing.
- ``files`` (:func:`working_files`) is what the working tree holds now.
- :func:`diff_patch` is ``git diff <base>`` plus untracked files rendered exactly
  as ``git diff --no-index /dev/null <file>`` renders them, without writing.
- :func:`materialise_etalon` writes a reference tree into a shared cache, never a
  worktree of the clone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from trysquare.errors import RepoError

__all__ = [
    "changed_files",
    "copy_tree",
    "diff_patch",
    "git",
    "is_git_repo",
    "materialise_etalon",
    "resolve_commit",
    "touched_and_files",
    "working_files",
]

# Variables that would point git at another repository, index or object store
# (`git rev-parse --local-env-vars`): an inherited one must never redirect us.
_LOCAL_ENV_VARS = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_CONFIG",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_PARAMETERS",
        "GIT_DIR",
        "GIT_GRAFT_FILE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_INTERNAL_SUPER_PREFIX",
        "GIT_NAMESPACE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_OBJECT_DIRECTORY",
        "GIT_PREFIX",
        "GIT_REPLACE_REF_BASE",
        "GIT_SHALLOW_FILE",
        "GIT_WORK_TREE",
    }
)

# Config pinned on every call; the repository's own settings still apply otherwise.
_CONFIG = (
    "-c", "core.fsmonitor=false",  # never run a hook program named by the clone's config
    "-c", "core.quotepath=off",  # readable non-ASCII paths in the patch
    "-c", "diff.suppressBlankEmpty=false",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
)  # fmt: skip

# The patch's options, pinned so a user's diff.* settings cannot change it.
_PATCH_OPTIONS = (
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",  # same view as `touched`: a rename is a deletion plus an addition
    "--ignore-submodules=none",
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

def _env() -> dict[str, str]:
    # Built per call (cheap): a caller that changes os.environ later is honoured.
    env = {k: v for k, v in os.environ.items() if k not in _LOCAL_ENV_VARS}
    env.update(
        GIT_OPTIONAL_LOCKS="0",  # status/diff must not refresh and rewrite .git/index
        GIT_LITERAL_PATHSPECS="1",  # every path we pass is a path, never a pattern
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        LC_ALL="C",  # stable, parseable messages
    )
    return env


def _argv(repo: Path, args: Sequence[str]) -> list[str]:
    return ["git", "-C", os.fspath(repo), *_CONFIG, *args]


def _run(repo: Path, args: Sequence[str], input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            _argv(repo, args),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            env=_env(),
            check=False,
        )
    except FileNotFoundError:
        raise RepoError(f"git is not installed or not on PATH (needed to read {repo})") from None


def _failure(repo: Path, args: Sequence[str], done: subprocess.CompletedProcess[bytes]) -> RepoError:
    lines = [ln for ln in done.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    # The last "fatal:"/"error:" line is git's own one-sentence reason.
    reasons = [ln for ln in lines if ln.startswith(("fatal:", "error:"))] or lines
    reason = reasons[-1].split(":", 1)[-1].strip() if reasons else f"exit status {done.returncode}"
    return RepoError(f"git {args[0] if args else ''} failed in {repo}: {reason}")


def git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    """Run ``git args...`` in ``repo`` without letting it write; return its stdout.

    Raises :class:`RepoError` naming the repository and git's reason on failure.
    """
    done = _run(Path(repo), args, input)
    if done.returncode != 0:
        raise _failure(Path(repo), args, done)
    return done.stdout


def _git_many(repo: Path, *calls: Sequence[str]) -> list[bytes]:
    """Run independent git calls concurrently (each one walks the tree on its own core)."""
    results: list[subprocess.CompletedProcess[bytes] | BaseException | None] = [None] * len(calls)

    def work(index: int) -> None:
        try:
            results[index] = _run(repo, calls[index])
        except BaseException as error:  # re-raised below, in the caller's thread
            results[index] = error

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, len(calls))]
    for thread in threads:
        thread.start()
    work(0)
    for thread in threads:
        thread.join()
    out: list[bytes] = []
    for args, done in zip(calls, results):
        if isinstance(done, BaseException):
            raise done
        assert done is not None
        if done.returncode != 0:
            raise _failure(repo, args, done)
        out.append(done.stdout)
    return out


def is_git_repo(path: Path) -> bool:
    """True when ``path`` is the top of a git working tree (not a folder inside one)."""
    path = Path(path)
    if not path.is_dir():
        return False
    done = _run(path, ("rev-parse", "--is-inside-work-tree", "--show-cdup"))
    if done.returncode != 0:
        if b"safe.directory" in done.stderr:
            # Not "no repository": git refuses a clone owned by someone else; say so.
            raise _failure(path, ("rev-parse",), done)
        return False
    lines = done.stdout.decode("utf-8", "replace").split("\n")
    return lines[0] == "true" and len(lines) > 1 and lines[1] == ""


def resolve_commit(repo: Path, rev: str, *, what: str = "base") -> str:
    """The full object id of the commit ``rev`` names (a sha, short sha, tag, branch)."""
    repo = Path(repo)
    done = _run(repo, ("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"))
    if done.returncode != 0 or not done.stdout.strip():
        if not is_git_repo(repo):
            raise RepoError(f"{repo} is not a git repository")
        raise RepoError(f"{what} {rev!r} does not resolve to a commit in {repo}")
    return done.stdout.decode("ascii").strip()


def _split_z(data: bytes) -> list[bytes]:
    items = data.split(b"\0")
    if items and items[-1] == b"":
        items.pop()
    return items


def _decode(raw: bytes) -> str:
    return os.fsdecode(raw)


# --- touched and files -----------------------------------------------------------------


def _diff_raw_args(base: str) -> tuple[str, ...]:
    # Plumbing, not `git diff`: the porcelain rewrites .git/index to refresh stale stat
    # info (GIT_OPTIONAL_LOCKS does not stop it), while diff-index never writes. The
    # price: a file whose stat info is stale comes back with a null id, checked below.
    return (
        "diff-index", "--raw", "-z", "--no-renames", "--no-abbrev",
        "--ignore-submodules=none", "--end-of-options", base, "--",
    )  # fmt: skip


_OTHERS_ARGS = ("ls-files", "-z", "--others", "--exclude-standard")
_LISTING_ARGS = ("ls-files", "-z", "-t", "--cached", "--deleted", "--others", "--exclude-standard")
_FILE_MODES = (b"100644", b"100755", b"120000")


def _parse_raw(data: bytes) -> dict[bytes, tuple[bytes, bytes, bytes, bytes, bytes]]:
    """``--raw -z`` -> {path: (status, base mode, base id, tree mode, tree id)}."""
    entries: dict[bytes, tuple[bytes, bytes, bytes, bytes, bytes]] = {}
    items = _split_z(data)
    for i in range(0, len(items) - 1, 2):
        meta, path = items[i], items[i + 1]
        # ":<old mode> <new mode> <old id> <new id> <status>"
        old_mode, new_mode, old_id, new_id, status = meta[1:].split(b" ")
        entries[path] = (status[:1], old_mode, old_id, new_mode, new_id)
    return entries


def _untracked(items: Iterable[bytes]) -> set[bytes]:
    # A nested repository is listed as "dir/": one path, like a gitlink.
    return {p[:-1] if p.endswith(b"/") else p for p in items}


def _blob_id(data: bytes, width: int) -> str:
    algo = hashlib.sha256 if width == 64 else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data).hexdigest()


def _worktree_ids(repo: Path, paths: Iterable[bytes], width: int) -> dict[bytes, tuple[bytes, bytes]]:
    """{path: (git mode, blob id)} of working-tree files and links, as git would store them.

    Regular files are hashed by ``git hash-object`` (no ``-w``: nothing written), so
    clean filters and end-of-line conversion count as git counts them.
    """
    found: dict[bytes, tuple[bytes, bytes]] = {}
    regular: list[tuple[bytes, bytes]] = []
    root = os.fsencode(repo)
    for path in paths:
        full = os.path.join(root, path)
        try:
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                found[path] = (b"120000", _blob_id(os.readlink(full), width).encode("ascii"))
            elif stat.S_ISREG(info.st_mode):
                regular.append((path, b"100755" if info.st_mode & stat.S_IXUSR else b"100644"))
        except OSError:
            continue
    if regular:
        # --stdin-paths takes one path a line, C-quoted when it needs it.
        ids = git(repo, "hash-object", "--stdin-paths", input=b"".join(_quote(p) + b"\n" for p, _ in regular))
        for (path, mode), object_id in zip(regular, ids.split()):
            found[path] = (mode, object_id)
    return found


def _touched(repo: Path, raw: bytes, others: set[bytes]) -> set[bytes]:
    changes = _parse_raw(raw)
    touched = set(changes) | others
    unsure: dict[bytes, tuple[bytes, bytes]] = {}
    width = 40
    for path, (status, base_mode, base_id, tree_mode, tree_id) in changes.items():
        width = len(base_id)
        if base_mode not in _FILE_MODES:
            continue
        if status == b"D" and path in others:
            # `git rm --cached` left it on disk: "deleted" for diff-index, and untracked.
            unsure[path] = (base_mode, base_id)
        elif status == b"M" and tree_mode == base_mode and not tree_id.strip(b"0"):
            # Stale stat info: git did not read the file; same content means untouched.
            unsure[path] = (base_mode, base_id)
    if unsure:
        found = _worktree_ids(repo, sorted(unsure), width)
        touched.difference_update(path for path, entry in unsure.items() if found.get(path) == entry)
    return touched


def _listing(repo: Path, listing: bytes) -> tuple[set[bytes], set[bytes]]:
    """``git ls-files -t --cached --deleted --others`` -> (files now present, untracked)."""
    tracked: set[bytes] = set()
    deleted: set[bytes] = set()
    others: list[bytes] = []
    for item in _split_z(listing):
        tag, path = item[:1], item[2:]
        if tag == b"?":
            others.append(path)
        elif tag == b"R":
            deleted.add(path)
        elif tag == b"S":
            # skip-worktree (sparse checkout): present only if something is on disk
            if os.path.lexists(os.path.join(os.fsencode(repo), path)):
                tracked.add(path)
        else:
            tracked.add(path)
    untracked = _untracked(others)
    present = (tracked - deleted) | untracked
    # A tracked file replaced by a folder of untracked files is a folder now, not a file.
    for path in untracked:
        cut = path.rfind(b"/")
        while cut > 0:
            present.discard(path[:cut])
            cut = path.rfind(b"/", 0, cut)
    return present, untracked


def _base_failure(repo: Path, base: str, error: RepoError) -> RepoError:
    # Only on the failure path: say precisely whether the repo or the base is the problem.
    try:
        resolve_commit(repo, base)
    except RepoError as precise:
        return precise
    return error


def changed_files(repo: Path, base: str) -> frozenset[str]:
    """``touched``: every path whose existence, content or mode differs between ``base``
    and the working tree (agent commits, staged, unstaged, deleted, untracked-not-ignored;
    a rename counts both paths; ignored files and ``.git/`` never appear).
    """
    repo = Path(repo)
    try:
        raw, others = _git_many(repo, _diff_raw_args(base), _OTHERS_ARGS)
    except RepoError as error:
        raise _base_failure(repo, base, error) from None
    return frozenset(map(_decode, _touched(repo, raw, _untracked(_split_z(others)))))


def working_files(repo: Path) -> frozenset[str]:
    """``files``: tracked and untracked-not-ignored paths, minus those deleted from disk."""
    repo = Path(repo)
    present, _ = _listing(repo, git(repo, *_LISTING_ARGS))
    return frozenset(map(_decode, present))


def touched_and_files(repo: Path, base: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(changed_files(repo, base), working_files(repo))`` from one concurrent pair of
    git calls: what a context build should use.
    """
    repo = Path(repo)
    try:
        raw, listing = _git_many(repo, _diff_raw_args(base), _LISTING_ARGS)
    except RepoError as error:
        raise _base_failure(repo, base, error) from None
    present, untracked = _listing(repo, listing)
    touched = _touched(repo, raw, untracked)
    return frozenset(map(_decode, touched)), frozenset(map(_decode, present))


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


def _chunks(patch: bytes) -> list[tuple[bytes, bytes]]:
    """Split a ``--no-renames`` patch into (path, text) per file, in git's order.

    A header is the only line that starts with "diff --git ": hunk lines start with
    " ", "+", "-" or "\\", and git quotes any newline inside a path.
    """
    starts: list[int] = []
    if patch.startswith(b"diff --git "):
        starts.append(0)
    at = patch.find(b"\ndiff --git ")
    while at != -1:
        starts.append(at + 1)
        at = patch.find(b"\ndiff --git ", at + 1)
    chunks: list[tuple[bytes, bytes]] = []
    for number, begin in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(patch)
        text = patch[begin:end]
        header = text[len(b"diff --git ") : text.index(b"\n")]
        if header.startswith(b'"'):
            path = _unquote(header, 0)[2:]  # drop "a/"
        else:
            # "a/<p> b/<p>": without renames both sides name the same path.
            width = (len(header) - 5) // 2
            path = header[2 : 2 + width]
        chunks.append((path, text))
    return chunks


def _diff_attributes(repo: Path, paths: Sequence[bytes]) -> dict[bytes, bytes]:
    """The ``diff`` attribute of each path ("unset" for ``-diff``/``binary``)."""
    out = git(repo, "check-attr", "-z", "--stdin", "diff", input=b"".join(p + b"\0" for p in paths))
    items = _split_z(out)
    return {items[i]: items[i + 2] for i in range(0, len(items) - 2, 3)}


def _new_file(repo: Path, path: bytes, width: int, attribute: bytes) -> bytes:
    """An untracked file as ``git diff --no-index /dev/null <path>`` shows it."""
    full = os.path.join(os.fsencode(repo), path)
    try:
        info = os.lstat(full)
    except OSError:
        return b""  # vanished since it was listed
    binary = attribute == b"unset"
    if stat.S_ISLNK(info.st_mode):
        mode, data = b"120000", os.fsencode(os.readlink(full))
    elif stat.S_ISREG(info.st_mode):
        mode = b"100755" if info.st_mode & stat.S_IXUSR else b"100644"
        with open(full, "rb") as handle:
            data = handle.read()
        if attribute != b"set":
            binary = binary or info.st_size > _BIG_FILE or b"\0" in data[:_SNIFF]
    elif stat.S_ISDIR(info.st_mode):
        return _new_repository(full, path)
    else:
        return b""  # a socket or fifo: git lists no content for it either
    a_label, b_label = _quote(b"a/" + path), _quote(b"b/" + path)
    blob = _blob_id(data, width)[:_ABBREV].encode("ascii")
    out = [b"diff --git %s %s\n" % (a_label, b_label), b"new file mode %s\n" % mode]
    out.append(b"index %s..%s\n" % (b"0" * _ABBREV, blob))
    if not data:
        return b"".join(out)
    if binary:
        out.append(b"Binary files /dev/null and %s differ\n" % b_label)
        return b"".join(out)
    # git ends a label holding a space with a tab, so `patch` reads the name whole.
    out.append(b"--- /dev/null\n+++ %s%s\n" % (b_label, b"\t" if b" " in b_label else b""))
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    if complete:
        lines.pop()
    out.append(b"@@ -0,0 +1 @@\n" if len(lines) == 1 else b"@@ -0,0 +1,%d @@\n" % len(lines))
    out.extend(b"+" + line + b"\n" for line in lines)
    if not complete:
        out.append(b"\\ No newline at end of file\n")
    return b"".join(out)


def _new_repository(full: bytes, path: bytes) -> bytes:
    """An untracked nested repository, shown as git shows a newly added gitlink."""
    done = _run(Path(os.fsdecode(full)), ("rev-parse", "--verify", "--quiet", "HEAD"))
    head = done.stdout.strip()
    if done.returncode != 0 or not head:
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


def _base_entries(repo: Path, commit: str, paths: Iterable[bytes]) -> dict[bytes, tuple[bytes, bytes]]:
    """{path: (mode, object id)} of ``paths`` in ``commit``'s tree."""
    listing = git(repo, "ls-tree", "-z", "--full-tree", commit, "--", *map(os.fsdecode, paths))
    entries: dict[bytes, tuple[bytes, bytes]] = {}
    for item in _split_z(listing):
        meta, _, path = item.partition(b"\t")
        mode, _type, object_id = meta.split(b" ")
        entries[path] = (mode, object_id)
    return entries


def _diff_patch_bytes(repo: Path, base: str) -> bytes:
    try:
        commit, patch, others = _git_many(
            repo,
            ("rev-parse", "--verify", "--end-of-options", f"{base}^{{commit}}"),
            ("diff-index", "-p", *_PATCH_OPTIONS, "--end-of-options", base, "--"),
            _OTHERS_ARGS,
        )
    except RepoError as error:
        raise _base_failure(repo, base, error) from None
    base_id = commit.decode("ascii").strip()
    chunks = _chunks(patch)
    untracked = sorted(_untracked(_split_z(others)))
    if not untracked:
        return patch
    # A file `git rm --cached` but left on disk is a deletion to `git diff <base>` and
    # untracked too: identical to its base version, it changed nothing and shows nothing.
    clashes = {path for path, _ in chunks} & set(untracked)
    if clashes:
        originals = _base_entries(repo, base_id, clashes)
        found = _worktree_ids(repo, sorted(clashes), len(base_id))
        same = {path for path in clashes if path in originals and found.get(path) == originals[path]}
        chunks = [(path, text) for path, text in chunks if path not in same]
        untracked = [path for path in untracked if path not in same]
    attributes = _diff_attributes(repo, untracked) if untracked else {}
    width = len(base_id)
    keyed = [(path, 0, text) for path, text in chunks]
    keyed += [
        (path, 1, _new_file(repo, path, width, attributes.get(path, b"unspecified")))
        for path in untracked
    ]
    # git's own order is byte order of the path; a deletion precedes a re-creation.
    keyed.sort(key=lambda entry: (entry[0], entry[1]))
    return b"".join(text for _, _, text in keyed)


def diff_patch(repo: Path, base: str) -> str:
    """``base`` .. working tree as one unified git patch, untracked files included as new
    files, binary files as git shows them ("Binary files ... differ"), sorted by path.

    Writes nothing: ``git diff <base>`` for tracked files, and untracked files rendered
    here byte for byte as ``git diff --no-index /dev/null <file>`` renders them (no
    ``git add``, no temporary index, no object written). Bytes that are not UTF-8
    become U+FFFD: the patch is for reading.
    """
    return _diff_patch_bytes(Path(repo), base).decode("utf-8", "replace")


# --- the etalon checkout ---------------------------------------------------------------


def _default_cache() -> Path:
    root = os.environ.get("XDG_CACHE_HOME", "")
    # XDG: a relative value is invalid and must be ignored.
    base = Path(root) if root and os.path.isabs(root) else Path.home() / ".cache"
    return base / "trysquare" / "etalons"


def _safe_parts(path: bytes) -> list[bytes]:
    parts = path.split(b"/")
    if any(part in (b"", b".", b"..") for part in parts):
        raise RepoError(f"refusing to materialise an unsafe path {os.fsdecode(path)!r}")
    return parts


def _write_tree(repo: Path, tree: str, dest: Path) -> None:
    """Write ``tree``'s files under ``dest`` straight from git's object store.

    Not ``git archive``: it honours the tree's ``export-ignore``/``export-subst``
    attributes (a project that keeps ``/tests export-ignore`` would lose its tests),
    while the etalon must be the tree exactly. ``ls-tree`` + ``cat-file --batch``
    read objects only; nothing is written into the clone.
    """
    listing = git(repo, "ls-tree", "-r", "-z", "--full-tree", tree)
    entries: list[tuple[bytes, bytes, bytes]] = []
    for item in _split_z(listing):
        meta, _, path = item.partition(b"\t")
        mode, _type, object_id = meta.split(b" ")
        entries.append((mode, object_id, path))
    blobs = [entry for entry in entries if entry[0] != b"160000"]
    root = os.fsencode(dest)
    made: set[bytes] = {b""}
    links: set[bytes] = set()  # lower-cased: a case-insensitive disk must not write through one

    def folder(parts: list[bytes]) -> bytes:
        for depth in range(1, len(parts)):
            prefix = b"/".join(parts[:depth])
            if prefix.lower() in links:
                raise RepoError(f"refusing to write {os.fsdecode(b'/'.join(parts))!r} through a symlink")
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
        _argv(repo, ("cat-file", "--batch")),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
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

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        for mode, object_id, path in blobs:
            header = answers.readline().split(b" ")
            if len(header) != 3 or header[0] != object_id:
                raise RepoError(f"git cat-file could not read {os.fsdecode(path)!r} in {repo}")
            data = answers.read(int(header[2]) + 1)[:-1]
            target = folder(_safe_parts(path))
            if mode == b"120000":
                os.symlink(data, target)
                links.add(path.lower())
                continue
            with open(target, "wb") as handle:
                handle.write(data)
            # Read-only: the cache is shared by every run with this tree.
            os.chmod(target, 0o555 if mode == b"100755" else 0o444)
    finally:
        answers.close()  # first: a failed read must not leave the feeder blocked
        feeder.join()
        process.wait()


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
    done = _run(repo, ("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{tree}}"))
    if done.returncode != 0 or not done.stdout.strip():
        if not is_git_repo(repo):
            raise RepoError(f"{repo} is not a git repository")
        raise RepoError(f"etalon {rev!r} does not resolve in {repo}")
    tree = done.stdout.decode("ascii").strip()
    root = Path(cache) if cache is not None else _default_cache()
    target = root / tree
    if target.is_dir():
        return target
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{tree}.", dir=root))
    try:
        _write_tree(repo, tree, scratch)
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
            shutil.copytree(src, dst, symlinks=True, ignore=_skip_git)
        elif stat.S_ISREG(info.st_mode):
            shutil.copyfile(src, dst)  # sendfile/copy_file_range: no Python-level loop
            os.chmod(dst, stat.S_IMODE(info.st_mode))

    # Copying is system-call bound: threads overlap it well.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) * 2)) as pool:
        for _ in pool.map(copy, paths, chunksize=64):
            pass
    return dest
