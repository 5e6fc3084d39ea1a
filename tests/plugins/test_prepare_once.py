"""``prepare`` runs once per run within ``validate``: ``run.tests()`` and hidden tests share it.

Each ``prepare`` knocks on a loopback HTTP server (``network = true``), saying whether the
hidden test file was in its tree; the suite and the hidden test both check that they run
at the very path ``prepare`` built the tree at (a virtual environment's scripts hold that
path), and read a module ``prepare`` wrote.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from trysquare.jail import availability
from trysquare.testing.builders import build_run

from tests.helpers import write_scenario, write_script
from tests.loopback import serve_in_background

JAILED = pytest.mark.skipif(
    not availability().available,
    reason="the jail cannot start here: without it every validator prepares its own copy",
)

PREPARE = """\
import os, sys, urllib.request
hidden = os.path.exists(os.path.join("tests", "test_hidden.py"))
with open("built.py", "w") as out:
    out.write(f"WHERE = {os.getcwd()!r}\\n")
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/prepare?hidden={int(hidden)}", timeout=20).read()
"""
CHECKS = """\
import os
import built
from calc import add

def test_where():
    assert os.getcwd() == built.WHERE

"""
BASE = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": CHECKS + "def test_adds():\n    assert add(2, 3) == 5\n",
}
HIDDEN = CHECKS + "def test_adds_zero():\n    assert add(0, 4) == 4\n"
VALIDATOR = """
from trysquare.assay import Assay, validator

@validator
def evaluate(run: Assay) -> dict:
    return {"tests": run.tests}

raise SystemExit(evaluate.cli())
"""


@pytest.fixture(autouse=True)
def _light_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    # The measured suite loads no installed pytest plugin (trysquare's own is not in the jail).
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


class _Knocks(BaseHTTPRequestHandler):
    heard: list[str]
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            self.heard.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def write_experiment(
    tmp_path: Path,
    site,
    *,
    prepare: str,
    runs: dict[str, dict[str, str]],
    suite: str = "tests/test_calc.py",
    task: str = "",
) -> tuple[Path, Path]:
    """Runs of the calc project, and a scenario with run.tests() and hidden tests (prepare:
    ``prepare`` is a Python script beside the scenario, given the words after it)."""
    # The plugin's source, installed as its entry point would load it.
    site("trysquare-hidden-tests", "hidden_tests_entry",
         "from trysquare_hidden_tests import trysquare_register_modes\n")  # fmt: skip
    experiment = tmp_path / "exp"
    for name, changes in runs.items():
        build_run(experiment / "runs" / name, base=BASE, changes=changes, cell=name)
    folder = tmp_path / "s"
    write_script(folder, "score.py", VALIDATOR)
    (folder / "prepare.py").write_text(prepare)
    (folder / "hidden").mkdir()
    (folder / "hidden" / "test_hidden.py").write_text(HIDDEN)
    pytest_words = f"{sys.executable} -m pytest -q -p no:cacheprovider"
    scenario = write_scenario(
        folder,
        f"""
        [task]
        prepare = ["{sys.executable} {folder / "prepare.py"}{task and " "}{task}"]
        test_command = "{pytest_words} {suite}"
        network = true

        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["tests"]

        [[validation]]
        mode = "hidden-tests"
        files = {{ "tests/test_hidden.py" = "hidden/test_hidden.py" }}
        command = "{pytest_words} --junitxml={{junit}} tests/test_hidden.py"
        fail_to_pass = ["tests.test_hidden.test_adds_zero"]
        pass_to_pass = ["tests.test_hidden.test_where"]
        """,
    )
    return experiment, scenario


def result(experiment: Path, run: str, name: str) -> dict:
    path = experiment / "runs" / run / "validation" / f"{name}.json"
    return json.loads(path.read_text())


FIXED = {"calc.py": "def add(a, b):\n    return a + b\n"}


@pytest.mark.parametrize(
    ("jail", "per_run"),
    [pytest.param("on", 1, marks=JAILED), ("off", 2)],
)
def test_prepare_runs_once_per_run_for_the_suite_and_the_hidden_tests(
    cli, site, tmp_path: Path, jail: str, per_run: int
) -> None:
    """In the jail, once per run; without it (a copy cannot be shown at the path prepare
    built it at), once per validator, as before. Never with the hidden file in the tree."""
    if jail == "off":
        cli.env["TRYSQUARE_JAIL"] = "off"  # the CLI's own environment, taken before the test
    heard: list[str] = []
    handler = type("Knocks", (_Knocks,), {"heard": heard})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_background(server)
    runs = {"fixed": FIXED, "broken": {"notes.md": "no\n"}}
    experiment, scenario = write_experiment(
        tmp_path, site, prepare=PREPARE, runs=runs, task=str(server.server_address[1])
    )
    try:
        done = cli("validate", scenario, experiment, "--no-progress", "--jobs", "2")
    finally:
        server.shutdown()
        server.server_close()
    assert (experiment / "runs" / "fixed" / "validation").is_dir(), done.stdout + done.stderr
    found = {
        run: (
            result(experiment, run, "script")["metrics"],
            result(experiment, run, "hidden-tests")["metrics"],
        )
        for run in runs
    }
    assert found == {
        "fixed": ({"tests": True}, {"resolved": True, "f2p": 1.0, "p2p": 1.0}),
        "broken": ({"tests": False}, {"resolved": False, "f2p": 0.0, "p2p": 1.0}),
    }, (done.stdout, done.stderr)
    assert heard == ["/prepare?hidden=0"] * (per_run * len(runs)), heard
    assert done.returncode == 0, done.stdout + done.stderr
