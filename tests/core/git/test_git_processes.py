"""``trysquare.git``: what a fresh ``validate`` costs in git processes.

Per run, two at most: ``diff-files`` (the patch, and from its chunks every tracked path
that changed) and ``ls-files --others`` (what is new), the second only when a walk of the
work tree meets something the base does not track. What depends on the base commit alone
(its index, rules and paths) and the etalon checkout are built once per validate and
shared, not once per run. Counted by a ``git`` first on ``PATH`` that notes each call.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from trysquare.testing import build_matrix

from tests.conftest import Cli, share_signing_key
from tests.helpers import write_scenario, write_script

PER_RUN = 2


def _git_shim(folder: Path) -> Path:
    """A folder holding a ``git`` that appends its arguments to ``calls`` and runs git."""
    real = shutil.which("git")
    assert real is not None
    folder.mkdir()
    log = folder / "calls"
    shim = folder / "git"
    shim.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\nexec '{real}' \"$@\"\n")
    shim.chmod(0o755)
    return folder


_NEW_AND_IGNORED = {"a.py": "a = 2\n", "new.py": "n = 1\n", "debug.log": "ignored\n"}


def _fresh_validate(
    cli: Cli, root: Path, runs: int, changes: dict[str, str] = _NEW_AND_IGNORED
) -> list[str]:
    """The git calls of a first ``validate`` of ``runs`` runs (a cache of its own)."""
    scenario = write_scenario(
        root / "scenario",
        '[[validation]]\nmode = "script"\ncommand = "check.py"\nmetrics = ["changed"]\n',
    )
    write_script(
        root / "scenario",
        "check.py",
        """
        import json, sys
        context = json.load(open(sys.argv[1]))
        print(json.dumps({"metrics": {"changed": bool(context["touched"])}}))
        """,
    )
    build_matrix(
        root / "exp",
        [(f"r{n}", f"c{n % 2}", n) for n in range(runs)],
        base={"a.py": "a = 1\n", "b.py": "b = 1\n", ".gitignore": "*.log\n"},
        changes=changes,
        response="done\n",
    )
    shim = _git_shim(root / "shim")
    done = cli(
        "validate", scenario, root / "exp", "--no-progress", "--jobs", "1",
        env={
            "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
            "XDG_CACHE_HOME": str(share_signing_key(root / "cache")),
        },
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return (shim / "calls").read_text().splitlines()


def test_a_fresh_validate_starts_two_git_processes_per_run(cli: Cli, tmp_path: Path) -> None:
    few = _fresh_validate(cli, tmp_path / "few", 2)
    many = _fresh_validate(cli, tmp_path / "many", 8)
    # What the six more runs cost: the once-per-validate part (base, etalon) cancels out.
    assert len(many) - len(few) <= PER_RUN * 6, "\n".join(many)
    per_run = [call for call in many if " diff-files " in call or " ls-files " in call]
    assert len(per_run) == PER_RUN * 8, "\n".join(many)
    assert sum(" read-tree " in call for call in many) == 1  # the base's index, shared


def test_a_run_with_nothing_new_starts_one_git_process(cli: Cli, tmp_path: Path) -> None:
    calls = _fresh_validate(cli, tmp_path, 4, changes={"a.py": "a = 2\n"})
    assert sum(" diff-files " in call for call in calls) == 4, "\n".join(calls)
    # Every entry of each work tree is a path of the base tree: nothing ls-files could list.
    assert not any(" ls-files " in call for call in calls), "\n".join(calls)
