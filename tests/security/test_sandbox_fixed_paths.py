"""Landlock: the devices every ruleset grants are opened once, and no child can reach them.

Each confined start used to open every device file and device folder it grants (``O_PATH``,
the inode the kernel takes a rule from) and close them again; they are now opened once for
the process and kept. What is shown: a second ruleset opens only its own writable folders;
a confined child inherits none of the kept descriptors (it finds only its standard streams
in ``/proc/self/fd``), still writes ``/dev/null``, and still cannot write beside its folders.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest
from trysquare import sandbox
from trysquare._process import run_process

EXERCISES = ("trysquare.sandbox", "trysquare._process")

pytestmark = pytest.mark.skipif(not sandbox.sandbox_enabled(), reason="needs Landlock")


def test_a_second_ruleset_opens_only_its_own_folders(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sandbox, "_fixed", [])
    opened: list[bytes] = []
    real_open = sandbox._open_path

    def counted(path: bytes, *, folder: bool = True) -> int:
        opened.append(path)
        return real_open(path, folder=folder)

    monkeypatch.setattr(sandbox, "_open_path", counted)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    os.close(sandbox.Sandbox([first], shared_memory=True)._ruleset())
    assert b"/dev/null" in opened and os.fsencode(first) in opened
    opened.clear()
    os.close(sandbox.Sandbox([second], shared_memory=True)._ruleset())
    assert opened == [os.fsencode(second)]


def test_a_confined_child_inherits_none_of_the_kept_descriptors(tmp_path: Path) -> None:
    sandbox._fixed_paths()  # kept open in this process from here on
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    probe = (
        "import os, sys\n"
        "print(sorted(int(n) for n in os.listdir('/proc/self/fd')))\n"
        "open('/dev/null', 'w').write('x')\n"
        "try:\n"
        f"    open({str(tmp_path / 'beside.txt')!r}, 'w')\n"
        "    print('wrote beside')\n"
        "except PermissionError:\n"
        "    print('refused beside')\n"
    )
    done = run_process(
        [sys.executable, "-c", probe],
        cwd=scratch,
        timeout=60,
        sandbox=sandbox.Sandbox([scratch]),
    )
    assert done.returncode == 0, done.stderr
    listed, outcome = done.stdout.decode().splitlines()
    # Its standard streams, and the descriptor listdir opened to list them.
    fds = ast.literal_eval(listed)
    assert fds[:3] == [0, 1, 2] and len(fds) <= 4
    assert outcome == "refused beside"
    assert not (tmp_path / "beside.txt").exists()
