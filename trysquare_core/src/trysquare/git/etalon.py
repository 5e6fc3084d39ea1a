"""The etalon checkout: a reference tree written into a shared cache, never a worktree of the clone.

Each object is read through the shadow and hashed again before its bytes are trusted
(a forged object is refused by id), and only safe relative paths are written.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from trysquare.errors import RepoError
from trysquare.git.dotgit import _commit_and_tree_without_git, _peeled_without_git, is_git_repo
from trysquare.git.refs import resolve_commit
from trysquare.git.running import _argv, _env, _failure, _split_z, _timed_out, git_timeout
from trysquare.git.shadow import _cache_root, _Refs


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


def resolve_etalon(repo: Path, rev: str) -> tuple[str, str | None]:
    """The commit ``rev`` names in the clone (as :func:`~trysquare.git.refs.resolve_commit`
    finds it), and its tree when that was read on the way from the clone's files (None when
    git was asked): what :func:`materialised` needs to find the checkout without reading the
    commit again."""
    found = _commit_and_tree_without_git(repo, rev)
    if found is not None:
        return found
    return resolve_commit(repo, rev, what="etalon tag"), None


def materialised(tree: str) -> Path | None:
    """The checkout of ``tree`` in the default cache, when one was written before (as
    :func:`materialise_etalon` finds it: named by the tree's id, renamed into place whole,
    written only from objects hashed against their ids); else None."""
    target = _default_cache() / tree
    return target if target.is_dir() else None


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
