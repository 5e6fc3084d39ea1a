"""The stray finder reads only our own descendants, and sees the same ones /proc shows."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from trysquare import _process

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc is Linux's")


def test_descendants_match_the_whole_process_table_restricted_to_ours() -> None:
    if not _process._has_children_files():
        pytest.skip("this kernel lists no thread children")
    # A child that starts a grandchild and waits: two generations below us.
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']);"
                " print(p.pid, flush=True); time.sleep(30)"
            ),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        time.sleep(0.05)
        ours = _process._descendants(os.getpid())
        assert ours[child.pid][0] == os.getpid()
        assert ours[grandchild][0] == child.pid
        everything = _process._processes()
        # The restricted walk finds exactly the descendants the full table holds.
        expected = set()
        todo = [os.getpid()]
        while todo:
            parent = todo.pop()
            kids = [pid for pid, (ppid, _sid) in everything.items() if ppid == parent]
            expected.update(kids)
            todo.extend(kids)
        assert {child.pid, grandchild} <= set(ours)
        assert set(ours) - expected <= {
            p for p in ours if p not in everything
        }  # only ones born since
        assert expected - set(ours) <= {p for p in expected if not os.path.exists(f"/proc/{p}")}
    finally:
        child.kill()
        child.wait()
        try:
            os.kill(grandchild, 9)
        except (ProcessLookupError, NameError):
            pass
