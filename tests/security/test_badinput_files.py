"""Bad input spoils one run: undecodable or over-nested TOML, absurd timeouts, duplicate JSON keys."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from trysquare.errors import ScenarioError
from trysquare.outputs import parse_validator_output
from trysquare.runner import ValidateOptions, validate
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.scenario", "trysquare.runs", "trysquare.outputs")


SCORE = 'import json; print(json.dumps({"metrics": {"scored": True}}))\n'
SCENARIO = """
    [[validation]]
    name = "score"
    mode = "script"
    command = "score.py"
    metrics = ["scored"]
"""
NESTED = b"cell = " + b"[" * 20_000 + b"]" * 20_000 + b"\n"
NOT_UTF8 = b'cell = "caf\xe9"\nrepetition = 1\nprompt = "prompt.txt"\n'


def matrix(tmp_path: Path, bad: bytes) -> tuple[Path, Path]:
    exp = tmp_path / "exp"
    build_run(
        exp / "runs" / "good",
        base={"a.py": "a = 1\n"},
        changes={"a.py": "a = 2\n"},
        response="ok\n",
    )
    hostile = build_run(
        exp / "runs" / "hostile", base={"a.py": "a = 1\n"}, response="ok\n", repetition=2
    )
    (hostile.path / "run.toml").write_bytes(bad)
    write_script(tmp_path / "s", "score.py", SCORE)
    return exp, write_scenario(tmp_path / "s", SCENARIO)


@pytest.mark.parametrize("bad", [NOT_UTF8, NESTED], ids=["not-utf8", "nested-20000"])
def test_hostile_run_toml_is_one_unreadable_run(cli, tmp_path: Path, bad: bytes) -> None:
    exp, scenario = matrix(tmp_path, bad)
    done = cli("validate", scenario, exp, "--no-progress")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert str(exp / "runs" / "hostile" / "run.toml") in done.stderr
    assert "not valid TOML" in done.stderr
    rows = json.loads((exp / "measures.json").read_text(encoding="utf-8"))
    assert [r["id"] for r in rows if r["state"] == "valid"] == ["good"]


@pytest.mark.parametrize("bad", [NOT_UTF8, NESTED], ids=["not-utf8", "nested-20000"])
def test_hostile_scenario_toml_exits_2_naming_the_file(cli, tmp_path: Path, bad: bytes) -> None:
    exp, scenario = matrix(tmp_path, b"")
    scenario.write_bytes(bad.replace(b"cell", b"name"))
    for args in (("check", scenario), ("validate", scenario, exp, "--no-progress")):
        done = cli(*args)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.startswith("trysquare: scenario.toml: not valid TOML")
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("timeout", ["nan", "inf", "+inf", "-inf", "0", "-1", "0.0"])
def test_timeout_that_never_times_out_is_refused_at_load(tmp_path: Path, timeout: str) -> None:
    write_script(tmp_path / "s", "score.py", SCORE)
    scenario = write_scenario(tmp_path / "s", SCENARIO + f"    timeout = {timeout}\n")
    with pytest.raises(ScenarioError) as refused:
        load_scenario(scenario)
    assert (
        "scenario.toml: [[validation]][1].timeout: must be a finite positive number"
        in refused.value.message
    )


def test_duplicate_keys_in_validator_output_make_the_run_invalid(tmp_path: Path) -> None:
    exp, _ = matrix(tmp_path, b"")
    (exp / "runs" / "hostile" / "run.toml").unlink()
    write_script(
        tmp_path / "s",
        "score.py",
        """\
        print('{"metrics": {"scored": false, "scored": true}}')
    """,
    )
    scenario = load_scenario(tmp_path / "s" / "scenario.toml")
    summary = validate(
        scenario, discover([exp]), ValidateOptions(progress=False), out=io.StringIO()
    )
    assert summary.exit_code == 1
    result = json.loads(
        (exp / "runs" / "good" / "validation" / "score.json").read_text(encoding="utf-8")
    )
    assert result["state"] == "invalid"
    assert "key 'scored' twice" in result["error"]


@pytest.mark.parametrize(
    "output",
    [
        b'{"metrics": {"a": true}, "metrics": {"a": false}}',
        b'{"metrics": {"a": true}, "reasons": {"a": "x", "a": "y"}}',
    ],
)
def test_duplicate_keys_at_any_level_are_refused(output: bytes) -> None:
    outcome = parse_validator_output(output, declared=["a"], what="script v.py")
    assert outcome.state == "invalid" and "twice" in (outcome.error or "")


def test_non_utf8_run_folder_and_file_names_are_carried_losslessly(tmp_path: Path) -> None:
    import os

    exp, scenario = matrix(tmp_path, b"")
    (exp / "runs" / "hostile" / "run.toml").unlink()
    odd = os.fsdecode(b"caf\xe9")
    build_run(
        exp / "runs" / odd,
        base={"a.py": "a = 1\n"},
        changes={os.fsdecode(b"caf\xe9.py"): "x\n"},
        response="ok\n",
        repetition=3,
    )
    summary = validate(
        load_scenario(scenario), discover([exp]), ValidateOptions(progress=False), out=io.StringIO()
    )
    assert summary.exit_code == 0 and summary.closing_line() == "2 runs: 2 valid"
    # JSON escapes (\udce9) keep the name's byte: it reads back as the same folder name.
    rows = json.loads((exp / "measures.json").read_text(encoding="utf-8"))
    assert sorted(r["id"] for r in rows) == sorted(["good", odd])
    context = json.loads(
        (exp / "runs" / odd / "validation" / "score" / "context.json").read_text(encoding="utf-8")
    )
    assert os.fsdecode(b"caf\xe9.py") in context["touched"]
