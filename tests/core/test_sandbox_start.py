"""A confined start opens the system files its rules grant (devices, /dev/pts, /dev/shm) once
per process, not once per validation; a run's own folders are opened at every start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from trysquare import sandbox

pytestmark = pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="this kernel offers no Landlock")


def _count_opens(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    opened: list[bytes] = []
    real = sandbox._open_path

    def counted(path: bytes, *, folder: bool = True) -> Any:
        opened.append(path)
        return real(path, folder=folder)

    monkeypatch.setattr(sandbox, "_open_path", counted)
    return opened


def _start(writable: Path, probe: Path) -> str:
    script = (
        "import sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        open(path, 'a').close(); print('wrote')\n"
        "    except OSError as error:\n"
        "        print(error.errno)\n"
    )
    done = sandbox.Sandbox([writable]).start(
        lambda: subprocess.run(
            [sys.executable, "-c", script, str(writable / "x"), "/dev/null", str(probe)],
            capture_output=True,
            text=True,
            check=True,
        )
    )
    return done.stdout


def test_system_files_are_opened_once_and_a_runs_folders_at_every_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sandbox.SWITCH, raising=False)
    monkeypatch.setattr(sandbox, "_system_paths", {})
    opened = _count_opens(monkeypatch)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    outside = tmp_path / "outside"
    assert _start(first, outside).split() == ["wrote", "wrote", "13"]
    system = [path for path in opened if path != bytes(first)]
    assert system, opened  # the devices were opened the first time
    opened.clear()
    # The second start grants its own folder only (the first one's is not writable to it).
    assert _start(second, first / "y").split() == ["wrote", "wrote", "13"]
    assert opened == [bytes(second)]
