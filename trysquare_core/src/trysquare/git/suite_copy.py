"""A throwaway copy of a clone's working tree for a test suite to run in.

What the working tree holds (never ``.git``), copied hole for hole where a file is sparse.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

from trysquare._pool import io_workers
from trysquare.errors import RepoError
from trysquare.git.changes import working_files

_BLOCK = 1 << 20  # a sparse file's data is copied this much at a time

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
