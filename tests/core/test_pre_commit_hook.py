"""``.pre-commit-hooks.yaml``: its entry, run as pre-commit runs it, checks every file given."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers import write_scenario, write_script

ROOT = Path(__file__).resolve().parents[2]
GOOD = """
    [[validation]]
    mode = "script"
    command = "score.py"
    metrics = ["ok"]
"""


def test_the_hook_checks_each_scenario_and_fails_on_any(tmp_path: Path) -> None:
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "trysquare-check" and hook["language"] == "python"
    for folder in ("good", "bad"):
        write_script(tmp_path / folder, "score.py", "print('{}')\n")
    good = write_scenario(tmp_path / "good", GOOD)
    bad = write_scenario(tmp_path / "bad", GOOD.replace("metrics", "metircs"))
    pattern = re.compile(hook["files"])
    assert pattern.search("experiments/a/scenario.toml") and not pattern.search("pyproject.toml")
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }

    def run(*files: Path) -> subprocess.CompletedProcess[str]:
        # pre-commit splits the entry as a shell would and appends the file names.
        argv = [*shlex.split(hook["entry"]), *map(str, files)]
        return subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=120, check=False
        )

    done = run(good)
    assert done.returncode == 0, done.stderr
    assert "scenario.toml: loads" in done.stdout
    done = run(bad, good)
    assert done.returncode == 2
    assert "metircs: unknown key (did you mean 'metrics'?)" in done.stderr
    assert "scenario.toml: loads" in done.stdout  # the good one after the bad is checked too
