"""Running git: the pinned environment and config, the timeout, the sentence a failure becomes.

Every git process trysquare starts goes through here: no inherited ``GIT_*`` variable,
no system or global config, replace objects off, literal pathspecs, and
:func:`git_timeout` seconds at most (``TRYSQUARE_GIT_TIMEOUT``). What the shadow's own
config says is :mod:`trysquare.git.shadow`'s business.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

from trysquare._lazy_pattern import LazyPattern
from trysquare.errors import RepoError

# Config pinned on every call, on top of the shadow's own config file.
_CONFIG = (
    "-c", "core.fsmonitor=false",
    "-c", "core.quotepath=off",  # readable non-ASCII paths in the patch
    "-c", "diff.suppressBlankEmpty=false",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
)  # fmt: skip


def _env(
    git_dir: Path, work_tree: Path | None, index: Path | None = None, borrowed: bytes | None = None
) -> dict[str, str]:
    # Built per call (cheap): a caller that changes os.environ later is honoured. Every
    # inherited GIT_* variable is dropped: none may point us at another repository,
    # config (GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT) or program (GIT_EXTERNAL_DIFF).
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_DIR=os.fspath(git_dir),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_LITERAL_PATHSPECS="1",  # every path we pass is a path, never a pattern
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        LC_ALL="C",  # stable, parseable messages
    )
    if work_tree is not None:
        env["GIT_WORK_TREE"] = os.fspath(work_tree)
    if index is not None:
        env["GIT_INDEX_FILE"] = os.fspath(index)
    if borrowed is not None:
        # A shadow shared by every clone at one base (see _Shadow.shared) names the clone's
        # objects here, per process, rather than in an alternates file of its own; and
        # nothing may write into a folder other processes read.
        env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = os.fsdecode(borrowed)
        env["GIT_OPTIONAL_LOCKS"] = "0"
    return env


_FOUND_GIT: dict[str, str] = {}


def _git_program() -> str:
    """git found on ``PATH`` once per ``PATH`` value: the child then starts it directly
    rather than trying every folder of ``PATH`` in turn, for each of a validate's calls."""
    path = os.environ.get("PATH", os.defpath)
    found = _FOUND_GIT.get(path)
    if found is None:
        which = shutil.which("git", path=path)
        # Absolute: a relative folder of PATH means ours, never the clone git runs in.
        found = os.path.abspath(which) if which else "git"  # absent: FileNotFoundError says so
        _FOUND_GIT[path] = found
    return found


def _argv(args: Sequence[str]) -> list[str]:
    return [_git_program(), *_CONFIG, *args]


GIT_TIMEOUT_VARIABLE = "TRYSQUARE_GIT_TIMEOUT"


_GIT_TIMEOUT_SECONDS = 120.0


def git_timeout() -> float:
    """How long one git process may run, in seconds: ``$TRYSQUARE_GIT_TIMEOUT``, else 120.

    A hostile clone can hold git for ever without naming a program: a FIFO where git opens
    a file (a nested repository's ``HEAD``, an object, a ``.gitattributes``). What can be
    seen beforehand is refused by name (:func:`_check_object_store`,
    :func:`_check_attribute_files`); this bounds the rest. Read per call, so a caller that
    sets the variable later is honoured.
    """
    text = os.environ.get(GIT_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return _GIT_TIMEOUT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise RepoError(f"{GIT_TIMEOUT_VARIABLE} must be a number of seconds above 0, not {text!r}")
    return seconds


def _timed_out(repo: Path, args: Sequence[str], seconds: float) -> RepoError:
    return RepoError(
        f"git {args[0] if args else ''} did not finish within {seconds:g} s in {repo} and was"
        f" stopped: something in the clone keeps it waiting (a FIFO or a device where git reads"
        f" a file?); {GIT_TIMEOUT_VARIABLE} sets the limit"
    )


# git processes this process has started (read by runs._load_each: whether loading asks git).
_started = [0]


def processes_started() -> int:
    """How many git processes this process has started so far."""
    return _started[0]


def _run(
    git_dir: Path,
    work_tree: Path | None,
    repo: Path,
    args: Sequence[str],
    input: bytes | None = None,
    borrowed: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    seconds = git_timeout()
    _started[0] += 1
    try:
        return subprocess.run(
            _argv(args),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            env=_env(git_dir, work_tree, borrowed=borrowed),
            cwd=work_tree if work_tree is not None else git_dir,
            check=False,
            timeout=seconds,
        )
    except FileNotFoundError:
        raise RepoError(f"git is not installed or not on PATH (needed to read {repo})") from None
    except subprocess.TimeoutExpired:
        raise _timed_out(repo, args, seconds) from None


def _failure(
    repo: Path, args: Sequence[str], done: subprocess.CompletedProcess[bytes]
) -> RepoError:
    lines = [ln for ln in done.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    # The last "fatal:"/"error:" line is git's own one-sentence reason.
    reasons = [ln for ln in lines if ln.startswith(("fatal:", "error:"))] or lines
    reason = reasons[-1].split(":", 1)[-1].strip() if reasons else f"exit status {done.returncode}"
    return RepoError(f"git {args[0] if args else ''} failed in {repo}: {reason}")


def _git_many(
    git_dir: Path, repo: Path, *calls: Sequence[str], borrowed: bytes | None = None
) -> list[bytes]:
    """Run independent git calls concurrently (each one walks the tree on its own core)."""
    results: list[subprocess.CompletedProcess[bytes] | BaseException | None] = [None] * len(calls)

    def work(index: int) -> None:
        try:
            results[index] = _run(git_dir, repo, repo, calls[index], borrowed=borrowed)
        except BaseException as error:  # noqa: BLE001 - re-raised below, in the caller's thread
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
        _check_warnings(repo, done.stderr)
        out.append(done.stdout)
    return out


_UNREADABLE = (
    "warning: could not open directory",
    "warning: unable to access",
    "error: could not open",
    "error: unable to",
    "warning: could not stat",
    "error: could not lstat",
)


# git does not read a .gitattributes that is a link (git >= 2.32) and says so. Harmless
# here: the shadow's info/attributes decides every attribute trysquare's reads depend on,
# so a work tree's .gitattributes, read or not, changes nothing (a committed link to the
# real file is a project's own choice, not a reason to refuse the run).
_ATTRIBUTES_UNREAD = LazyPattern(
    r"warning: unable to access '(?:.*/)?\.gitattributes': Too many levels of symbolic links\Z"
)


def _check_warnings(repo: Path, stderr: bytes) -> None:
    """git's complaints about paths it could not read (a path longer than PATH_MAX,
    500 nested folders) fail the read, naming the path: a part of the work tree git
    skipped would silently be missing from ``touched``."""
    for line in stderr.decode("utf-8", "backslashreplace").splitlines():
        if line.startswith(_UNREADABLE) and not _ATTRIBUTES_UNREAD.match(line):
            said = line.split(":", 1)[1].strip()
            if len(said) > 300:  # name it, but keep the sentence readable
                said = f"{said[:140]}...{said[-140:]} ({len(said)} characters)"
            raise RepoError(f"git could not read part of {repo}: {said}")


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
