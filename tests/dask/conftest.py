"""A small matrix for the dask executor: valid runs, an invalid run, a timeout, a form."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from trysquare.testing import build_matrix

from tests.conftest import share_signing_key
from tests.dask.cli_cluster import CommandLineCluster, quiet_environment
from tests.helpers import write_scenario, write_script
from tests.judge.conftest import KEY, KEY_ENV

# Scores a run; "bad" runs exit non-zero (invalid), "hang" runs outlive the timeout,
# a run holding kill-worker.txt kills the dask worker running it once (kill-worker-later.txt:
# once, a second after it started), kill-worker-always.txt every time.
SCORE = """\
import json, os, signal, sys, time
from pathlib import Path

context = json.load(open(sys.argv[1]))
run = Path(context["repo"]).parent
# In the validator's archive folder: the only place beside the run it may write.
marker = Path(sys.argv[1]).parent / "killed-worker.txt"
if (run / "kill-worker-always.txt").exists():
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(30)
if (run / "kill-worker-later.txt").exists() and not marker.exists():
    time.sleep(1)  # what the worker recorded before has been reported by now
    marker.write_text(str(os.getppid()))
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(30)
if (run / "kill-worker.txt").exists() and not marker.exists():
    marker.write_text(str(os.getppid()))
    os.kill(os.getppid(), signal.SIGKILL)  # the validator's parent is the dask worker
    time.sleep(30)
delay = float((run / "delay.txt").read_text()) if (run / "delay.txt").exists() else 0.0
if delay:  # says it started (and who it is), beside its context
    (Path(sys.argv[1]).parent / "started.txt").write_text(str(os.getpid()))
time.sleep(delay)
if run.name.startswith("bad"):
    print("this run is broken on purpose", file=sys.stderr)
    sys.exit(3)
if run.name.startswith("hang"):
    time.sleep(30)
print(json.dumps({
    "metrics": {"changed": bool(context["touched"]), "files": len(context["files"])},
    "reasons": {"changed": "touched: " + ", ".join(sorted(context["touched"]))},
}))
"""

SCENARIO = """\
[[validation]]
name = "score"
mode = "script"
command = "score.py"
metrics = ["changed", "files"]
timeout = {timeout}

[[validation]]
mode = "form"
pieces = ["diff"]
metrics = ["readable"]
"""


class Matrix:
    """A scenario and an experiment of runs copied from one real git run."""

    def __init__(self, root: Path, ids: list[str], *, timeout: float = 2.0) -> None:
        self.root = root
        self.folder = root / "scn"
        write_script(self.folder, "score.py", SCORE)
        self.scenario = write_scenario(self.folder, SCENARIO.format(timeout=timeout))
        self.exp = root / "exp"
        self.template = root / "template"
        self.ids: list[str] = []
        for number, run_id in enumerate(ids):
            self.add(run_id, cell=f"c{number % 2}", repetition=number + 1)

    def add(self, run_id: str, *, cell: str, repetition: int) -> Path:
        """One more run, a copy of the one real git run (built once, at ``template``)."""
        folders = build_matrix(
            self.exp, [(run_id, cell, repetition)], template=self.template,
            base={"counter.py": "count = 1\n", "README.md": "counter\n"},
            changes={"counter.py": "count = 0\n"}, response="Started the count at zero.\n",
        )  # fmt: skip
        self.ids.append(run_id)
        return folders[run_id]

    def copy(self, name: str) -> Path:
        """The experiment copied before validation, for another executor to validate."""
        target = self.root / name
        shutil.copytree(self.exp, target, symlinks=True)
        return target

    def results(self, exp: Path | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        """Every ``validation/*.json`` by (run, validator), parsed (a half file fails here)."""
        found = {}
        for path in sorted((exp or self.exp).glob("runs/*/validation/*.json")):
            found[(path.parent.parent.name, path.stem)] = json.loads(
                path.read_text(encoding="utf-8")
            )
        return found

    def leftovers(self, exp: Path | None = None) -> list[Path]:
        return sorted((exp or self.exp).rglob("*.tmp"))


@pytest.fixture
def matrix(tmp_path: Path) -> Callable[..., Matrix]:
    def make(ids: list[str], **kwargs: Any) -> Matrix:
        return Matrix(tmp_path, ids, **kwargs)

    return make


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    """A result without what differs between two copies of an experiment.

    ``duration`` is a clock; ``context_digest`` covers the context's absolute
    paths, which name each copy's folder (the contexts are compared apart); the
    ``signature`` covers both.
    """
    varying = ("duration", "context_digest", "signature")
    return {k: v for k, v in document.items() if k not in varying}


from tests.judge.conftest import lab  # noqa: F401 - the judge laboratory, for the judge's bound

# The tests that start clusters, and the users of the one below, carry this group: on one
# xdist worker the shared cluster starts once, and no two clusters start at once on two cores.
GROUP = pytest.mark.xdist_group("dask-clusters")


@pytest.fixture(scope="package")
def command_line_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CommandLineCluster]:
    """``dask scheduler`` and two single-thread ``dask worker``s, shared by the tests here.

    Starting one costs seconds of imports; the tests that use it leave its workers
    alive (they only ever kill validators), so one cluster serves them all. Its
    workers hold the judge laboratory's key, as an operator's workers hold theirs, and it
    runs with the quiet settings the plugin's README gives an operator: it lives through
    the other tests of its group, and Dask's clockwork (stack sampling, monitors) kept it
    busy all that time.
    """
    root = tmp_path_factory.mktemp("dask-cli")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TRYSQUARE_LOAD_PLUGINS", "TRYSQUARE_BLOCK_PLUGINS")
    }
    # Its workers sign results with the key the client checks them with (as an operator's must).
    env.update({"XDG_CACHE_HOME": str(share_signing_key(root / "cache")), KEY_ENV: KEY})
    env.update(quiet_environment())
    with CommandLineCluster(
        root / "cluster", workers=2, threads=1, env=env, nanny=False
    ) as cluster:
        yield cluster


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """End the shared cluster once its last user is done, not at the end of the session.

    tests/ is no package, so "package" scope lasts the whole session: the scheduler and its
    two workers, idle, kept a tenth of a core busy (heartbeats, dask's profiler) for as
    long as the rest of the suite ran. Its users share one xdist group, so they run in
    collection order on one worker: after the last of them, nothing asks for it again (a
    later one would start a new cluster, as the first did).
    """
    if nextitem is None or "command_line_cluster" not in getattr(item, "fixturenames", ()):
        return
    users = [
        i for i in item.session.items if "command_line_cluster" in getattr(i, "fixturenames", ())
    ]
    if users and users[-1] is item:
        definitions = item._fixtureinfo.name2fixturedefs["command_line_cluster"]  # type: ignore[attr-defined]
        definitions[-1].finish(item._request)  # type: ignore[attr-defined]
