"""A Node project experiment end to end: an npm-installed runner, `prepare = ["npm ci"]`.

The runner is a package installed from a tarball the project vendors (made with `npm pack`
at test time), so `npm ci --offline` needs no registry: `node_modules` is rebuilt in the
suite's copy (ignored files never reach it), npm's cache lives in the jail's `$HOME`, and
the runner's TAP output is read. The second test is issue 36's "done when" in one
experiment: the suite, the `npm test`-redefining run, `first_write('package.json')` for an
`npm install` call, hidden tests through node's JUnit reporter, and `npm ci` once per run
(the project's `postinstall` knocks on a loopback server). Skipped, saying why, where node
or npm is absent.
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


def _project(tmp_path: Path, scripts: dict[str, str] | None = None) -> dict[str, str | bytes]:
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
        "scripts": {"test": "tiny-runner", **(scripts or {})},
        "devDependencies": {"tiny-runner": "file:vendor/tiny-runner-1.0.0.tgz"},
    }
    (project / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    _npm(["install", "--ignore-scripts"], project, home)
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


KNOCK = """const http = require("node:http");
http.get(`http://127.0.0.1:${require("./port.json")}/npm-ci`, (reply) => reply.resume());
"""
HIDDEN = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const { add } = require('../src/add.js');\n"
    "test('adds negatives', () => assert.strictEqual(add(-2, -3), -5));\n"
    "test('adds zero', () => assert.strictEqual(add(0, 4), 4));\n"
)
SCORE = """
from trysquare.assay import Assay, validator

@validator
def evaluate(run: Assay) -> dict:
    return {"tests": run.tests, "manifest_call": lambda: run.first_write("package.json")}

raise SystemExit(evaluate.cli())
"""
NPM_INSTALL = [
    {"type": "message", "message": {"role": "user", "timestamp": 1,
                                    "content": [{"type": "text", "text": "fix add()"}]}},
    {"type": "message", "message": {
        "role": "assistant", "stopReason": "toolUse", "timestamp": 1,
        "content": [{"type": "toolCall", "id": "c0", "name": "bash",
                     "arguments": {"command": "npm install ./vendor/left-pad-1.0.0.tgz"}}]}},
    {"type": "message", "message": {
        "role": "toolResult", "toolCallId": "c0", "toolName": "bash", "isError": False,
        "timestamp": 1, "content": [{"type": "text", "text": "added 1 package"}]}},
]  # fmt: skip


def _installed_left_pad(tmp_path: Path, base: dict[str, str | bytes]) -> dict[str, str | bytes]:
    """What `npm install vendor/left-pad-1.0.0.tgz` leaves in the project (offline): the
    package, and package.json and the lockfile rewritten, so `npm ci` still installs."""
    pad = tmp_path / "left-pad"
    pad.mkdir()
    (pad / "package.json").write_text(json.dumps({"name": "left-pad", "version": "1.0.0"}))
    (pad / "index.js").write_text("module.exports = (s, n) => String(s).padStart(n);\n")
    project = tmp_path / "installing"
    for name, data in base.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    home = tmp_path / "npm-home"
    _npm(["pack", "--pack-destination", str(project / "vendor")], pad, home)
    _npm(["install", "--ignore-scripts", "./vendor/left-pad-1.0.0.tgz"], project, home)
    return {
        name: (project / name).read_bytes()
        if name.endswith(".tgz")
        else (project / name).read_text()
        for name in ("package.json", "package-lock.json", "vendor/left-pad-1.0.0.tgz")
    }


def test_issue_36_a_node_project_experiment_validates_as_documented(
    cli, site, tmp_path: Path
) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.loopback import serve_in_background
    from tests.plugins.conftest import HIDDEN_TESTS_SRC  # puts the plugin's source on the path

    assert HIDDEN_TESTS_SRC.is_dir()

    knocks: list[str] = []

    class Knocks(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name for it
            knocks.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Knocks)
    serve_in_background(server)
    base = _project(tmp_path, scripts={"postinstall": "node knock.js"})
    base["knock.js"] = KNOCK
    base["port.json"] = str(server.server_address[1])
    site("trysquare-hidden-tests", "hidden_tests_entry",
         "from trysquare_hidden_tests import trysquare_register_modes\n")  # fmt: skip
    experiment = tmp_path / "exp"
    fixed = {"src/add.js": "exports.add = (a, b) => a + b;\n"}
    installed = _installed_left_pad(tmp_path, base)
    runs = {
        "fixed": (fixed, None),
        "broken": ({"README.md": "I tried.\n"}, None),
        "cheat": ({"package.json": str(base["package.json"]).replace(
            '"test": "tiny-runner"', '"test": "echo \'# tests 2\'"')}, None),
        "installer": ({**fixed, **installed}, NPM_INSTALL),
    }  # fmt: skip
    for name, (changes, session) in runs.items():
        build_run(experiment / "runs" / name, base=base, changes=changes, cell=name,
                  session=session)  # fmt: skip
    folder = tmp_path / "s"
    write_script(folder, "score.py", SCORE)
    (folder / "hidden").mkdir()
    (folder / "hidden" / "hidden.test.js").write_text(HIDDEN)
    # The scenario as docs/javascript.md writes it: the runner named, npm ci first,
    # the hidden tests through node's JUnit reporter.
    scenario = write_scenario(
        folder,
        """
        [task]
        prepare = ["npm ci --offline --no-audit --no-fund"]
        test_command = "node_modules/.bin/tiny-runner"
        network = true

        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["tests", "manifest_call"]

        [[validation]]
        mode = "hidden-tests"
        files = { "test/hidden.test.js" = "hidden/hidden.test.js" }
        command = "node --test --test-reporter=junit --test-reporter-destination={junit} test/hidden.test.js"
        fail_to_pass = ["test.adds negatives"]
        pass_to_pass = ["test.adds zero"]
        """,
    )
    try:
        checked = cli("check", scenario, experiment)
        assert checked.returncode == 0, checked.stderr
        done = cli("validate", scenario, experiment, "--no-progress", "--jobs", "2")
    finally:
        server.shutdown()
        server.server_close()

    def result(run: str, name: str) -> dict:
        path = experiment / "runs" / run / "validation" / f"{name}.json"
        return json.loads(path.read_text())

    scored = {run: result(run, "script")["metrics"] for run in runs}
    resolved = {run: result(run, "hidden-tests")["metrics"]["resolved"] for run in runs}
    assert {run: metrics["tests"] for run, metrics in scored.items()} == {
        "fixed": True, "broken": False, "cheat": False, "installer": True,
    }, done.stdout  # fmt: skip
    assert resolved == {"fixed": True, "broken": False, "cheat": False, "installer": True}
    assert scored["installer"]["manifest_call"] == 0  # `npm install <tarball>` wrote it
    assert scored["fixed"]["manifest_call"] is None  # no session: unjudged, with why
    assert result("fixed", "script")["reasons"]["manifest_call"]
    # One `npm ci` per run, for run.tests() and the hidden tests together.
    assert knocks == ["/npm-ci"] * len(runs), knocks
