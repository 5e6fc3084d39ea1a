"""The script mode end to end: a matrix of healthy and hostile validators, through the CLI."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers import write_scenario, write_script

HEALTHY = """
import json, sys
context = json.load(open(sys.argv[1]))
print(json.dumps({"metrics": {"changed": bool(context["touched"]), "count": len(context["touched"])},
                  "reasons": {"changed": "" if context["touched"] else "nothing changed"}}))
"""

CRASH = "import sys; sys.stderr.write('boom: the validator fell over\\n'); sys.exit(3)\n"
GARBAGE = "print('{not json')\n"
SILENCE = "pass\n"
MISSING = "import json; print(json.dumps({'metrics': {'other': True}}))\n"
# The validator forks a grandchild that keeps stdout open and sleeps; the group must die.
TIMEOUT_WITH_GRANDCHILD = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
time.sleep(120)
"""
ARRAY = "print('[1, 2]')\n"


def build_matrix(make_run, count: int = 2) -> Path:
    for index in range(count):
        run = make_run(
            f"run{index}", cell="rule / high" if index % 2 else "nothing", repetition=index
        )
        run.base({"counter.py": "x = 1\n", "README.md": "hello\n"})
        run.repo.write("counter.py", f"x = {index + 2}\n")
        run.finish()
    return run.path.parents[1]


def scenario_for(
    folder: Path, body: str, metrics: str = '["changed"]', timeout: float = 30
) -> Path:
    write_script(folder, "score.py", body)
    return write_scenario(
        folder,
        f"""
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = {metrics}
        timeout = {timeout}
    """,
    )


def result(run_dir: Path, name: str = "script") -> dict:
    return json.loads((run_dir / "validation" / f"{name}.json").read_text())


def test_healthy_validator_records_metrics(cli, make_run, tmp_path: Path) -> None:
    experiment = build_matrix(make_run)
    scenario = scenario_for(tmp_path / "s", HEALTHY, '["changed", "count"]')
    done = cli("validate", scenario, experiment, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "2 runs: 2 valid"
    recorded = result(experiment / "runs" / "run0")
    assert recorded["state"] == "valid"
    assert recorded["metrics"] == {"changed": True, "count": 1}
    assert recorded["reasons"] == {}  # the empty reason was dropped
    assert recorded["validator"]["mode"] == "script"
    assert recorded["validator"]["digest"].startswith("sha256:")
    assert recorded["context_digest"].startswith("sha256:")
    measures = json.loads((experiment / "measures.json").read_text())
    assert [row["id"] for row in measures] == ["run0", "run1"]
    assert {row["state"] for row in measures} == {"valid"}
    context = json.loads(
        (experiment / "runs" / "run0" / "validation" / "script" / "context.json").read_text()
    )
    assert context["touched"] == ["counter.py"]


@pytest.mark.parametrize(
    ("body", "cause", "stderr_holds"),
    [
        (CRASH, "exited with code 3", "boom: the validator fell over"),
        (GARBAGE, "printed unreadable JSON", ""),
        (SILENCE, "printed nothing", ""),
        (MISSING, "omitted declared metric 'changed'", ""),
        (ARRAY, "not an object", ""),
    ],
    ids=["crash", "garbage", "silence", "missing-metric", "array"],
)
def test_hostile_validator_makes_runs_invalid(
    cli, make_run, tmp_path, body, cause, stderr_holds
) -> None:
    experiment = build_matrix(make_run)
    scenario = scenario_for(tmp_path / "s", body)
    done = cli("validate", scenario, experiment, "--no-progress")
    assert done.returncode == 1
    assert "2 runs: 2 invalid" in done.stdout
    assert "'rule / high'" in done.stdout and "not publishable" in done.stdout
    for run in ("run0", "run1"):
        recorded = result(experiment / "runs" / run)
        assert recorded["state"] == "invalid"
        assert cause in recorded["error"]
        stderr = (experiment / "runs" / run / "validation" / "script.stderr").read_text()
        assert stderr_holds in stderr
    measures = json.loads((experiment / "measures.json").read_text())
    assert all(
        row["state"] == "invalid" and row["errors"][0]["validator"] == "script" for row in measures
    )


def test_timeout_kills_the_whole_group(cli, make_run, tmp_path: Path) -> None:
    experiment = build_matrix(make_run, count=1)
    scenario = scenario_for(tmp_path / "s", TIMEOUT_WITH_GRANDCHILD, timeout=1)
    done = cli("validate", scenario, experiment, "--no-progress", timeout=60)
    assert done.returncode == 1
    recorded = result(experiment / "runs" / "run0")
    assert recorded["state"] == "invalid"
    assert "exceeded its timeout of 1 s" in recorded["error"]
    assert recorded["duration"] < 20
    leftovers = [
        p
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _cmdline(p).endswith("time.sleep(120)")
    ]
    assert leftovers == []


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def test_one_failing_validator_does_not_stop_the_others(cli, make_run, tmp_path: Path) -> None:
    experiment = build_matrix(make_run)
    folder = tmp_path / "s"
    write_script(folder, "good.py", HEALTHY)
    write_script(folder, "bad.py", CRASH)
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        name = "good"
        mode = "script"
        command = "good.py"
        metrics = ["changed"]
        [[validation]]
        name = "bad"
        mode = "script"
        command = "bad.py"
        metrics = ["other"]
    """,
    )
    done = cli("validate", scenario, experiment, "--no-progress")
    assert done.returncode == 1
    for run in ("run0", "run1"):
        assert result(experiment / "runs" / run, "good")["state"] == "valid"
        assert result(experiment / "runs" / run, "bad")["state"] == "invalid"


def test_extra_metric_declared_elsewhere_is_dropped_with_a_note(
    cli, make_run, tmp_path: Path
) -> None:
    experiment = build_matrix(make_run, count=1)
    folder = tmp_path / "s"
    write_script(
        folder, "a.py", "import json; print(json.dumps({'metrics': {'a': True, 'b': False}}))\n"
    )
    write_script(
        folder, "b.py", "import json; print(json.dumps({'metrics': {'b': True, 'extra': [1]}}))\n"
    )
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        name = "first"
        mode = "script"
        command = "a.py"
        metrics = ["a"]
        [[validation]]
        name = "second"
        mode = "script"
        command = "b.py"
        metrics = ["b"]
    """,
    )
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    first = result(experiment / "runs" / "run0", "first")
    assert first["metrics"] == {"a": True}
    assert first["notes"] == ["dropped metric 'b': it is declared by validator 'second'"]
    assert result(experiment / "runs" / "run0", "second")["metrics"] == {"b": True, "extra": [1]}
    row = json.loads((experiment / "measures.json").read_text())[0]
    assert row["metrics"] == {"a": True, "b": True, "extra": [1]}


def test_rerun_skips_unchanged_and_keeps_history(cli, make_run, tmp_path: Path) -> None:
    experiment = build_matrix(make_run, count=1)
    folder = tmp_path / "s"
    scenario = scenario_for(folder, HEALTHY)
    run_dir = experiment / "runs" / "run0"
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    first = result(run_dir)
    # Unchanged validator and context: nothing is re-run.
    again = cli("validate", scenario, experiment, "--no-progress")
    assert again.returncode == 0 and "[1/1]" not in again.stdout
    assert result(run_dir) == first
    assert not (run_dir / "validation" / "script.history.jsonl").exists()
    # --force re-runs; the replaced result goes to the history.
    assert cli("validate", scenario, experiment, "--no-progress", "--force").returncode == 0
    history = (run_dir / "validation" / "script.history.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in history] == [first]
    # An edited validator is a new digest: re-run without --force.
    write_script(folder, "score.py", HEALTHY.replace('"count"', '"tally"'))
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    assert "tally" in result(run_dir)["metrics"]
    assert len((run_dir / "validation" / "script.history.jsonl").read_text().splitlines()) == 2
    # A tree changed after its first measurement is not the agent's recorded work: invalid, named.
    (run_dir / "repo" / "new.py").write_text("y = 1\n")
    refused = cli("validate", scenario, experiment, "--no-progress")
    assert refused.returncode == 1 and "(added new.py)" in refused.stdout
    assert result(run_dir)["state"] == "invalid"
    # Recording the work again (the user removes the record) makes it a new context: re-run.
    (run_dir / ".trysquare" / "work.json").unlink()
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    assert result(run_dir)["metrics"]["changed"] is True
    assert len((run_dir / "validation" / "script.history.jsonl").read_text().splitlines()) == 4


def test_replay_rescores_archived_contexts(cli, make_run, tmp_path: Path) -> None:
    experiment = build_matrix(make_run, count=1)
    folder = tmp_path / "s"
    scenario = scenario_for(folder, MISSING)
    run_dir = experiment / "runs" / "run0"
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 1
    # "Fix a signature and re-score runs already paid for": the archived context is reused as
    # is, months later, even once the measured clone is gone.
    archived = (run_dir / "validation" / "script" / "context.json").read_bytes()
    shutil.rmtree(run_dir / "repo")
    write_script(folder, "score.py", HEALTHY.replace('context["touched"]', 'context["files"]'))
    done = cli("validate", scenario, experiment, "--no-progress", "--replay")
    assert done.returncode == 0, done.stdout + done.stderr
    assert result(run_dir)["state"] == "valid"
    assert (run_dir / "validation" / "script" / "context.json").read_bytes() == archived
    # By hand, on the archived context, the validator prints what was recorded.
    by_hand = __import__("subprocess").run(
        [str(folder / "score.py"), str(run_dir / "validation" / "script" / "context.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(by_hand.stdout)["metrics"] == result(run_dir)["metrics"]


def tree_digest(root: Path) -> dict[str, str]:
    digests = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            digests[str(path.relative_to(root))] = (
                hashlib.sha256(path.read_bytes()).hexdigest()
                + f":{stat.st_mode:o}:{stat.st_mtime_ns}"
            )
    return digests


def test_validation_never_modifies_the_measured_clone(cli, tmp_path: Path, make_run) -> None:
    run = make_run("r1", cell="c")
    run.base(
        {
            "counter.py": "def f():\n    return 1\n",
            "tests/test_counter.py": "import unittest\nfrom counter import f\nclass T(unittest.TestCase):\n"
            "    def test_f(self):\n        self.assertEqual(f(), 2)\n",
        }
    )
    run.repo.write("counter.py", "def f():\n    return 2\n")
    run.repo.write("notes.txt", "untracked\n")
    run.finish()
    experiment = run.path.parents[1]
    folder = tmp_path / "s"
    # A validator that runs the suite in a throwaway copy (the example validator does the same).
    write_script(
        folder,
        "suite.py",
        """
        from trysquare.assay import validator
        @validator
        def evaluate(run):
            return {"tests": run.tests, "delivered": bool(run.touched)}
        raise SystemExit(evaluate.cli())
    """,
    )
    scenario = write_scenario(
        folder,
        """
        [task]
        test_command = "python3 -m unittest discover -s tests"
        [[validation]]
        mode = "script"
        command = "suite.py"
        metrics = ["tests", "delivered"]
    """,
    )
    before = tree_digest(run.repo.path)
    done = cli("validate", scenario, experiment, "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert result(run.path)["metrics"]["tests"] is True
    assert tree_digest(run.repo.path) == before


# The sandbox would make these writes fail at the write (tests/security/test_sandbox_*.py);
# switched off, the clone guard must still catch them.
DETECTION_ONLY = {"TRYSQUARE_SANDBOX": "off"}


def test_a_validator_deleting_files_in_the_clone_is_caught_by_path(
    cli, make_run, tmp_path: Path
) -> None:
    experiment = build_matrix(make_run, count=1)
    scenario = scenario_for(
        tmp_path / "s",
        """
        import json, os, sys
        context = json.load(open(sys.argv[1]))
        os.remove(os.path.join(context["repo"], "README.md"))
        print(json.dumps({"metrics": {"changed": True}}))
    """,
    )
    done = cli("validate", scenario, experiment, "--no-progress", env=DETECTION_ONLY)
    assert done.returncode == 1
    assert "the measured clone changed during validation (deleted README.md)" in done.stdout
    recorded = result(experiment / "runs" / "run0")
    assert recorded["state"] == "invalid" and "deleted README.md" in recorded["error"]
    history = (experiment / "runs" / "run0" / "validation" / "script.history.jsonl").read_text()
    assert json.loads(history)["metrics"] == {
        "changed": True
    }  # what it claimed is kept as evidence


@pytest.mark.parametrize("damage", ['{"metrics": 5}', "{garbage", '["a list"]'])
def test_a_damaged_result_file_is_invalid_and_revalidated(
    cli, make_run, tmp_path: Path, damage: str
) -> None:
    experiment = build_matrix(make_run, count=2)
    scenario = scenario_for(tmp_path / "s", HEALTHY)
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    damaged = experiment / "runs" / "run0" / "validation" / "script.json"
    damaged.write_text(damage)
    report = cli("report", scenario, experiment)
    assert report.returncode == 1 and "Traceback" not in report.stderr, report.stderr
    rows = {row["id"]: row for row in json.loads((experiment / "measures.json").read_text())}
    assert rows["run0"]["state"] == "invalid"
    assert (
        "cannot be read" in rows["run0"]["errors"][0]["error"]
        or "not a trysquare result" in rows["run0"]["errors"][0]["error"]
    )
    assert rows["run1"]["state"] == "valid"
    # The next validate runs it again; the damaged file is kept in the history.
    again = cli("validate", scenario, experiment, "--no-progress")
    assert again.returncode == 0, again.stdout + again.stderr
    assert result(experiment / "runs" / "run0")["state"] == "valid"
    history = (experiment / "runs" / "run0" / "validation" / "script.history.jsonl").read_text()
    assert damage.strip("{}[]")[:4] in history


def test_a_run_whose_context_cannot_be_built_is_named_and_not_counted(
    cli, make_run, tmp_path: Path
) -> None:
    experiment = build_matrix(make_run, count=2)
    run_toml = experiment / "runs" / "run1" / "run.toml"
    run_toml.write_text(run_toml.read_text().replace('tag = "etalon-v1"', 'tag = "no-such-tag"'))
    scenario = scenario_for(tmp_path / "s", HEALTHY)
    done = cli("validate", scenario, experiment, "--no-progress")
    assert done.returncode == 1
    assert f"trysquare: skipped: {run_toml}" in done.stderr and "no-such-tag" in done.stderr
    assert (
        done.stdout.strip().splitlines()[-1] == "1 run: 1 valid; 1 run folder(s) could not be read"
    )
    # check, which spends nothing, finds it too.
    checked = cli("check", scenario, experiment)
    assert checked.returncode == 1 and "no-such-tag" in checked.stderr


def test_replay_checks_the_clone_too(cli, make_run, tmp_path: Path) -> None:
    experiment = build_matrix(make_run, count=1)
    folder = tmp_path / "s"
    scenario = scenario_for(folder, HEALTHY)
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    write_script(
        folder,
        "score.py",
        """
        import json, os, sys
        context = json.load(open(sys.argv[1]))
        os.remove(os.path.join(context["repo"], "README.md"))
        print(json.dumps({"metrics": {"changed": True}}))
    """,
    )
    done = cli("validate", scenario, experiment, "--no-progress", "--replay", env=DETECTION_ONLY)
    assert done.returncode == 1
    assert "the measured clone changed during validation (deleted README.md)" in done.stdout


@pytest.mark.parametrize(
    ("action", "said"),
    [
        ("open(os.path.join(context['repo'], 'stray.txt'), 'w').write('x')", "(added stray.txt)"),
        ("open(os.path.join(context['repo'], 'README.md'), 'a').write('x')", "(changed README.md)"),
    ],
    ids=["adds", "edits"],
)
def test_a_validator_writing_into_the_clone_is_caught(
    cli, make_run, tmp_path: Path, action: str, said: str
) -> None:
    experiment = build_matrix(make_run, count=1)
    scenario = scenario_for(
        tmp_path / "s",
        f"""
        import json, os, sys
        context = json.load(open(sys.argv[1]))
        {action}
        print(json.dumps({{"metrics": {{"changed": True}}}}))
    """,
    )
    done = cli("validate", scenario, experiment, "--no-progress", env=DETECTION_ONLY)
    assert done.returncode == 1
    assert f"the measured clone changed during validation {said}" in done.stdout
    assert result(experiment / "runs" / "run0")["state"] == "invalid"


LITTERING = """
import json, os, sys
# What the scratch folder held when this task began, then litter for the next task to meet.
sys.stderr.write(json.dumps({"cwd": os.getcwd(), "tmp": os.environ["TMPDIR"], "found": os.listdir(".")}))
os.makedirs("left/behind")
open("left/behind/file", "w").write("x")
print(json.dumps({"metrics": {"changed": True}}))
"""


@pytest.mark.skipif(
    sys.platform != "linux", reason="scratch folders are reused where strays are ended: Linux"
)
def test_each_task_starts_in_an_empty_scratch_folder_reused_once_emptied(
    cli, make_run, tmp_path: Path
) -> None:
    experiment = build_matrix(make_run, count=3)
    scenario = scenario_for(tmp_path / "s", LITTERING)
    done = cli("validate", scenario, experiment, "--jobs", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    seen = [
        json.loads((experiment / "runs" / f"run{i}" / "validation" / "script.stderr").read_text())
        for i in range(3)
    ]
    assert all(s["found"] == [] and s["tmp"] == s["cwd"] for s in seen)
    # Two folders in turn: each is emptied once the next task's validator has started (not on
    # the way to that start), and then serves the task after it.
    assert len({s["cwd"] for s in seen}) == 2 and seen[0]["cwd"] == seen[2]["cwd"]
