"""Warm validators (issue 35 item 1): an assay validator is imported once per validate and
worker and forks one child per run; what it records is byte for byte what the cold path
records, a child's crash is that run's failure only, and nothing carries from run to run."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from trysquare import _warm, runner
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import build_matrix

from tests.helpers import write_scenario, write_script

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="warm servers fork (Linux only here)"
)

# One behaviour per repetition modulo 8: a plain result (whose reason counts the calls this
# process made, and whether the clone refused a write), a bug, exits and signals of every kind,
# a loop past the timeout, an unjudged metric, a missing metric. The top level prints too.
VARIED = """
import os, signal, sys, time
from trysquare.assay import Assay, Metric, validator

print("the top level speaks", file=sys.stderr)
CALLS = []


@validator
def evaluate(run: Assay) -> dict:
    CALLS.append(run.repetition)
    kind = run.repetition % 9
    if kind == 1:
        raise ValueError("a bug in the validator")
    if kind == 2:
        os._exit(3)
    if kind == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == 4:
        import ctypes
        ctypes.string_at(0)
    if kind == 5:
        while True:  # past the timeout, asleep: a busy loop burnt a core for all of it
            time.sleep(0.05)
    if kind == 6:
        return {"changed": Metric.unjudged("this run cannot tell")}
    if kind == 7:
        return {}
    if kind == 8:
        os.write(1, b"not the verdict ")  # past cli's guard of stdout: unreadable JSON
    print("chatty", run.cell)
    try:
        with open(run.repo / "planted.txt", "w") as handle:
            handle.write("x")
        refused = False
    except OSError:
        refused = True
    scratch = os.environ["TMPDIR"]
    with open(os.path.join(scratch, "mine.txt"), "w") as handle:
        handle.write("scratch is writable")
    return {"changed": Metric(bool(run.touched), f"calls {len(CALLS)}; clone refused a write: {refused}")}


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
"""


def _scenario(folder: Path, body: str, *, warm: bool, timeout: float = 2.0) -> Path:
    write_script(folder, "score.py", body)
    return write_scenario(
        folder,
        f"""
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["changed"]
        timeout = {timeout}
        {"" if warm else "warm = false"}
    """,
    )


def _matrix(folder: Path, count: int) -> Path:
    build_matrix(
        folder,
        [(f"r{index}", f"c{index % 2}", index) for index in range(count)],
        base={"a.py": "a = 1\n"},
        changes={"a.py": "a = 2\n"},
        response="done\n",
    )
    return folder


def _validate(scenario: Path, experiment: Path, *, jobs: int = 1, replay: bool = False) -> int:
    summary = runner.validate(
        load_scenario(scenario),
        discover([experiment]),
        runner.ValidateOptions(jobs=jobs, progress=False, force=replay, replay=replay),
        out=io.StringIO(),
    )
    return summary.exit_code


def _recorded(experiment: Path) -> dict[str, bytes]:
    """Every file validate wrote, the result documents without what differs between any two
    validations (their duration, and the MAC that covers it)."""
    files = {}
    for path in sorted(experiment.rglob("*")):
        relative = path.relative_to(experiment)
        if not path.is_file() or {".git", ".trysquare", "repo"} & set(relative.parts):
            continue
        if path.name.endswith(".history.jsonl"):
            continue  # the second validate's own record of replacing the first
        data = path.read_bytes()
        if path.parent.name == "validation" and path.suffix == ".json":
            document = json.loads(data)
            document.pop("duration")
            document.pop("signature")
            data = json.dumps(document, sort_keys=True).encode()
        files[str(relative)] = data
    return files


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many runs a warm server's child answered."""
    answered: list[int] = []
    real = _warm.run_warm

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        done = real(*args, **kwargs)
        if done is not None:
            answered.append(1)
        return done

    monkeypatch.setattr(_warm, "run_warm", counting)
    yield answered


@pytest.mark.parametrize("jobs", [1, 2])
def test_warm_records_what_cold_records_byte_for_byte(
    tmp_path: Path, served: list[int], jobs: int
) -> None:
    experiment = _matrix(tmp_path / "exp", 18)
    # The same script at the same path (a traceback names it): only the table's key changes.
    cold = _scenario(tmp_path / "s", VARIED, warm=False)
    assert _validate(cold, experiment, jobs=jobs) == 1  # the crashing runs are invalid
    assert not served
    cold_files = _recorded(experiment)
    warm = _scenario(tmp_path / "s", VARIED, warm=True)
    assert _validate(warm, experiment, jobs=jobs, replay=True) == 1
    assert len(served) == 18
    warm_files = _recorded(experiment)
    assert warm_files.keys() == cold_files.keys()
    for name, data in cold_files.items():
        assert warm_files[name] == data, name
    # What was compared is what the issue lists, each kind of ending among it.
    results = {
        run: json.loads(cold_files[f"runs/r{run}/validation/script.json"]) for run in range(9)
    }
    assert results[0]["state"] == "valid"
    assert results[0]["reasons"]["changed"] == "calls 1; clone refused a write: True"
    assert results[0]["metrics"] == {"changed": True}
    assert "ValueError: a bug in the validator" in results[1]["error"]
    assert "exited with code 3" in results[2]["error"]
    assert "killed by signal 9" in results[3]["error"]
    assert "killed by signal 11" in results[4]["error"]
    assert "exceeded its timeout" in results[5]["error"]
    assert results[6]["metrics"] == {"changed": None}
    assert "did not return the declared metric 'changed'" in results[7]["error"]
    assert results[8]["state"] == "invalid"
    assert cold_files["runs/r8/validation/script/stdout"].startswith(b"not the verdict {")
    stderr = cold_files["runs/r0/validation/script.stderr"]
    assert stderr.startswith(b"the top level speaks\n")
    # No state from run 0 reached run 9 (same server, same worker at --jobs 1).
    assert json.loads(warm_files["runs/r9/validation/script.json"])["reasons"][
        "changed"
    ].startswith("calls 1;")


STATEFUL = """
import os
from trysquare.assay import Assay, validator

SEEN = []


@validator
def evaluate(run: Assay) -> dict:
    SEEN.append(run.repetition)
    os.environ["LEFT_BY_A_RUN"] = str(run.repetition)
    return {"changed": f"{SEEN}; parent {os.getppid() == int(os.environ['RUNNER_PID'])}"}


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
"""


def test_a_run_changing_module_state_is_not_seen_by_the_next(
    tmp_path: Path, served: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_PID", str(os.getpid()))
    experiment = _matrix(tmp_path / "exp", 4)
    scenario = _scenario(tmp_path / "s", STATEFUL, warm=True)
    assert _validate(scenario, experiment) == 0
    assert len(served) == 4
    for index in range(4):
        result = json.loads(
            (experiment / "runs" / f"r{index}" / "validation" / "script.json").read_text()
        )
        # Each run sees only its own append; its parent is the warm server, not trysquare.
        assert result["metrics"]["changed"] == f"[{index}]; parent False"


# What a run sees of its environment: the names in order and their values, as Python holds
# them and as a process it starts gets them (the C library's copy).
ENVIRONMENT = """
import os, subprocess, sys
from trysquare.assay import Assay, validator


def shown(pairs):
    # TMPDIR is the run's scratch folder (its working directory): which of the folders in turn
    # a run gets is not what is compared.
    here = os.getcwd()
    return ";".join(
        f"{name}={'<scratch>' if name == 'TMPDIR' and value == here else value}"
        for name, value in pairs if name != "TRYSQUARE_VALIDATION"
    )


@validator
def evaluate(run: Assay) -> dict:
    started = subprocess.run(
        [sys.executable, "-c", "import os; print(repr(list(os.environ.items())))"],
        capture_output=True, text=True, check=True,
    )
    import ast
    return {"changed": shown(os.environ.items()) + " | " + shown(ast.literal_eval(started.stdout))}


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
"""


def test_a_warm_run_sees_the_environment_a_cold_one_sees_in_its_order(
    tmp_path: Path, served: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the values that differ from the server's are set in a child (the run's TMPDIR, a
    # name the server's environment has with another value): each keeps its place.
    monkeypatch.setenv("TMPDIR", "/the/server/has/another")
    monkeypatch.setenv("AFTER_TMPDIR", "here")
    experiment = _matrix(tmp_path / "exp", 3)
    cold = _scenario(tmp_path / "s", ENVIRONMENT, warm=False, timeout=30)
    assert _validate(cold, experiment) == 0
    cold_files = _recorded(experiment)
    warm = _scenario(tmp_path / "s", ENVIRONMENT, warm=True, timeout=30)
    assert _validate(warm, experiment, replay=True) == 0
    assert len(served) == 3
    warm_files = _recorded(experiment)
    assert warm_files == cold_files
    seen = json.loads(cold_files["runs/r1/validation/script.json"])["metrics"]["changed"]
    inside, started = seen.split(" | ")
    assert inside == started
    assert "TMPDIR=/the/server" not in inside and "TMPDIR=<scratch>" in inside
    assert inside.index("TMPDIR=") < inside.index("AFTER_TMPDIR=here")


def test_warm_false_and_other_executables_keep_the_cold_path(
    tmp_path: Path, served: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_PID", str(os.getpid()))
    experiment = _matrix(tmp_path / "exp", 2)
    scenario = _scenario(tmp_path / "s", STATEFUL, warm=False)
    assert _validate(scenario, experiment) == 0
    result = json.loads((experiment / "runs" / "r1" / "validation" / "script.json").read_text())
    assert result["metrics"]["changed"] == "[1]; parent True"
    # A Python script without the @validator shape: cold, however it is written.
    plain = _scenario(
        tmp_path / "p", STATEFUL.replace('if __name__ == "__main__":\n    ', ""), warm=True
    )
    assert _validate(plain, experiment, replay=True) == 0
    assert not served


@pytest.mark.parametrize(
    ("shape", "capable"),
    [
        ('if __name__ == "__main__":\n    raise SystemExit(evaluate.cli())\n', True),
        ('if __name__ == "__main__":\n    sys.exit(evaluate.cli())\n', True),
        ("raise SystemExit(evaluate.cli())\n", False),
        (
            'if __name__ == "__main__":\n    print("hello")\n    raise SystemExit(evaluate.cli())\n',
            False,
        ),
        ('if __name__ == "__main__":\n    raise SystemExit(other.cli())\n', False),
    ],
)
def test_which_scripts_are_warm_capable(tmp_path: Path, shape: str, capable: bool) -> None:
    body = (
        "import sys\nfrom trysquare.assay import validator\n\n@validator\ndef evaluate(run):\n"
        "    return {}\n\n" + shape
    )
    script = write_script(tmp_path, "v.py", body)
    found = _warm.entry_point(script, os.environ.get("PATH"))
    assert found == ("evaluate" if capable else None)


def test_scripts_are_parsed_one_at_a_time_by_a_validates_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CPython 3.11's AST constructor fails ("recursion depth mismatch") when two threads
    # parse at once; workers asking about scripts together must take turns.
    import ast
    import threading
    import time

    real_parse = ast.parse
    inside: list[int] = []
    overlapped: list[int] = []

    def slow_parse(*args: object, **kwargs: object) -> ast.Module:
        inside.append(1)
        if len(inside) > 1:
            overlapped.append(len(inside))
        time.sleep(0.02)
        try:
            return real_parse(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            inside.pop()

    monkeypatch.setattr(ast, "parse", slow_parse)
    scripts = [write_script(tmp_path, f"v{index}.py", STATEFUL) for index in range(6)]
    found: list[str | None] = []
    threads = [
        threading.Thread(target=lambda s=s: found.append(_warm.entry_point(s, None)))
        for s in scripts
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == ["evaluate"] * 6
    assert not overlapped, f"{max(overlapped)} threads parsed at once"


def test_another_interpreter_is_not_warm_capable(tmp_path: Path) -> None:
    script = tmp_path / "v.py"
    script.write_text(
        "#!/bin/sh\nfrom trysquare.assay import validator\n\n@validator\ndef evaluate(run):\n"
        '    return {}\n\nif __name__ == "__main__":\n    raise SystemExit(evaluate.cli())\n'
    )
    assert _warm.entry_point(script, os.environ.get("PATH")) is None


def test_a_module_that_fails_at_import_runs_cold(tmp_path: Path, served: list[int]) -> None:
    # Reading argv at the top level works cold (argv[1] is there) and not in the server:
    # the server gives up, and every run is what its cold run records.
    body = STATEFUL.replace("SEEN = []", "SEEN = []\nCONTEXT = __import__('sys').argv[1]")
    experiment = _matrix(tmp_path / "exp", 2)
    scenario = _scenario(tmp_path / "s", body, warm=True)
    os.environ["RUNNER_PID"] = "0"
    try:
        assert _validate(scenario, experiment) == 0
    finally:
        del os.environ["RUNNER_PID"]
    assert not served


def test_an_executor_running_tasks_elsewhere_gets_no_server(tmp_path: Path) -> None:
    # What validate does for an executor without runs_tasks_here (a cluster's workers).
    script = write_script(tmp_path, "v.py", STATEFUL)
    entry = _warm.entry_point(script, os.environ.get("PATH"))
    assert entry == "evaluate"
    with _warm.servers(enabled=False):
        assert not _warm.serving()
        done = _warm.run_warm(
            script,
            entry,
            [str(script), "context.json"],
            cwd=str(tmp_path),
            timeout=5,
            base_env=dict(os.environ),
            env=dict(os.environ),
            writable=[tmp_path],
        )
    assert done is None


SLEEPER = """
import os, sys, time
from pathlib import Path
from trysquare.assay import Assay, validator


@validator
def evaluate(run: Assay) -> dict:
    (Path(sys.argv[1]).parent / "pids").write_text(f"{os.getpid()} {os.getppid()}")
    time.sleep(60)
    return {"changed": True}


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_an_interrupted_validate_leaves_neither_server_nor_child(tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    experiment = _matrix(tmp_path / "exp", 1)
    scenario = _scenario(tmp_path / "s", SLEEPER, warm=True, timeout=120)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    process = subprocess.Popen(
        [sys.executable, "-m", "trysquare", "validate", str(scenario), str(experiment), "--no-progress"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    marker = experiment / "runs" / "r0" / "validation" / "script" / "pids"
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child, server = (int(word) for word in marker.read_text().split())
    assert server != process.pid  # served warm
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 130
    deadline = time.monotonic() + 5
    while not (_gone(child) and _gone(server)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child) and _gone(server)


@pytest.mark.parametrize(
    "started",
    [
        "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()",
        "import subprocess\nHELPER = subprocess.Popen(['sleep', '30'])",
    ],
)
def test_a_module_starting_a_thread_or_process_at_import_runs_cold(
    tmp_path: Path, served: list[int], started: str
) -> None:
    body = STATEFUL.replace("SEEN = []", f"SEEN = []\n{started}")
    experiment = _matrix(tmp_path / "exp", 1)
    scenario = _scenario(tmp_path / "s", body, warm=True)
    os.environ["RUNNER_PID"] = str(os.getpid())
    try:
        assert _validate(scenario, experiment) == 0
    finally:
        del os.environ["RUNNER_PID"]
    assert not served
    result = json.loads((experiment / "runs" / "r0" / "validation" / "script.json").read_text())
    assert result["metrics"]["changed"] == "[0]; parent True"


def test_cold_validators_beside_a_warm_one_leave_its_server_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cold confined run ends the strays it leaves when it finishes: a warm server, a child
    # of validate in a session of its own, must never be taken for one.
    starts: list[int] = []
    real = _warm._Server.start

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        starts.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_warm._Server, "start", counting)
    monkeypatch.setenv("RUNNER_PID", str(os.getpid()))
    experiment = _matrix(tmp_path / "exp", 12)
    folder = tmp_path / "s"
    write_script(folder, "warm.py", STATEFUL)
    write_script(folder, "cold.py", STATEFUL.replace('"changed"', '"other"'))
    scenario = write_scenario(folder, """
        [[validation]]
        name = "warm"
        mode = "script"
        command = "warm.py"
        metrics = ["changed"]

        [[validation]]
        name = "cold"
        mode = "script"
        command = "cold.py"
        metrics = ["other"]
        warm = false
    """)  # fmt: skip
    assert _validate(scenario, experiment, jobs=2) == 0
    assert len(starts) <= 2  # one per worker thread, never started again
    for index in range(12):
        run = experiment / "runs" / f"r{index}" / "validation"
        assert json.loads((run / "warm.json").read_text())["metrics"]["changed"].endswith(
            "parent False"
        )
        assert json.loads((run / "cold.json").read_text())["metrics"]["other"].endswith(
            "parent True"
        )


@pytest.mark.skipif(sys.platform != "linux", reason="strays are hunted on Linux")
def test_a_stray_hunt_racing_a_server_start_never_takes_the_server_for_a_stray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker's cold run ends its strays just as a warm server has been started (in a
    session of its own, a child of validate): the hunt waits until the server is known as
    ours, and leaves it alone."""
    import subprocess
    import threading

    from trysquare import _process

    _process._become_subreaper()  # as a confined cold start makes it
    script = write_script(tmp_path / "s", "warm.py", STATEFUL)
    real_popen = subprocess.Popen
    hunted = threading.Event()

    class PopenThenHunt(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args, **kwargs)

            def hunt() -> None:  # a finished cold child's strays, by its (long gone) leader
                _process._end_strays(leader=2**22 + 1, token="not-the-servers")
                hunted.set()

            threading.Thread(target=hunt, daemon=True).start()
            hunted.wait(1.0)  # without the start's lock the hunt runs to its end meanwhile

    monkeypatch.setattr(subprocess, "Popen", PopenThenHunt)
    env = {**os.environ, "RUNNER_PID": str(os.getpid())}
    server = _warm._Server.start(script, "evaluate", env)
    monkeypatch.setattr(subprocess, "Popen", real_popen)
    try:
        assert hunted.wait(10.0)  # the hunt ran, once the server was known as ours
        assert server.alive()
    finally:
        server.stop()
