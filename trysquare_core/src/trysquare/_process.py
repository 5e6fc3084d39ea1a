"""Running one child process the way validation needs it, in one place.

Used by the script mode and by ``run.tests()``: the child gets its own process
group (so a timeout kills grandchildren too), its output is capped (a runaway
child cannot exhaust memory), and a grandchild that keeps the pipes open after
the child exited cannot hang the caller. Dependency-free: ``trysquare.assay``
imports it.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["DEFAULT_CAP", "ProcessResult", "kill_all", "run_process"]

DEFAULT_CAP = 16 * 1024 * 1024
# How long a grandchild may keep the pipes open after the child itself exited.
LINGER_SECONDS = 1.0

# Process groups started here and still alive: an interrupted runner ends them.
_live_groups: set[int] = set()


class ProcessResult:
    """What became of one child process."""

    __slots__ = ("argv", "returncode", "stdout", "stderr", "timed_out", "truncated", "duration")

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int | None,
        stdout: bytes,
        stderr: bytes,
        timed_out: bool,
        truncated: bool,
        duration: float,
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode  # None when it was killed for its timeout
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        self.truncated = truncated  # some output beyond the cap was dropped
        self.duration = duration

    def __repr__(self) -> str:
        return (
            f"ProcessResult(argv={self.argv!r}, returncode={self.returncode!r}, "
            f"timed_out={self.timed_out!r}, truncated={self.truncated!r})"
        )


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """Kill every process group this process started and has not reaped yet."""
    for pgid in list(_live_groups):
        _kill_group(pgid)


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    timeout: float | None,
    env: Mapping[str, str] | None = None,
    cap: int = DEFAULT_CAP,
) -> ProcessResult:
    """Run ``argv`` (no shell) in ``cwd`` and collect its output.

    Raises ``OSError`` when the program cannot be started at all; every other
    outcome (exit code, timeout, signal) is reported in the result.
    """
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _live_groups.add(proc.pid)
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    sizes = dict.fromkeys(chunks, 0)
    truncated = timed_out = False
    exited_at: float | None = None
    try:
        with selectors.DefaultSelector() as selector:
            for fd in chunks:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > LINGER_SECONDS:
                    break  # a grandchild holds the pipes; the group is killed below
                if deadline is not None and now >= deadline:
                    timed_out = True
                    break
                wait = 0.05 if exited_at is None else LINGER_SECONDS
                if deadline is not None:
                    wait = min(wait, deadline - now)
                for key, _ in selector.select(timeout=max(wait, 0.0)):
                    fd = key.fd
                    data = os.read(fd, 1 << 16)
                    if not data:
                        selector.unregister(fd)
                        continue
                    room = cap - sizes[fd]
                    if room > 0:
                        chunks[fd].append(data[:room])
                    if len(data) > room:
                        truncated = True
                    sizes[fd] += len(data)
        if not timed_out:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                proc.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        # Whatever happened, nothing of this child's group outlives the call.
        _kill_group(proc.pid)
        proc.wait()
        _live_groups.discard(proc.pid)
        proc.stdout.close()
        proc.stderr.close()
    return ProcessResult(
        argv,
        None if timed_out else proc.returncode,
        b"".join(chunks[out_fd]),
        b"".join(chunks[err_fd]),
        timed_out,
        truncated,
        time.monotonic() - start,
    )
