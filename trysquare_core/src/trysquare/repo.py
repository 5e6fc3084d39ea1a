"""The one core module that knows git: what a measured clone holds and how it changed.

Everything trysquare reads from a measured clone goes through here, and nothing
here writes into it — ``.git`` included. Only commands that never write are used:
``git status`` under ``GIT_OPTIONAL_LOCKS=0`` (it refreshes stale stat info in
memory only), plumbing (``diff-index``, ``diff-tree``, ``ls-files``, ``ls-tree``,
``cat-file``, ``hash-object`` without ``-w``) — never the porcelain ``git diff``,
which rewrites ``.git/index`` whatever the environment says. Every call also runs
with ``core.fsmonitor`` off (an agent can edit ``.git/config``; it must not make us
run a program) and without the caller's repository-locating variables (a
``GIT_DIR`` inherited from a hook must not redirect us).

Paths are POSIX, relative to the repository root, decoded with
:func:`os.fsdecode`. Stdlib only: ``trysquare.assay`` imports this module.

- ``touched`` (:func:`changed_files`) compares ``base`` with the working tree, never
  the history: an agent commit reverted in the working tree touches nothing.
- ``files`` (:func:`working_files`) is what the working tree holds now.
- :func:`touched_and_files` computes both from one ``git status`` pass: what a
  context build should call.
- :func:`diff_patch` is ``git diff <base>`` (as ``diff-index -p``) plus untracked
  files rendered exactly as ``git diff --no-index /dev/null <file>`` renders them.
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
    "worktree_status",
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


def _run(
    repo: Path, args: Sequence[str], input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
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


def _failure(
    repo: Path, args: Sequence[str], done: subprocess.CompletedProcess[bytes]
) -> RepoError:
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
    for args, done in zip(calls, results, strict=True):
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


def _names(data: bytes) -> list[str]:
    """NUL-separated git output as str paths: decoded once, whole (20k paths cost ~1 ms
    this way, ~10 ms one by one). Undecodable bytes survive as surrogates, like
    :func:`os.fsdecode`.
    """
    items = os.fsdecode(data).split("\0")
    if items and items[-1] == "":
        items.pop()
    return items


# --- touched and files -----------------------------------------------------------------
#
# One `git status` pass (HEAD -> index -> working tree, untracked files included)
# composed with `git diff-tree base HEAD` (the agent's commits, a cheap tree-to-tree
# walk). `git status` is the one porcelain that honours GIT_OPTIONAL_LOCKS=0 (it
# refreshes stale stat info in memory and writes nothing), and it stats and walks the
# tree once: the two sets cost about one `git status`.

_STATUS_ARGS = (
    "status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames",
    "--ignore-submodules=none",
)  # fmt: skip
_CACHED_ARGS = ("ls-files", "-z", "-t", "--cached")
_OTHERS_ARGS = ("ls-files", "-z", "--others", "--exclude-standard")
_ABSENT = "000000"
_FILE_MODES = ("100644", "100755", "120000")


def _tree_diff_args(base: str, head: str = "HEAD") -> tuple[str, ...]:
    return (
        "diff-tree",
        "-r",
        "-z",
        "--no-renames",
        "--no-abbrev",
        "--end-of-options",
        base,
        head,
        "--",
    )


def _parse_raw(data: bytes) -> dict[str, tuple[str, str, str, str, str]]:
    """``--raw -z`` -> {path: (status, old mode, old id, new mode, new id)}."""
    entries: dict[str, tuple[str, str, str, str, str]] = {}
    items = _names(data)
    for i in range(0, len(items) - 1, 2):
        # ":<old mode> <new mode> <old id> <new id> <status>", then the path
        old_mode, new_mode, old_id, new_id, status = items[i][1:].split(" ")
        entries[items[i + 1]] = (status[:1], old_mode, old_id, new_mode, new_id)
    return entries


class _Status:
    """``git status --porcelain=v2 -z``, parsed."""

    __slots__ = ("entries", "untracked", "unmerged")

    def __init__(self, data: bytes) -> None:
        # path -> (XY, HEAD mode, index mode, tree mode, HEAD id, index id)
        self.entries: dict[str, tuple[str, str, str, str, str, str]] = {}
        self.untracked: set[str] = set()
        self.unmerged: set[str] = set()
        items = _names(data)
        i = 0
        while i < len(items):
            item = items[i]
            kind = item[:1]
            if kind == "1":
                _, xy, _sub, m_head, m_index, m_tree, h_head, h_index, path = item.split(" ", 8)
                self.entries[path] = (xy, m_head, m_index, m_tree, h_head, h_index)
            elif kind == "?":
                # A nested repository is listed as "dir/": one path, like a gitlink.
                path = item[2:]
                self.untracked.add(path[:-1] if path.endswith("/") else path)
            elif kind == "u":
                self.unmerged.add(item.split(" ", 10)[10])
            elif kind == "2":  # a rename, despite --no-renames: both paths changed
                self.unmerged.add(item.split(" ", 9)[9])
                self.unmerged.add(items[i + 1])
                i += 1
            i += 1


def _blob_id(data: bytes, width: int) -> str:
    algo = hashlib.sha256 if width == 64 else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data).hexdigest()


def _worktree_ids(repo: Path, paths: Iterable[str], width: int) -> dict[str, tuple[str, str]]:
    """{path: (git mode, blob id)} of working-tree files and links, as git would store them.

    Regular files are hashed by ``git hash-object`` (no ``-w``: nothing written), so
    clean filters and end-of-line conversion count as git counts them.
    """
    found: dict[str, tuple[str, str]] = {}
    regular: list[tuple[str, str]] = []
    for path in paths:
        full = os.path.join(repo, path)
        try:
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                found[path] = ("120000", _blob_id(os.fsencode(os.readlink(full)), width))
            elif stat.S_ISREG(info.st_mode):
                regular.append((path, "100755" if info.st_mode & stat.S_IXUSR else "100644"))
        except OSError:
            continue
    if regular:
        # --stdin-paths takes one path a line, C-quoted when it needs it.
        paths_in = b"".join(_quote(os.fsencode(p)) + b"\n" for p, _ in regular)
        ids = git(repo, "hash-object", "--stdin-paths", input=paths_in).decode("ascii").split()
        for (path, mode), object_id in zip(regular, ids, strict=True):
            found[path] = (mode, object_id)
    return found


_UNKNOWN = ("?", "?")  # on disk, content not read by git: hashed only when it matters


def _touched(
    repo: Path, commits: dict[str, tuple[str, str, str, str, str]], status: _Status
) -> set[str]:
    """Paths whose (mode, id) in the working tree differs from base.

    ``commits`` is base -> HEAD; ``status`` is HEAD -> index -> working tree. A path
    in neither is the same in all four places.
    """
    touched = set(status.unmerged)
    unsure: dict[str, tuple[str, str]] = {}
    width = 40
    for path in commits.keys() | status.entries.keys() | status.untracked:
        if path in touched:
            continue
        entry = status.entries.get(path)
        # At base: what the agent's commits started from, else HEAD's own version.
        if path in commits:
            _, b_mode, b_id, h_mode, h_id = commits[path]
            width = len(b_id)
        elif entry is not None:
            b_mode, b_id = entry[1], entry[4]
        else:
            b_mode, b_id = _ABSENT, ""
        base = None if b_mode == _ABSENT else (b_mode, b_id)
        # In the working tree.
        tree: tuple[str, str] | None
        if path in status.untracked:
            tree = _UNKNOWN  # on disk, outside the index (perhaps `git rm --cached`)
        elif entry is not None:
            xy, _, m_index, m_tree, _, h_index = entry
            if m_tree == _ABSENT:
                tree = None
            elif xy[1] == ".":
                tree = (m_index, h_index)  # the working tree matches the index
            else:
                tree = (m_tree, "?")
        else:
            tree = None if h_mode == _ABSENT else (h_mode, h_id)
        if tree is None or base is None or tree[1] != "?":
            if tree != base:
                touched.add(path)
        elif tree[0] not in ("?", base[0]) or base[0] not in _FILE_MODES:
            touched.add(path)  # mode differs, or a submodule that moved or is dirty
        else:
            unsure[path] = base  # only reading the file can tell
    if unsure:
        found = _worktree_ids(repo, sorted(unsure), width)
        touched.update(path for path, entry in unsure.items() if found.get(path) != entry)
    return touched


def _files(repo: Path, cached: bytes, status: _Status) -> set[str]:
    """Tracked paths still on disk, plus untracked-not-ignored ones."""
    items = _names(cached)
    # One tag a line: "H " tracked, "S " skip-worktree (sparse checkout), "M " unmerged...
    present = {item[2:] for item in items}
    if cached.startswith(b"S ") or b"\0S " in cached:
        # skip-worktree entries count only when something is actually on disk
        for item in items:
            if item[0] == "S" and not os.path.lexists(os.path.join(repo, item[2:])):
                present.discard(item[2:])
    present.difference_update(path for path, entry in status.entries.items() if entry[3] == _ABSENT)
    present |= status.untracked
    # A tracked file replaced by a folder of untracked files is a folder now, not a file.
    for path in status.untracked:
        cut = path.rfind("/")
        while cut > 0:
            present.discard(path[:cut])
            cut = path.rfind("/", 0, cut)
    return present


def _base_failure(repo: Path, base: str, error: RepoError) -> RepoError:
    # Only on the failure path: say precisely whether the repo or the base is the problem.
    try:
        resolve_commit(repo, base)
    except RepoError as precise:
        return precise
    return error


def _snapshot(repo: Path, base: str, *, files: bool) -> tuple[set[str], set[str]]:
    calls = [_tree_diff_args(base), _STATUS_ARGS] + ([_CACHED_ARGS] if files else [])
    try:
        out = _git_many(repo, *calls)
    except RepoError as error:
        precise = _base_failure(repo, base, error)
        if precise is not error or not _unborn_head(repo):
            raise precise from None
        # HEAD on an orphan branch with no commit yet: base -> "HEAD" is base -> nothing.
        calls[0] = _tree_diff_args(base, _empty_tree(repo))
        out = _git_many(repo, *calls)
    status = _Status(out[1])
    touched = _touched(repo, _parse_raw(out[0]), status)
    return touched, (_files(repo, out[2], status) if files else set())


def _unborn_head(repo: Path) -> bool:
    return _run(repo, ("rev-parse", "--verify", "--quiet", "HEAD")).returncode != 0


def _empty_tree(repo: Path) -> str:
    return git(repo, "hash-object", "-t", "tree", "--stdin", input=b"").decode("ascii").strip()


def changed_files(repo: Path, base: str) -> frozenset[str]:
    """``touched``: every path whose existence, content or mode differs between ``base``
    and the working tree (agent commits, staged, unstaged, deleted, untracked-not-ignored;
    a rename counts both paths; ignored files and ``.git/`` never appear).

    Compares base with the working tree, never the history: a commit the agent made
    and then undid in the working tree touches nothing.
    """
    return frozenset(_snapshot(Path(repo), base, files=False)[0])


def worktree_status(repo: Path) -> dict[str, str]:
    """Every path ``git status`` reports, with its two-letter code (one git call, no write).

    Not a fact of the run (that is :func:`changed_files`): a cheap picture of the
    clone, taken before and after validation, to see a validator writing into it.
    """
    out = git(Path(repo), "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    status: dict[str, str] = {}
    for item in _names(out):
        status[item[3:]] = item[:2]
    return status


def working_files(repo: Path) -> frozenset[str]:
    """``files``: tracked and untracked-not-ignored paths, minus those deleted from disk."""
    repo = Path(repo)
    cached, status = _git_many(repo, _CACHED_ARGS, _STATUS_ARGS)
    return frozenset(_files(repo, cached, _Status(status)))


def touched_and_files(repo: Path, base: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(changed_files(repo, base), working_files(repo))`` for the price of one: a single
    ``git status`` pass serves both. What a context build should call.
    """
    touched, files = _snapshot(Path(repo), base, files=True)
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


def _base_entries(repo: Path, commit: str, paths: Iterable[bytes]) -> dict[bytes, tuple[str, str]]:
    """{path: (mode, object id)} of ``paths`` in ``commit``'s tree."""
    listing = git(repo, "ls-tree", "-z", "--full-tree", commit, "--", *map(os.fsdecode, paths))
    entries: dict[bytes, tuple[str, str]] = {}
    for item in _split_z(listing):
        meta, _, path = item.partition(b"\t")
        mode, _type, object_id = meta.decode("ascii").split(" ")
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
    # Bytes here: the patch is bytes, and a nested repository's "dir/" is one path.
    untracked = sorted({p[:-1] if p.endswith(b"/") else p for p in _split_z(others)})
    if not untracked:
        return patch
    # A file `git rm --cached` but left on disk is a deletion to diff-index and
    # untracked too: identical to its base version, it changed nothing and shows nothing.
    clashes = {path for path, _ in chunks} & set(untracked)
    if clashes:
        originals = _base_entries(repo, base_id, clashes)
        found = _worktree_ids(repo, sorted(map(os.fsdecode, clashes)), len(base_id))
        same = {
            path
            for path in clashes
            if path in originals and found.get(os.fsdecode(path)) == originals[path]
        }
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

    Writes nothing: ``git diff-index -p <base>`` for tracked files (the porcelain
    ``git diff`` would rewrite the index), and untracked files rendered
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
            # bytes paths: names that are not valid UTF-8 are copied as they are.
            shutil.copytree(src, dst, symlinks=True, ignore=_skip_git)  # type: ignore[type-var, arg-type]
        elif stat.S_ISREG(info.st_mode):
            shutil.copyfile(src, dst)  # sendfile/copy_file_range: no Python-level loop
            os.chmod(dst, stat.S_IMODE(info.st_mode))

    # Copying is system-call bound: threads overlap it well.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) * 2)) as pool:
        for _ in pool.map(copy, paths, chunksize=64):
            pass
    return dest
