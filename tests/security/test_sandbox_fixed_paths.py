"""Landlock: the devices every ruleset grants are opened once, and no child can reach them.

Each confined start used to open every device file and device folder it grants (``O_PATH``,
the inode the kernel takes a rule from) and close them again; they are now opened once for
the process and kept. What is shown: a second ruleset opens only its own writable folders;
a confined child inherits none of the kept descriptors (it finds only its standard streams
in ``/proc/self/fd``), still writes ``/dev/null``, and still cannot write beside its folders.
The devices' rules are also added ahead, to a spare ruleset made while a child runs: the next
start adds only its own folders to it and confines its child all the same; a spare made from
descriptors since opened again is closed, never used.
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


CONFINED_PROBE = (
    "import os, sys\n"
    "open('/dev/null', 'w').write('x')\n"
    "try:\n"
    "    open(sys.argv[1], 'w')\n"
    "    print('wrote beside')\n"
    "except PermissionError:\n"
    "    print('refused beside')\n"
)


def test_a_start_takes_the_device_rules_made_while_the_last_child_ran(
    monkeypatch, tmp_path: Path
) -> None:
    """The devices' rules are the same for every start: made after one confined start (while
    its child runs) for the next, which adds only its own folders; it confines all the same."""
    monkeypatch.setattr(sandbox, "_spares", [])
    made: list[int] = []
    real = sandbox._device_ruleset

    def counted(abi: int, fixed: object) -> int:
        made.append(abi)
        return real(abi, fixed)  # type: ignore[arg-type]

    monkeypatch.setattr(sandbox, "_device_ruleset", counted)
    outcomes = []
    for name in ("first", "second"):
        scratch = tmp_path / name
        scratch.mkdir()
        done = run_process(
            [sys.executable, "-c", CONFINED_PROBE, str(tmp_path / f"beside-{name}.txt")],
            cwd=scratch,
            timeout=60,
            sandbox=sandbox.Sandbox([scratch]),
        )
        assert done.returncode == 0, done.stderr
        outcomes.append(done.stdout.decode().strip())
        # The first start made its own and a spare once its child started; the second took
        # that spare (made none of its own) and made the next.
        assert len(made) == len(outcomes) + 1
    assert len(made) == 3 and len(sandbox._spares) == 1
    assert outcomes == ["refused beside", "refused beside"]
    assert not any(tmp_path.glob("beside-*"))


def test_a_spare_made_from_descriptors_opened_again_is_closed_never_used(monkeypatch) -> None:
    monkeypatch.setattr(sandbox, "_spares", [])
    fixed = sandbox._fixed_paths()
    stale = sandbox._device_ruleset(sandbox.landlock_abi(), fixed)
    with sandbox._spares_lock:
        sandbox._spares.append((object(), stale))  # made before the devices were opened again
    assert sandbox._spare_ruleset(fixed) == -1
    with pytest.raises(OSError):
        os.fstat(stale)


def test_device_rules_are_built_once_and_again_for_descriptors_opened_again(monkeypatch) -> None:
    # The rules' structures name the fixed descriptors: built once for them, never reused for
    # descriptors opened again (a forked warm child closes its parent's and opens its own).
    monkeypatch.setattr(sandbox, "_device_built", [])
    abi = sandbox.landlock_abi()
    fixed = sandbox._fixed_paths()
    built = sandbox._device_arguments(abi, fixed)
    assert sandbox._device_arguments(abi, fixed) is built
    named = {path: rule._obj.parent_fd for path, rule in built[1]}
    assert named == {path: fd for path, fd in fixed if path != sandbox.SHARED_MEMORY}
    monkeypatch.setattr(sandbox, "_fixed", [])
    opened_again = sandbox._fixed_paths()
    try:
        rebuilt = sandbox._device_arguments(abi, opened_again)
        assert rebuilt is not built
        assert {path: rule._obj.parent_fd for path, rule in rebuilt[1]} == {
            path: fd for path, fd in opened_again if path != sandbox.SHARED_MEMORY
        }
    finally:
        for _, fd in opened_again:
            os.close(fd)
