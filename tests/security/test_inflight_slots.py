"""Attacks on the in-flight slot files: names planted where ``validate`` keeps its markers.

The experiment folder may be a run folder (the agent's). ``validate`` writes each marker into
a slot file of its own, made where no file is (never a name that is already there: a planted
symlink or hard link is passed over) in a folder reached without following a symlink, and
written through its own descriptor; nothing is ever written through what the agent put there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from trysquare import _inflight

from tests.security.test_writes_symlinks import (
    VICTIM_TEXT,
    row,
    run_validate,
    two_runs,
    victim_file,
)

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._inflight",)


def test_a_slot_is_never_a_name_planted_before_it(tmp_path: Path) -> None:
    """A symlink and a hard link to the agent's victim sit at the first names a slot would
    take: the slot is made under the next free name, and the victim is untouched."""
    root = tmp_path / "exp"
    folder = root / _inflight.FOLDER
    folder.mkdir(parents=True)
    victim = victim_file(tmp_path)
    pid = os.getpid()
    (folder / f"slot-{pid}-0-0.json").symlink_to(victim)
    os.link(victim, folder / f"slot-{pid}-0-1.json")
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        slot = _inflight._Slot.make(descriptor, 0, root)
        assert slot.name == f"slot-{pid}-0-2.json"
        assert slot.write(b'{"marker": "in flight"}')
        assert json.loads((folder / slot.name).read_text()) == {"marker": "in flight"}
        assert slot.empty()
        slot.close()
    finally:
        os.close(descriptor)
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert not (folder / f"slot-{pid}-0-2.json").exists()  # an empty slot goes when closed


def test_a_symlinked_inflight_folder_is_never_written_through(tmp_path: Path) -> None:
    """``.trysquare/inflight`` is a symlink to a folder of the agent's choosing: no marker is
    written there, and every run is still validated."""
    exp, _, _ = two_runs(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (exp / ".trysquare").mkdir(exist_ok=True)
    (exp / _inflight.FOLDER).symlink_to(elsewhere, target_is_directory=True)
    summary, out, rows = run_validate(tmp_path, exp)
    assert list(elsewhere.iterdir()) == [], out
    assert row(rows, "good")["state"] == row(rows, "evil")["state"] == "valid", out
    assert summary.exit_code == 0, out
