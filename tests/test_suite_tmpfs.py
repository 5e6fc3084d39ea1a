"""The suite's own temporary folder (tests/tmpfs.py): in memory where it can be, else on the
disk, saying so."""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests import tmpfs

pytestmark = pytest.mark.fast


class _Refusing:
    """A C library whose ``unshare`` fails as a kernel without the right refuses it."""

    def unshare(self, flags: int) -> int:
        ctypes.set_errno(errno.EPERM)
        return -1

    def mount(self, *args: object) -> int:
        raise AssertionError("nothing may be mounted once unshare failed")


def test_where_the_kernel_refuses_the_files_stay_on_the_disk_saying_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(tmpfs.CHOICE, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tmpfs.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tmpfs, "_filesystem", lambda path: "ext4")
    monkeypatch.setattr(tmpfs, "_single_threaded", lambda: True)
    monkeypatch.setattr(tmpfs.ctypes, "CDLL", lambda *a, **k: _Refusing())
    monkeypatch.setattr(tmpfs.os, "geteuid", lambda: 0)
    line = tmpfs.enter()
    assert line.startswith("temporary files: on the disk (no private tmpfs: unshare:"), line
    assert "\n" not in line and tmpfs.CHOICE not in os.environ
    assert os.environ["TMPDIR"] == str(tmp_path) and tempfile.tempdir == str(tmp_path)


def test_asked_for_the_disk_it_leaves_tmp_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tmpfs.CHOICE, "disk")
    monkeypatch.setattr(tmpfs.ctypes, "CDLL", lambda *a, **k: _Refusing())
    assert tmpfs.enter() == "temporary files: on the disk, as TRYSQUARE_TESTS_TMP=disk asks"


def test_a_session_inside_one_never_hides_its_tmp_again(tmp_path: Path) -> None:
    """A nested pytest (this suite's variables left out) finds its TMPDIR a tmpfs already, and
    a file of the outer session's is still there for it."""
    base = os.path.realpath(tempfile.gettempdir())
    if tmpfs._filesystem(base) != "tmpfs":
        pytest.skip("this session's /tmp is not a tmpfs: " + tmpfs.enter())
    env = {k: v for k, v in os.environ.items() if k != tmpfs.CHOICE}
    code = (
        "from tests import tmpfs; import sys; print(tmpfs.enter()); print(open(sys.argv[1]).read())"
    )
    (tmp_path / "outer").write_text("still here")
    shown = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "outer")],
        cwd=Path(__file__).parents[1],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert shown == [f"temporary files: {base} is a tmpfs already", "still here"]
