"""A child's exit is waited for on its pidfd: no sleep, however its pipes and its exit come."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from trysquare import _process
from trysquare.sandbox import Sandbox


def _has_pidfd() -> bool:
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


pytestmark = pytest.mark.skipif(not _has_pidfd(), reason="no pidfd on this kernel")

# Closes its pipes first, then lives on a moment: the caller has read everything and must
# wait for the exit itself.
PIPES_FIRST = "import os, time; os.close(1); os.close(2); time.sleep(0.3)"


@pytest.mark.parametrize("confined", [False, True])
def test_a_child_that_closes_its_pipes_before_it_exits_is_waited_for_without_sleeping(
    tmp_path, monkeypatch: pytest.MonkeyPatch, confined: bool
) -> None:
    slept: list[float] = []
    sleep = time.sleep
    me = threading.get_ident()

    def noted(seconds: float) -> None:
        # This thread's sleeps only: a loopback server another test left trickling its reply
        # (tests/loopback.py) may sleep in this process meanwhile.
        if threading.get_ident() == me:
            slept.append(seconds)
        sleep(seconds)

    monkeypatch.setattr(time, "sleep", noted)
    started = time.monotonic()
    done = _process.run_process(
        [sys.executable, "-c", PIPES_FIRST],
        cwd=tmp_path,
        timeout=30,
        sandbox=Sandbox([tmp_path]) if confined else None,
    )
    assert done.returncode == 0 and not done.timed_out
    assert time.monotonic() - started >= 0.3  # its exit was waited for
    # subprocess's wait with a timeout sleeps 0.5 ms, 1 ms, 2 ms ... between waitpids.
    assert slept == []


def test_a_child_that_closes_its_pipes_and_lives_on_still_times_out(tmp_path) -> None:
    started = time.monotonic()
    done = _process.run_process(
        [sys.executable, "-c", "import os, time; os.close(1); os.close(2); time.sleep(30)"],
        cwd=tmp_path,
        timeout=0.5,
    )
    assert done.timed_out and done.returncode is None
    assert time.monotonic() - started < 10


def test_an_exit_code_and_all_output_are_kept_when_the_exit_wakes_the_wait(tmp_path) -> None:
    script = "import sys; sys.stdout.write('x' * 200000); sys.stderr.write('e'); sys.exit(3)"
    done = _process.run_process([sys.executable, "-c", script], cwd=tmp_path, timeout=30)
    assert (done.returncode, len(done.stdout), done.stderr) == (3, 200000, b"e")
