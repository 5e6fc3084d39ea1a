"""Hostile validators and inputs: each row names the cause, and nothing else is spoiled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trysquare.api import DEFAULT_OUTPUT_CAP
from trysquare.outputs import parse_validator_output

from tests.helpers import write_scenario, write_script

HEALTHY = "import json; print(json.dumps({'metrics': {'fine': True}}))\n"

HOSTILE = {
    "exit-1": ("import sys; sys.exit(1)\n", "exited with code 1"),
    "exit-2": ("import sys; sys.exit(2)\n", "exited with code 2"),
    "exit-139": ("import sys; sys.exit(139)\n", "exited with code 139"),
    "segfault": (
        "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)\n",
        "was killed by signal 11",
    ),
    "json-array": ("print('[true]')\n", "printed JSON list, not an object"),
    "json-string": ("print('\"ok\"')\n", "printed JSON str, not an object"),
    "nan": ('print(\'{"metrics": {"x": NaN}}\')\n', "printed unreadable JSON"),
    "invalid-utf8": (
        'import sys; sys.stdout.buffer.write(b\'{"metrics": {"x": "\\xff"}}\')\n',
        "printed invalid UTF-8",
    ),
    "empty-metric-name": (
        'print(\'{"metrics": {"": true, "x": true}}\')\n',
        "printed a metric with an empty name",
    ),
    # Three times the cap (trysquare reads a child's output to its end, keeping the cap).
    "huge-output": (
        (
            "import sys\nchunk = b'x' * (1 << 20)\n"
            f"for _ in range({3 * DEFAULT_OUTPUT_CAP >> 20}):\n    sys.stdout.buffer.write(chunk)\n"
        ),
        "printed more than the output cap",
    ),
    "forked-child-holds-stdout": (
        (
            "import json, subprocess, sys\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(json.dumps({'metrics': {'x': True}}))\n"
        ),
        None,  # valid: the child is reaped with its group and cannot hang the runner
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_validator(cli, make_run, tmp_path: Path, case: str) -> None:
    body, cause = HOSTILE[case]
    for index in range(2):
        run = make_run(f"run{index}", cell=f"cell{index}")
        run.base({"a.py": "a = 1\n"})
        run.finish()
    experiment = run.path.parents[1]
    folder = tmp_path / "s"
    write_script(folder, "hostile.py", body)
    write_script(folder, "healthy.py", HEALTHY)
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        name = "hostile"
        mode = "script"
        command = "hostile.py"
        metrics = ["x"]
        timeout = 30
        [[validation]]
        name = "healthy"
        mode = "script"
        command = "healthy.py"
        metrics = ["fine"]
    """,
    )
    done = cli("validate", scenario, experiment, "--no-progress", timeout=120)
    assert "Traceback" not in done.stderr
    for index in range(2):
        folder_ = experiment / "runs" / f"run{index}" / "validation"
        hostile = json.loads((folder_ / "hostile.json").read_text())
        healthy = json.loads((folder_ / "healthy.json").read_text())
        assert healthy["state"] == "valid" and healthy["metrics"] == {"fine": True}
        if cause is None:
            assert hostile["state"] == "valid", hostile["error"]
        else:
            assert hostile["state"] == "invalid"
            assert cause in hostile["error"]
            assert (folder_ / "hostile.stderr").exists()
    assert done.returncode == (0 if cause is None else 1)


@pytest.mark.parametrize("kind", ["missing", "a-file", "symlink-loop"])
def test_run_toml_with_a_broken_repo_is_skipped(cli, make_run, tmp_path: Path, kind: str) -> None:
    good = make_run("good")
    good.base({"a.py": "a = 1\n"})
    good.finish()
    bad = tmp_path / "exp" / "runs" / "bad"
    bad.mkdir(parents=True)
    (bad / "prompt.txt").write_text("p")
    if kind == "a-file":
        (bad / "repo").write_text("not a folder")
    elif kind == "symlink-loop":
        os.symlink(bad / "loop-b", bad / "repo")
        os.symlink(bad / "repo", bad / "loop-b")
    (bad / "run.toml").write_text('cell = "c"\nrepetition = 1\nprompt = "prompt.txt"\n')
    write_script(tmp_path / "s", "healthy.py", HEALTHY)
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        mode = "script"
        command = "healthy.py"
        metrics = ["fine"]
    """,
    )
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 1
    assert f"{bad / 'run.toml'}: repo 'repo' is not a git repository" in done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads((good.path / "validation" / "script.json").read_text())["state"] == "valid"


def test_a_scenario_with_ten_thousand_metrics(cli, make_run, tmp_path: Path) -> None:
    run = make_run("r")
    run.base({"a.py": "a = 1\n"})
    run.finish()
    names = [f"m{i}" for i in range(10_000)]
    write_script(
        tmp_path / "s",
        "many.py",
        f"""
        import json
        print(json.dumps({{"metrics": {{f"m{{i}}": i % 2 == 0 for i in range({len(names)})}}}}))
    """,
    )
    scenario = write_scenario(
        tmp_path / "s",
        f"""
        [[validation]]
        mode = "script"
        command = "many.py"
        metrics = {json.dumps(names)}
    """,
    )
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 0, done.stderr
    recorded = json.loads((run.path / "validation" / "script.json").read_text())
    assert len(recorded["metrics"]) == 10_000


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_output_parser_never_raises_on_bytes(data: bytes) -> None:
    outcome = parse_validator_output(data, declared=["x"], what="v")
    assert outcome.state in ("valid", "invalid")
    if outcome.state == "valid":
        assert "x" in outcome.metrics


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["metrics", "reasons", "other"]), json_values, max_size=3))
def test_output_parser_never_raises_on_json(document: dict) -> None:
    data = json.dumps(document).encode()
    outcome = parse_validator_output(data, declared=["x"], what="v")
    assert outcome.state in ("valid", "invalid")
    if outcome.state == "valid":
        assert "x" in outcome.metrics and all(isinstance(r, str) for r in outcome.reasons.values())
