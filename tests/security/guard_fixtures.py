"""Hostile validators against the measured clone, shared by test_guard_* and test_sandbox_*.

Each test builds a real run (a git clone with the agent's change), a script
validator that attacks, and validates in-process.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from trysquare.runner import Summary, ValidateOptions, validate
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import RunBuilder

from tests.helpers import write_scenario, write_script

# The validator's prelude: the context, the clone, and `attempt(what, action)`, which
# records whether a write went through (the sandbox makes it fail at the write).
PRELUDE = """
import json, os, sys, subprocess, time
context = json.load(open(sys.argv[1]))
repo = context["repo"]
attempts = {}
def attempt(what, action):
    try:
        action()
        attempts[what] = "wrote"
    except OSError as error:
        attempts[what] = f"failed: {error.strerror} (errno {error.errno})"
def append(path, text="stray\\n"):
    with open(path, "a") as handle:
        handle.write(text)
"""

# Closing lines: the metric says whether every attempted write failed; the reasons carry each.
CLOSE = """
print(json.dumps({"metrics": {"blocked": all(v.startswith("failed") for v in attempts.values())},
                  "reasons": {"blocked": json.dumps(attempts, sort_keys=True)}}))
"""


def build_run(root: Path, run_id: str = "r1", *, base: dict[str, str] | None = None) -> RunBuilder:
    """A finished run under ``root/exp/runs``: the agent changed counter.py and added notes.txt."""
    run = RunBuilder(root / "exp" / "runs" / run_id, cell="plain", repetition=int(run_id[1:] or 1))
    run.base(base or {"counter.py": "x = 1\n", "README.md": "hello\n", ".gitignore": "*.log\n"})
    run.repo.write("counter.py", "x = 2\n")
    run.repo.write("notes.txt", "the agent's notes\n")
    run.finish()
    return run


def scenario(folder: Path, body: str, *, test_command: str | None = None) -> Path:
    """A scenario with one script validator running ``body`` after :data:`PRELUDE`."""
    write_script(folder, "attack.py", PRELUDE + body + CLOSE)
    task = f'[task]\ntest_command = "{test_command}"\n' if test_command else ""
    return write_scenario(
        folder,
        task
        + """
[[validation]]
mode = "script"
name = "attack"
command = "attack.py"
metrics = ["blocked"]
timeout = 60
""",
    )


def run_validate(scenario_path: Path, experiment: Path, **options: Any) -> tuple[Summary, str]:
    """``trysquare validate`` in-process; the summary and what it printed."""
    out = io.StringIO()
    summary = validate(
        load_scenario(scenario_path),
        discover([experiment]),
        ValidateOptions(jobs=options.pop("jobs", 1), progress=False, **options),
        out=out,
    )
    return summary, out.getvalue()


def result(run: RunBuilder, name: str = "attack") -> dict[str, Any]:
    return json.loads((run.path / "validation" / f"{name}.json").read_text(encoding="utf-8"))


def attempts(run: RunBuilder) -> dict[str, str]:
    """What the validator says became of each write it attempted."""
    return json.loads(result(run)["reasons"]["blocked"])
