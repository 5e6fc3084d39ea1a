"""The clone's object store is the agent's: the etalon (base's tree, cached and shared by
every run at that base, and what the controls at base and the hidden tests' set-aside
harness run on) must be base's real content, not what the agent wrote under its ids."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.security.guard_fixtures import build_run
from trysquare import repo as repo_module


@pytest.mark.xfail(
    strict=True,
    reason="git cat-file and ls-tree never check an object against its id: the etalon is "
    "written from whatever the agent stored under base's blob and tree ids",
)
def test_a_base_blob_the_agent_rewrote_in_its_object_store_never_reaches_the_etalon(
    tmp_path: Path,
) -> None:
    run = build_run(tmp_path, "r1")
    clone = run.repo.path
    assert run.base_commit is not None
    blob = subprocess.run(
        ["git", "rev-parse", f"{run.base_commit}:counter.py"], cwd=clone, check=True,
        capture_output=True, text=True,
    ).stdout.strip()
    loose = clone / ".git" / "objects" / blob[:2] / blob[2:]
    if not loose.exists():
        pytest.skip("the base blob is packed here")
    forged = b"x = 'what the agent wants every run at this base to start from'\n"
    os.chmod(loose, 0o644)
    loose.write_bytes(zlib.compress(b"blob %d\0" % len(forged) + forged))
    try:
        etalon = repo_module.materialise_etalon(clone, run.base_commit, cache=tmp_path / "etalons")
    except Exception:  # noqa: BLE001 - refusing the forged store is a right answer too
        return
    assert (etalon / "counter.py").read_text() == "x = 1\n"
