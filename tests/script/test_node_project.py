"""A Node project experiment end to end: an npm-installed runner, `prepare = ["npm ci"]`.

The runner is a package installed from a tarball the project vendors (made with `npm pack`
at test time), so `npm ci --offline` needs no registry: `node_modules` is rebuilt in the
suite's copy (ignored files never reach it), npm's cache lives in the jail's `$HOME`, and
the runner's TAP output is read. Skipped, saying why, where node or npm is absent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from trysquare.testing.builders import build_run

from tests.helpers import write_scenario, write_script

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None,
    reason="node and npm are not installed: the Node project cannot run",
)

RUNNER = """#!/usr/bin/env node
// Runs node's own test runner (TAP), as an npm-installed runner runs its own tests.
const { spawnSync } = require("node:child_process");
const argv = ["--test", "--test-reporter=tap", ...process.argv.slice(2)];
const done = spawnSync(process.execPath, argv, { stdio: "inherit" });
process.exit(done.status ?? 1);
"""
TEST = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const { add } = require('../src/add.js');\n"
    "test('adds', () => assert.strictEqual(add(2, 3), 5));\n"
    "test('adds zero', () => assert.strictEqual(add(0, 4), 4));\n"
)
VALIDATOR = """
from trysquare.assay import Assay, validator

@validator
def evaluate(run: Assay) -> dict:
    return {"tests": run.tests}

raise SystemExit(evaluate.cli())
"""


def _npm(args: list[str], cwd: Path, home: Path) -> None:
    done = subprocess.run(
        ["npm", *args, "--offline", "--no-audit", "--no-fund"],
        cwd=cwd, env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def _project(tmp_path: Path) -> dict[str, str | bytes]:
    """The project at base: a vendored runner, its lockfile, a broken add()."""
    runner = tmp_path / "tiny-runner"
    runner.mkdir()
    (runner / "package.json").write_text(
        json.dumps({"name": "tiny-runner", "version": "1.0.0", "bin": {"tiny-runner": "run.js"}})
    )
    (runner / "run.js").write_text(RUNNER)
    (runner / "run.js").chmod(0o755)
    project = tmp_path / "project"
    (project / "vendor").mkdir(parents=True)
    home = tmp_path / "npm-home"
    _npm(["pack", "--pack-destination", str(project / "vendor")], runner, home)
    manifest = {
        "name": "calc",
        "private": True,
        "scripts": {"test": "tiny-runner"},
        "devDependencies": {"tiny-runner": "file:vendor/tiny-runner-1.0.0.tgz"},
    }
    (project / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    _npm(["install"], project, home)
    return {
        ".gitignore": "node_modules/\n",
        "package.json": (project / "package.json").read_text(),
        "package-lock.json": (project / "package-lock.json").read_text(),
        "vendor/tiny-runner-1.0.0.tgz": (project / "vendor" / "tiny-runner-1.0.0.tgz").read_bytes(),
        "src/add.js": "exports.add = (a, b) => a - b;\n",
        "test/add.test.js": TEST,
    }


def test_a_node_project_with_an_npm_installed_runner_is_scored(cli, tmp_path: Path) -> None:
    base = _project(tmp_path)
    experiment = tmp_path / "exp"
    runs = {
        "fixed": {"src/add.js": "exports.add = (a, b) => a + b;\n"},
        "broken": {"README.md": "I tried.\n"},
        # npm test would now pass whatever the code does; the scenario's runner is not fooled.
        "cheat": {"package.json": str(base["package.json"]).replace(
            '"test": "tiny-runner"', '"test": "echo \'# tests 2\'"'
        )},
    }  # fmt: skip
    for name, changes in runs.items():
        build_run(experiment / "runs" / name, base=base, changes=changes, cell=name)
    write_script(tmp_path / "s", "score.py", VALIDATOR)
    scenario = write_scenario(
        tmp_path / "s",
        """
        [task]
        prepare = ["npm ci --offline --no-audit --no-fund"]
        test_command = "node_modules/.bin/tiny-runner"

        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["tests"]
        """,
    )
    assert cli("check", scenario, experiment).returncode == 0
    done = cli("validate", scenario, experiment, "--no-progress")
    results = {
        name: json.loads((experiment / "runs" / name / "validation" / "script.json").read_text())
        for name in runs
    }
    tests = {name: result["metrics"]["tests"] for name, result in results.items()}
    assert tests == {"fixed": True, "broken": False, "cheat": False}, (done.stdout, results)
    assert "2 tests ran; read from node --test's `tests N`" in results["broken"]["reasons"]["tests"]
