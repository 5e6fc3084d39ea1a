"""``prepare`` once per run: one prepared tree that ``run.tests()`` and hidden tests share.

A scenario's ``prepare`` (``npm ci``, ``pip install -e .``) is the agent's code building
what its tree needs. Run per consumer, it ran once for ``run.tests()`` and once more for
every hidden-tests validator, on the same files. Within one ``validate`` (the scope
:func:`sharing` opens), the first consumer of a run copies the clone into a folder of
its own, runs ``prepare`` there in the jail, and keeps the result; every consumer then
works on a *copy* of that prepared tree, so what one suite writes never reaches another.

The order, and why:

1. the clone's files are copied (what git carries: no ``node_modules``, no hidden file);
2. ``prepare`` runs on them in the jail — it never sees hidden tests, which are placed
   later, so the agent's install scripts cannot read or rewrite them;
3. each consumer copies the prepared tree; hidden tests then set the run's test-runner
   settings aside (base's come back) and place their files, and the command runs.

A prepared tree may hold its own absolute paths (a virtual environment's scripts, an
editable install's ``.pth``), so a copy is shown in the jail at the very path ``prepare``
built it at (:func:`trysquare.jail.jailed_command`'s ``shown_as``). Only the jail can do
that: where it cannot start, and outside a ``validate`` (``trysquare try``, a validator's
own pytest tests), every consumer runs ``prepare`` on its own copy as before. A
``prepare`` that timed out is not kept (the next consumer tries with its own budget);
one that failed is, and every consumer reads the same failure. The trees are removed
once a run's validations are all back, and when ``validate`` ends.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from trysquare._prepared_scope import Entry, current, release, sharing

if TYPE_CHECKING:  # loaded when a tree is prepared: validate imports this module early
    from trysquare._process import ProcessResult
    from trysquare.jail import JailPolicy

__all__ = ["SharedTree", "copy_prepared", "folders_of", "release", "shared_prepare", "sharing"]


@attrs.frozen
class SharedTree:
    """A run's tree after ``prepare``, kept for every consumer of this ``validate``."""

    origin: str  # the scratch folder prepare ran in: a copy is shown at this path in the jail
    tree: Path  # origin/repo, never run in again
    problem: str | None  # why prepare did not succeed (said as run_steps says it), or None
    transcript: bytes  # prepare's "$ argv", output and exit lines
    last: ProcessResult | None  # prepare's last step, for a hint on a refused write
    folders_before: frozenset[str]  # the tree's folders before prepare (POSIX, relative)
    built_here: bool  # this consumer ran prepare (its time came out of its own budget)

    def problem_for(self, consequence: str) -> str | None:
        """``problem`` as this consumer says it ("so no test ran", "so nobody judged...")."""
        if self.problem is None:
            return None
        return self.problem.replace(_CONSEQUENCE, consequence, 1)

    def copy_to(self, dest: Path) -> Path:
        """A copy of the prepared tree at ``dest`` (see :func:`copy_prepared`)."""
        return copy_prepared(self, dest)


# Stands for the consumer's words in a shared failure; a NUL is never in run_steps' own text.
_CONSEQUENCE = "\x00consequence\x00"


def shared_prepare(
    repo: Path,
    steps: Sequence[tuple[str, Sequence[str]]],
    *,
    env: Mapping[str, str],
    timeout: float,
    jail: JailPolicy | None,
    guarded: Sequence[str | Path],
    tail_lines: int,
) -> SharedTree | None:
    """The run's prepared tree, built by this call or an earlier one; ``None`` when it is not
    shared (no ``validate`` scope, no ``prepare``, no jail here): prepare on your own copy.

    Waiting for another consumer's ``prepare`` counts against ``timeout``; so does running it.
    A ``SharedTree`` with ``problem`` set and ``tree`` absent means prepare timed out here.
    """
    scope = current()
    if scope is None or not steps or jail is None:
        return None
    from trysquare.jail import availability, jail_key

    if not availability().available:
        return None
    started = time.monotonic()
    found = os.path.realpath(repo)
    key = hashlib.sha256(
        json.dumps(
            {
                "repo": found,
                "steps": [[label, list(argv)] for label, argv in steps],
                "env": sorted(env.items()),
                "jail": jail_key(jail),
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()
    with scope.lock:
        entry: Entry[SharedTree] = scope.entries.setdefault(key, Entry(repo=found))
    if not entry.lock.acquire(timeout=max(timeout, 0.0)):
        return _timed_out(steps, timeout)
    try:
        if entry.tree is not None and os.path.isdir(entry.tree.tree):
            return attrs.evolve(entry.tree, built_here=False)
        built = _build(
            repo,
            steps,
            env=env,
            timeout=max(timeout - (time.monotonic() - started), 0.0),
            jail=jail,
            guarded=guarded,
            tail_lines=tail_lines,
        )
        if built.last is not None and built.last.timed_out:
            # Not kept: the next consumer tries with a budget of its own.
            from trysquare._scratch import remove_tree

            try:
                remove_tree(built.origin)
            except OSError:
                pass
            return built
        entry.tree = built
        return built
    finally:
        entry.lock.release()


def _timed_out(steps: Sequence[tuple[str, Sequence[str]]], timeout: float) -> SharedTree:
    shown = " ".join(steps[0][1])
    return SharedTree(
        origin="",
        tree=Path(),
        transcript=b"",
        last=None,
        folders_before=frozenset(),
        built_here=False,
        problem=f"prepare `{shown}` did not finish within the timeout of {timeout:g} s "
        "(another validator of this run was preparing the tree)",
    )


def _build(
    repo: Path,
    steps: Sequence[tuple[str, Sequence[str]]],
    *,
    env: Mapping[str, str],
    timeout: float,
    jail: JailPolicy,
    guarded: Sequence[str | Path],
    tail_lines: int,
) -> SharedTree:
    from trysquare._process import output_text, run_steps, tail
    from trysquare._scratch import remove_tree
    from trysquare.git.suite_copy import copy_tree
    from trysquare.sandbox import Sandbox

    origin = tempfile.mkdtemp(prefix="trysquare-prepared-")
    try:
        tree = copy_tree(Path(repo), Path(origin) / "repo")
    except BaseException:
        remove_tree(origin)
        raise
    before = folders_of(tree)
    done = run_steps(
        [(label, list(argv)) for label, argv in steps],
        cwd=tree,
        timeout=timeout,
        env={**env, "TMPDIR": origin},
        sandbox=Sandbox([origin]),
        jail=jail,
        guarded=guarded,
        consequence=_CONSEQUENCE,
        tail_lines=tail_lines,
    )
    problem = done.problem
    last = done.last
    if problem is None and last is not None and last.returncode != 0:
        # run_steps lets its last step fail (it is usually the command): here it is prepare.
        kept = tail(output_text(last), tail_lines)
        evidence = f":\n{kept}" if kept.strip() else " (it printed nothing)"
        problem = (
            f"{steps[-1][0]} `{' '.join(steps[-1][1])}` failed (exit {last.returncode}), "
            f"{_CONSEQUENCE}{evidence}"
        )
    return SharedTree(
        origin=origin,
        tree=tree,
        problem=problem,
        transcript=done.transcript,
        last=done.last,
        folders_before=before,
        built_here=True,
    )


def folders_of(tree: Path) -> frozenset[str]:
    """Every folder below ``tree`` (POSIX paths relative to it; links are not followed)."""
    found: set[str] = set()
    pending = [""]
    while pending:
        relative = pending.pop()
        try:
            entries = list(os.scandir(os.path.join(tree, relative) if relative else tree))
        except OSError:
            continue
        for item in entries:
            if item.is_dir(follow_symlinks=False):
                name = f"{relative}/{item.name}" if relative else item.name
                found.add(name)
                pending.append(name)
    return frozenset(found)


def copy_prepared(shared: SharedTree, dest: Path) -> Path:
    """Copy the prepared tree into ``dest`` (which must not exist): files, links and folders
    only — a FIFO, socket or device the agent's ``prepare`` left is not copied (opening one
    could block for ever). Iterative, so a tree of any depth is copied or refused with an
    ``OSError``, never a crash.

    Every folder and file is opened beneath the tree a name at a time, never through a link:
    another jail still running (with the network shared, one can hold a handle of this tree)
    may swap a link in while the copy is made, and what it leads to is never copied."""
    from concurrent.futures import ThreadPoolExecutor

    from trysquare._pool import bounded_map, io_workers

    # Never through a link: run_steps refuses a prepare that put one in the tree's place.
    root = os.open(shared.tree, _FOLDER)
    try:
        target = os.fsencode(dest)
        os.mkdir(target, 0o755)
        # Creating files is system-call bound: threads overlap it well (as repo.copy_tree does).
        workers = io_workers()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            batches = _folders(root, target)
            for _ in bounded_map(pool, _copy_files, batches, window=2 * workers):
                pass
    finally:
        os.close(root)
    return dest


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_BATCH = 64  # files copied by one task: a folder of thousands is still copied by every thread


def _folders(
    root: int, target: bytes
) -> Iterator[tuple[int, bytes, list[tuple[bytes, os.stat_result]]]]:
    """Each folder beneath ``root`` made in ``target`` with its links, then its regular files in
    batches: ``(a handle of the folder, its copy, files)``; whoever takes a batch closes it."""
    pending: list[bytes] = [b""]
    while pending:
        relative = pending.pop()
        there = os.path.join(target, relative) if relative else target
        here = _open_beneath(root, relative)
        files: list[tuple[bytes, os.stat_result]] = []
        try:
            for listed in os.listdir(here):  # names as str: a handle was listed
                name = os.fsencode(listed)
                info = os.stat(name, dir_fd=here, follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    os.symlink(os.readlink(name, dir_fd=here), os.path.join(there, name))
                elif stat.S_ISDIR(info.st_mode):
                    os.mkdir(os.path.join(there, name), 0o755)
                    pending.append(os.path.join(relative, name) if relative else name)
                elif stat.S_ISREG(info.st_mode):
                    files.append((name, info))
            for start in range(0, len(files), _BATCH):
                yield os.dup(here), there, files[start : start + _BATCH]
        finally:
            os.close(here)


def _copy_files(batch: tuple[int, bytes, list[tuple[bytes, os.stat_result]]]) -> None:
    here, there, files = batch
    try:
        for name, info in files:
            _copy_file(here, name, os.path.join(there, name), info)
    finally:
        os.close(here)


def _open_beneath(root: int, relative: bytes) -> int:
    """A handle of the folder ``relative`` beneath the open folder ``root``, each name on the
    way opened as a folder and never through a link (``OSError`` otherwise)."""
    here = os.dup(root)
    try:
        for part in relative.split(b"/") if relative else ():
            inner = os.open(part, _FOLDER, dir_fd=here)
            os.close(here)
            here = inner
    except BaseException:
        os.close(here)
        raise
    return here


def _copy_file(folder: int, name: bytes, dst: bytes, info: os.stat_result) -> None:
    """Copy the regular file ``name`` of the open ``folder`` to ``dst``: read only while it is
    still a regular file there (not a link, not a FIFO), written only as a new file, its mode
    the permission bits (no setuid) with the owner's write."""
    reading = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    source = os.open(name, reading, dir_fd=folder)
    try:
        if not stat.S_ISREG(os.fstat(source).st_mode):
            raise OSError(errno.EINVAL, "no longer a regular file", os.fsdecode(name))
        mode = stat.S_IMODE(info.st_mode) & 0o777 | 0o200
        copy = os.open(
            dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode
        )
        try:
            offset = 0
            while sent := os.sendfile(copy, source, offset, 1 << 30):  # no Python-level loop
                offset += sent
            os.fchmod(copy, mode)  # the umask may have taken bits away
        finally:
            os.close(copy)
    finally:
        os.close(source)
