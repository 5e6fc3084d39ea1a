"""Where the declared suite's command resolves: said by ``check``, warned when it is
trysquare's own environment.

The suite runs inside a script validator (``run.tests()``), whose ``PATH`` starts
with the folder of the interpreter trysquare runs in (so ``#!/usr/bin/env python3``
finds ``trysquare.assay``). A ``test_command`` of ``python3 -m pytest`` therefore
runs trysquare's interpreter and its packages: a project installed there (or a
src-layout project's installed copy) would be tested instead of the clone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["dependency_lines", "suite_lines"]

_SITE = "import sys, sysconfig; print(sys.prefix); print(sysconfig.get_paths()['purelib'])"


def suite_lines(test_command: str | None) -> list[str]:
    """``suite: python3 is /x/bin/python3 (site-packages: ...)``, then a ``!`` warning
    line when that is trysquare's own environment; nothing without a suite."""
    if not test_command:
        return []
    from trysquare._words import split_command

    try:
        words = split_command(test_command)
    except ValueError:
        return []  # the scenario loader says what is wrong with it
    if not words:
        return []
    program = words[0]
    interpreter_dir = os.path.dirname(sys.executable)
    path = os.pathsep.join(filter(None, [interpreter_dir, os.environ.get("PATH")]))
    found = shutil.which(program, path=path)
    if found is None:
        return [f"! suite: '{program}' is not found on the PATH the suite gets ({path})"]
    prefix, site = _site_of(Path(found))
    where = f"suite: {program} is {found}" + (f" (site-packages: {site})" if site else "")
    own = _inside(Path(found), Path(sys.prefix))
    own = own or (prefix is not None and _same(prefix, sys.prefix))
    if not own:
        return [where]
    return [
        where,
        (
            f"! suite: {program} is trysquare's own environment ({sys.prefix}): the suite would "
            "run with trysquare's interpreter and packages, and test a copy installed there "
            "rather than the clone; point test_command at the project's environment "
            '(e.g. test_command = "/path/to/project/.venv/bin/python -m pytest")'
        ),
    ]


def _site_of(program: Path) -> tuple[str | None, str | None]:
    """The prefix and site-packages of ``program`` when it is a Python interpreter."""
    if not program.name.startswith("python"):
        return None, None
    try:
        done = subprocess.run(
            [str(program), "-I", "-c", _SITE],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None, None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != 2:
        return None, None
    return lines[0], lines[1]


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.absolute().is_relative_to(folder.absolute())
    except OSError:
        return False


def _same(one: str, other: str) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


# Folders a harness builds in the clone that git ignores, and the prepare that rebuilds each.
_DEPENDENCY_FOLDERS = {
    "node_modules": "npm ci --no-audit --no-fund",
    ".venv": "uv sync --frozen",
}


def dependency_lines(
    test_command: str | None, prepare: Sequence[str], clones: Sequence[Path]
) -> list[str]:
    """``!`` lines for each ignored dependency folder found in the runs' clones when the
    scenario declares a suite and no ``prepare``: the suite's copy never carries it."""
    if not test_command or prepare:
        return []
    from trysquare.errors import RepoError
    from trysquare.git.changes import working_files

    found: dict[str, list[Path]] = {}
    for clone in clones:
        for folder in _DEPENDENCY_FOLDERS:
            if not (clone / folder).is_dir():
                continue
            try:
                carried = any(path.startswith(folder + "/") for path in working_files(clone))
            except RepoError:
                continue  # the run is refused elsewhere, naming why
            if not carried:
                found.setdefault(folder, []).append(clone)
    return [
        f"! suite: {len(holding)} run(s) hold {folder}/ in their clone (e.g. {holding[0] / folder}), "
        f"which git ignores, so the suite's copy never carries it: declare the prepare that "
        f'builds it, e.g. prepare = ["{_DEPENDENCY_FOLDERS[folder]}"] (with network = true '
        "when it downloads)"
        for folder, holding in found.items()
    ]
