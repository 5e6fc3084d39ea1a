"""Rendering ``diff.patch``: ``git diff <base>`` plus each untracked file as git renders a new one.

Untracked files are rendered here exactly as ``git diff --no-index /dev/null <file>``
would (binary sniff, size limit, abbreviated ids), so the patch reads as one git
output. :func:`context_facts` gives touched, files and the patch from one walk.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import BinaryIO, NamedTuple, TypeVar

from trysquare.errors import RepoError
from trysquare.git.changes import _files, _open_shadow, _untracked
from trysquare.git.dotgit import _nested_head
from trysquare.git.hostile import _check_attribute_files, _folders_of, _special
from trysquare.git.quoting import _quote, _unquote
from trysquare.git.running import (
    _argv,
    _check_warnings,
    _env,
    _failure,
    _split_z,
    _timed_out,
    git_timeout,
)
from trysquare.git.shadow import _mkcache, _Shadow

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


_HEADER = b"diff --git "


_BLOCK = 1 << 20


class _Chunk(NamedTuple):
    """One file's part of git's patch on disk."""

    offset: int
    path: bytes
    deleted: bool  # "deleted file mode" (also the first half of a type change)
    created: bool  # "new file mode" (the second half of a type change)


_DELETED = b"deleted file mode "
_CREATED = b"new file mode "


def _chunk_starts(handle: BinaryIO) -> list[_Chunk]:
    """Each file's chunk in a ``--no-renames`` patch on disk: where it starts, its path,
    and whether it deletes or creates the path.

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
    starts: list[_Chunk] = []
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
        # git's extended header: the line after "diff --git" says a deletion or creation.
        second = handle.readline(64)
        starts.append(
            _Chunk(offset, path, second.startswith(_DELETED), second.startswith(_CREATED))
        )
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
    if not shadow.has_attributes():
        # The shadow's reset line outranks every .gitattributes of the work tree: with no
        # rule from base, every path's diff attribute is unspecified, no git to ask.
        return {}
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


def _write_new_file(repo: Path, path: bytes, width: int, attribute: bytes, out: BinaryIO) -> None:
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


def write_diff_patch(repo: Path, base: str, out: BinaryIO, excluded: Sequence[str] = ()) -> int:
    """Write ``base`` .. working tree as one unified git patch to ``out``; return its size.

    Streamed: git's part goes through a temporary file, untracked files are read in
    blocks, so a 2 GB file costs constant memory. Untracked files are rendered as new
    files byte for byte as ``git diff --no-index /dev/null <file>`` renders them,
    binary ones as git shows them ("Binary files ... differ"), all sorted by path.
    Writes nothing into the clone: ``diff-files -p`` against the shadow index.
    """
    shadow = _open_shadow(Path(repo), base, excluded, shared=True)
    shadow.refuse_waits()
    with tempfile.TemporaryFile(dir=_mkcache()) as tracked:
        others = _diff_files(shadow, tracked, shadow.others_if_any)
        return _render_patch(shadow, tracked, _chunk_starts(tracked), others, out)


def context_facts(
    repo: Path, base: str, out: BinaryIO, excluded: Sequence[str] = ()
) -> tuple[frozenset[str], frozenset[str]]:
    """:func:`touched_and_files`, with :func:`write_diff_patch` writing to ``out`` on the way.

    What a context build calls, and it starts two git processes at most, at once:
    ``diff-files`` writes the patch of tracked paths, whose chunks name every tracked path
    that changed (what ``git status`` would list) and every one deleted, and ``ls-files
    --others`` lists what is new (not started when a walk of the work tree finds only
    folders and paths of the base tree); the base's paths were kept when it was built.
    """
    shadow = _open_shadow(Path(repo), base, excluded, shared=True)
    shadow.refuse_waits()
    with tempfile.TemporaryFile(dir=_mkcache()) as tracked:
        others = _diff_files(shadow, tracked, shadow.others_if_any)
        chunks = _chunk_starts(tracked)
        _render_patch(shadow, tracked, chunks, others, out)
    changed = {os.fsdecode(chunk.path) for chunk in chunks}
    # A type change is a deletion and a creation of one path: it is still there.
    created = {chunk.path for chunk in chunks if chunk.created}
    gone = {os.fsdecode(c.path) for c in chunks if c.deleted and c.path not in created}
    untracked = _untracked(others)
    return frozenset(changed | untracked), frozenset(_files(shadow.paths(), gone, untracked))


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
        env=_env(shadow.dir, shadow.repo, borrowed=shadow.borrowed),
        cwd=shadow.repo,
    )
    try:
        answer = meanwhile()
        _stdout, stderr = process.communicate(
            timeout=max(0.0, started + seconds - time.monotonic())
        )
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


def _render_patch(
    shadow: _Shadow, tracked: BinaryIO, starts: Sequence[_Chunk], others: bytes, out: BinaryIO
) -> int:
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
    # Bytes here: the patch is bytes, and a nested repository's "dir/" is one path.
    untracked = sorted({p[:-1] if p.endswith(b"/") else p for p in _split_z(others)})
    attributes = _diff_attributes(shadow, untracked) if untracked else {}
    keyed: list[tuple[bytes, int, int]] = [(chunk.path, 0, n) for n, chunk in enumerate(starts)]
    keyed += [(path, 1, -1) for path in untracked]
    # git's own order is byte order of the path; a deletion precedes a re-creation.
    keyed.sort(key=lambda entry: (entry[0], entry[1]))
    for path, kind, number in keyed:
        if kind == 0:
            stop = starts[number + 1].offset if number + 1 < len(starts) else end
            _copy_range(tracked, starts[number].offset, stop, sink)
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
