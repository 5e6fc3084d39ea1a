"""Questions about commits: what a name resolves to, what a commit holds, what lies between two.

Answered in Python from the clone's ``.git`` where that is enough, else by git run in a
throwaway shadow holding the clone's refs (never the clone's own ``.git``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from trysquare.errors import RepoError
from trysquare.git.dotgit import _peeled_without_git

if TYPE_CHECKING:
    import subprocess

# The shadow (and, with it, tempfile) and git's running are imported by the questions that
# run git: a base commit named by its id, or a ref the clone's files answer, runs none.


def git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    """Run a read-only ``git args...`` on ``repo``'s objects and refs; return its stdout.

    Runs against a shadow holding a copy of the clone's refs, never the clone's own
    ``.git`` (whose config could name programs). Raises :class:`RepoError` naming the
    repository and git's reason on failure.
    """
    from trysquare.git.running import _failure
    from trysquare.git.shadow import _Refs

    with _Refs(Path(repo)) as refs:
        done = refs.run(*args, input=input)
    if done.returncode != 0:
        raise _failure(Path(repo), args, done)
    return done.stdout


def resolve_commit(repo: Path, rev: str, *, what: str = "base") -> str:
    """The full object id of the commit ``rev`` names (a sha, short sha, tag, branch).

    Refs are read from the clone's files (replace refs never), so a name resolves
    as it does now: a caller that must not let it move pins the answer.
    """
    repo = Path(repo)
    found = _peeled_without_git(repo, rev, b"commit")
    if found is not None:
        return found
    from trysquare.git.shadow import _Refs

    with _Refs(repo) as refs:
        done = refs.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if done.returncode != 0 or not done.stdout.strip():
        raise RepoError(f"{what} {rev!r} does not resolve to a commit in {repo}")
    return done.stdout.decode("ascii").strip()


def missing_at(repo: Path, commit: str, paths: Iterable[str]) -> list[str]:
    """The ``paths`` that are not files (or links) in ``commit``'s tree, in order.

    One ``cat-file --batch-check`` fed on stdin: no path reaches a command line.
    """
    wanted = [p for p in paths]
    if not wanted:
        return []
    if any("\n" in p for p in wanted):
        raise RepoError(f"a path holding a newline cannot be looked up in {repo}")
    from trysquare.git.running import _failure
    from trysquare.git.shadow import _Refs

    with _Refs(Path(repo)) as refs:
        done = refs.run(
            "cat-file",
            "--batch-check=%(objecttype)",
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
    from trysquare.git.running import _names

    out = git(
        repo, "diff-tree", "-r", "-z", "--name-only", "--no-renames", "--end-of-options", old, new
    )
    return set(_names(out))


def commits_between(repo: Path, old: str, new: str) -> int:
    """How many commits ``new`` is past ``old`` (``git rev-list --count old..new``)."""
    return int(git(repo, "rev-list", "--count", "--end-of-options", f"{old}..{new}").strip() or 0)


def _refs_run(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    from trysquare.git.shadow import _Refs

    with _Refs(Path(repo)) as refs:
        return refs.run(*args)
