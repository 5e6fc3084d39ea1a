"""Importing trysquare.assay stays cheap: it is paid once per validator run."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = [
    "pluggy",
    "attrs",
    "attr",
    "cattrs",
    "httpx",
    "rich",
    "subprocess",
    "pathlib",
    "tempfile",
    "trysquare.plugins",
    "trysquare.hookspecs",
    "trysquare.sessions",
    "trysquare._suite",
    "trysquare._process",
    "trysquare.git",
    "trysquare.scenario",
]


def test_importing_the_assay_loads_nothing_heavy() -> None:
    probe = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import trysquare.assay\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert "trysquare.assay" in loaded
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))
