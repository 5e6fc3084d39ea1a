"""Ending strays: the hunt is skipped only when trysquare has no child at all.

After a confined validator exits, every process it left is ours to find (we are the subreaper
of its orphans) and end. When this process has no child left at all — one ``waitid`` says so —
nothing can be left anywhere, and the walk through ``/proc`` is skipped. A validator may try to
hide a stray from that question: a grandchild cloned to end with no signal to its parent is
not a child ``waitid`` reports by default. What is shown: a plain validator's exit costs no
hunt (a count, in a fresh process with no other child); the hidden grandchild, in a session of
its own, is still found and killed when its validator ends. (The kernel makes an adopted orphan
an ordinary child again, and the question asks for children of every kind besides.)

While another validator runs, the hunt passes it over with all below it (an orphan goes up to
the nearest subreaper among its ancestors, so nothing of the validator that ended can be
there): the stray is still ended, and the other validator left alone.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trysquare import _process, sandbox

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


# Another validator runs meanwhile (with a child of its own), so the hunt is not skipped; the
# validator that ends leaves a stray in a session of its own.
OTHER = """
import os, subprocess, sys, time
scratch = sys.argv[1]
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(os.path.join(scratch, "pids"), "w").write(f"{os.getpid()} {child.pid}")
deadline = time.time() + 60
while not os.path.exists(os.path.join(scratch, "go")) and time.time() < deadline:
    time.sleep(0.02)
child.kill()
child.wait()
"""

LEAVING = """
import os, subprocess, sys, time
stray = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(60)"],
    start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
print(stray.pid, flush=True)
"""

BESIDE_ANOTHER = """
import os, sys, threading, time
from trysquare import _process
from trysquare.sandbox import Sandbox

mine, theirs, other_code, leaving_code = sys.argv[1:5]
hunts = []
walk = _process._descendants

def recorded(me, passed_over=()):
    table = walk(me, passed_over)
    hunts.append((sorted(passed_over), sorted(table)))
    return table

_process._descendants = recorded
other = []
thread = threading.Thread(target=lambda: other.append(_process.run_process(
    [sys.executable, "-c", other_code, theirs], cwd=theirs, timeout=60, sandbox=Sandbox([theirs])
)))
thread.start()
pids = os.path.join(theirs, "pids")
deadline = time.time() + 60
while not os.path.exists(pids) and time.time() < deadline:
    time.sleep(0.01)
time.sleep(0.05)
leader, its_child = map(int, open(pids).read().split())
done = _process.run_process(
    [sys.executable, "-c", leaving_code], cwd=mine, timeout=60, sandbox=Sandbox([mine])
)
stray = int(done.stdout.split()[0])
gone = not os.path.exists(f"/proc/{stray}")
other_alive = os.path.exists(f"/proc/{leader}") and os.path.exists(f"/proc/{its_child}")
open(os.path.join(theirs, "go"), "w").close()
thread.join()
print(gone, other_alive, other[0].returncode, hunts[-1][0] == [leader],
      leader not in hunts[-1][1] and its_child not in hunts[-1][1])
"""


def test_a_stray_is_ended_while_another_validator_runs_and_that_one_is_left_alone(
    tmp_path: Path,
) -> None:
    # The other validator and all below it are passed over by the hunt (nothing of the one
    # that ended can be there), and the stray, an orphan come back to us, is still ended.
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    mine.mkdir()
    theirs.mkdir()
    if not _process._has_children_files():
        pytest.skip("this kernel lists no thread children")
    checked = subprocess.run(
        [sys.executable, "-c", BESIDE_ANOTHER, str(mine), str(theirs), OTHER, LEAVING],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert checked.stdout.split() == ["True", "True", "0", "True", "True"], checked.stderr
