"""What changed: the paths a run touched since its base, and what its working tree holds.

In the shadow, HEAD = index = base: ``git status -uno`` is base -> working tree for
every path tracked at base, and ``ls-files --others --exclude-from`` lists what is new.
``touched`` compares ``base`` with the working tree, never the history: an agent commit
reverted in the working tree touches nothing.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from trysquare.errors import RepoError
from trysquare.git.dotgit import _HEX, _git_dirs, is_git_repo
from trysquare.git.refs import resolve_commit
from trysquare.git.running import _failure, _names, _run
from trysquare.git.shadow import _mkcache, _Shadow, _write_shadow

_ABSENT = "000000"


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
    return {path.removesuffix("/") for path in _names(data)}


def _gone(status: _Status) -> set[str]:
    """Paths of the base tree no longer in the working tree, as ``status`` says."""
    return {path for path, entry in status.entries.items() if entry[1] == _ABSENT}


def _files(at_base: bytes, gone: set[str], untracked: set[str]) -> set[str]:
    """Paths at base (``at_base``, NUL-ended) still on disk, plus new not-ignored ones."""
    present = set(_names(at_base))
    present -= gone
    present |= untracked
    # A tracked file replaced by a folder of untracked files is a folder now, not a file.
    for path in untracked:
        cut = path.rfind("/")
        while cut > 0:
            present.discard(path[:cut])
            cut = path.rfind("/", 0, cut)
    return present


def _open_shadow(
    repo: Path, base: str, excluded: Sequence[str], *, shared: bool = False
) -> _Shadow:
    """The shadow to read ``repo`` against ``base`` through; with ``shared``, one that
    only reads (no ``status``): the base's own folder, no folder built per clone."""
    repo = Path(repo)
    if not is_git_repo(repo):
        raise RepoError(f"{repo} is not a git repository")
    if shared:
        is_full_id = _HEX.match(base.encode("ascii", "replace"))
        # A full id is checked to be a commit when its base folder is built (or was).
        return _Shadow.shared(repo, base if is_full_id else resolve_commit(repo, base), excluded)
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
    out = shadow.status()
    status = _Status(out[0])
    untracked = _untracked(out[1])
    touched = set(status.entries) | untracked
    return touched, (_files(shadow.paths(), _gone(status), untracked) if files else set())


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


def working_files(repo: Path, excluded: Sequence[str] = ()) -> frozenset[str]:
    """``files``: what the working tree holds now, tracked or new and not ignored.

    Ignore rules are those of the clone's HEAD commit (there is no base here).
    """
    repo = Path(repo)
    shadow = _shadow_at_head(repo, excluded)
    if shadow is None:
        return frozenset(_unborn_files(repo))
    shadow.refuse_waits()
    status, others = shadow.status()
    return frozenset(_files(shadow.paths(), _gone(_Status(status)), _untracked(others)))


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
