"""Copying the prepared tree (``_prepared.copy_prepared``) never follows a link, whatever is
swapped in while the copy is made, and never copies a setuid bit."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from trysquare import _prepared

pytestmark = pytest.mark.fast


def test_a_file_swapped_for_a_link_is_neither_copied_nor_its_target_changed(
    tmp_path: Path,
) -> None:
    machine = tmp_path / "machine-program"
    machine.write_text("#!/bin/sh\n")
    machine.chmod(0o755)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "tool").write_text("a regular file when the walk looked\n")
    seen = os.lstat(tree / "tool")
    (tree / "tool").unlink()
    (tree / "tool").symlink_to(machine)  # swapped in before the bytes are copied
    (tmp_path / "copy").mkdir()
    root = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as raised:
            _prepared._copy_file(root, b"tool", os.fsencode(tmp_path / "copy" / "tool"), seen)
    finally:
        os.close(root)
    assert raised.value.errno == errno.ELOOP
    assert not os.path.lexists(tmp_path / "copy" / "tool")
    assert stat.S_IMODE(machine.stat().st_mode) == 0o755


def test_a_folder_on_the_way_swapped_for_a_link_is_never_entered(tmp_path: Path) -> None:
    machine = tmp_path / "machine"
    (machine / "inner").mkdir(parents=True)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "data").symlink_to(machine)  # was a folder of the tree when listed
    root = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError):
            os.close(_prepared._open_beneath(root, b"data/inner"))
    finally:
        os.close(root)


def test_the_copy_keeps_no_setuid_bit(tmp_path: Path) -> None:
    tree = tmp_path / "origin" / "repo"
    (tree / "bin").mkdir(parents=True)
    (tree / "bin" / "run").write_text("#!/bin/sh\n")
    (tree / "bin" / "run").chmod(0o4755)
    (tree / "link").symlink_to("bin/run")
    shared = _prepared.SharedTree(
        origin=str(tree.parent), tree=tree, problem=None, transcript=b"", last=None,
        folders_before=frozenset(), built_here=True,
    )  # fmt: skip
    copy = _prepared.copy_prepared(shared, tmp_path / "copy")
    assert stat.S_IMODE((copy / "bin" / "run").stat().st_mode) == 0o755
    assert os.readlink(copy / "link") == "bin/run"
    assert (copy / "bin" / "run").read_text() == "#!/bin/sh\n"
