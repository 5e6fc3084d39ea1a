"""Ending strays: the hunt is skipped only when trysquare has no child at all.

After a confined validator exits, every process it left is ours to find (we are the subreaper
of its orphans) and end. When this process has no child left at all — one ``waitid`` says so —
nothing can be left anywhere, and the walk through ``/proc`` is skipped. A validator may try to
hide a stray from that question: a grandchild cloned to end with no signal to its parent is
not a child ``waitid`` reports by default. What is shown: a plain validator's exit costs no
hunt (a count, in a fresh process with no other child); the hidden grandchild, in a session of
its own, is still found and killed when its validator ends. (The kernel makes an adopted orphan
an ordinary child again, and the question asks for children of every kind besides.)
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trysquare import sandbox

EXERCISES = ("trysquare._process",)

pytestmark = pytest.mark.skipif(
    not sandbox.sandbox_enabled() or platform.machine() != "x86_64",
    reason="needs Landlock (strays are ended under it) and x86_64's clone number",
)

COUNTED = """
import sys
from trysquare import _process
from trysquare.sandbox import Sandbox

hunts = []
find = _process._find_strays

def counted(*args):
    hunts.append(args)
    return find(*args)

_process._find_strays = counted
for _ in range(3):
    done = _process.run_process(
        [sys.executable, "-c", "pass"], cwd=sys.argv[1], timeout=60, sandbox=Sandbox([sys.argv[1]])
    )
    assert done.returncode == 0
print(len(hunts))
"""


def test_a_validator_that_left_nothing_costs_no_hunt(tmp_path: Path) -> None:
    counted = subprocess.run(
        [sys.executable, "-c", COUNTED, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert counted.stdout.split() == ["0"], counted.stderr


# The validator clones a grandchild that ends with no signal to its parent (clone(2) with
# flags 0: a fork whose exit nobody is told of), puts it in a session of its own, and exits.
HIDDEN = """
import ctypes, os, sys, time
scratch = sys.argv[1]
pid = ctypes.CDLL(None, use_errno=True).syscall(56, 0, 0, 0, 0, 0)
if pid == 0:
    os.setsid()
    open(os.path.join(scratch, "ready"), "w").close()
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(scratch, "go")) and time.time() < deadline:
        time.sleep(0.02)
    open(os.path.join(scratch, "late"), "w").write("x")
    os._exit(0)
deadline = time.time() + 60
while not os.path.exists(os.path.join(scratch, "ready")) and time.time() < deadline:
    time.sleep(0.01)  # exits once the grandchild has left its session
print(pid, flush=True)
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not: it runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


VALIDATE_HIDDEN = """
import sys
from trysquare import _process
from trysquare.sandbox import Sandbox

done = _process.run_process(
    [sys.executable, "-c", sys.argv[2], sys.argv[1]],
    cwd=sys.argv[1],
    timeout=60,
    sandbox=Sandbox([sys.argv[1]]),
)
assert done.returncode == 0, done.stderr
print(done.stdout.decode().split()[0])
"""


def test_a_grandchild_hidden_from_waitid_is_still_ended(tmp_path: Path) -> None:
    # In a fresh process with no other child: there the question decides whether to hunt.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    validated = subprocess.run(
        [sys.executable, "-c", VALIDATE_HIDDEN, str(scratch), HIDDEN],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    hidden = int(validated.stdout.split()[0])
    try:
        assert not _running(hidden)  # ended when its validator's call returned
        (scratch / "go").touch()
        time.sleep(0.3)  # a survivor would write its mark within 20 ms of this
        assert not (scratch / "late").exists()
    finally:
        try:
            os.kill(hidden, 9)
        except OSError:
            pass
