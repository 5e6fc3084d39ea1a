"""Validators in any language: the session's reading as JSON, and a JavaScript validator.

A script that cannot import ``trysquare.assay`` gets the same process facts through
its context (``session_facts``, a file written before it starts) or ``trysquare
session``; the shipped ``examples/validator.mjs`` scores the demo as
``examples/validator.py`` does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from trysquare.testing.builders import build_run

from tests.helpers import write_scenario, write_script

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")


def _call(number: int, name: str, arguments: dict[str, str], error: bool = False) -> list[dict]:
    return [
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": f"c{number}", "name": name, "arguments": arguments}
                ],
            },
        },
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": f"c{number}",
                "content": [{"type": "text", "text": "done"}],
                "isError": error,
            },
        },
    ]


SESSION: list[dict[str, Any]] = [
    {"type": "message", "message": {"role": "user", "content": "Fix the counter."}},
    *_call(0, "read", {"path": "counter.py"}),
    *_call(1, "bash", {"command": "npm install simple-statistics"}),
    *_call(2, "edit", {"path": "counter.py", "oldText": "a", "newText": "b"}, error=True),
    *_call(3, "write", {"path": "counter.py", "content": "fixed\n"}),
    *_call(4, "mcp__fs__touch", {"target": "README.md"}),
]


def _run(path: Path) -> Path:
    run = build_run(
        path,
        base={"counter.py": "a\n", "package.json": "{}\n", "README.md": "hello\n"},
        changes={"counter.py": "fixed\n", "README.md": "hi\n"},
        session=SESSION,
    )
    return run.path


def test_session_prints_the_reading_as_json(cli, tmp_path: Path) -> None:
    run = _run(tmp_path / "exp" / "runs" / "a1")
    done = cli("session", run)
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert [call["name"] for call in facts["tool_calls"]] == [
        "read", "bash", "edit", "write", "mcp__fs__touch",
    ]  # fmt: skip
    assert facts["failed_calls"] == [2]
    assert facts["first_write"]["counter.py"] == 3  # the failed edit never wrote
    assert facts["first_write"]["package.json"] == 1  # npm install wrote it
    # README.md was touched; an unknown tool may have written it: unjudged, with the reason.
    assert "README.md" not in facts["first_write"]
    assert "call 4 (mcp__fs__touch)" in facts["first_write_unjudged"]["README.md"]
    assert facts["skills_expanded"] == []
    # The same answers trysquare.assay gives: one reader.
    from trysquare.sessions import open_session

    reading = open_session(run / "session.jsonl", repo=run / "repo")
    assert [call.index for call in reading.tool_calls() if call.failed] == facts["failed_calls"]
    assert reading.first_write("package.json") == facts["first_write"]["package.json"]


def test_session_given_the_log_itself(cli, tmp_path: Path) -> None:
    run = _run(tmp_path / "exp" / "runs" / "a1")
    done = cli("session", run / "session.jsonl", "--format", "pi", "--repo", run / "repo")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["first_write"]["counter.py"] == 3


@pytest.mark.parametrize(
    ("where", "code", "said"),
    [
        ("nowhere", 2, "no such file or folder (give a run folder or a session log)"),
        ("no-session", 1, "the run names no session log"),
    ],
)
def test_session_refuses_in_one_sentence(
    cli, tmp_path: Path, where: str, code: int, said: str
) -> None:
    target = tmp_path / where
    if where == "no-session":
        build_run(target, base={"a.py": "x\n"}, changes={"a.py": "y\n"})
    done = cli("session", target)
    assert done.returncode == code
    assert said in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


READS_FACTS = """
import json, sys
context = json.load(open(sys.argv[1]))
facts = json.load(open(context["session_facts"]))
print(json.dumps({"metrics": {"fixed_at": facts["first_write"]["counter.py"],
                              "failed": len(facts["failed_calls"])}}))
"""


def test_a_script_context_points_to_the_session_reading(cli, tmp_path: Path) -> None:
    experiment = tmp_path / "exp"
    _run(experiment / "runs" / "a1")
    write_script(tmp_path / "s", "score.py", READS_FACTS)
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["fixed_at", "failed"]
        """,
    )
    done = cli("validate", scenario, experiment, "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    recorded = json.loads((experiment / "runs" / "a1" / "validation" / "script.json").read_text())
    assert recorded["metrics"] == {"fixed_at": 3, "failed": 1}
    # A second validate reuses the result: the reading's path is no part of the digest.
    again = cli("validate", scenario, experiment, "--no-progress")
    assert again.returncode == 0
    assert (
        json.loads((experiment / "runs" / "a1" / "validation" / "script.json").read_text())
        == recorded
    )


def test_the_session_facts_path_leaves_the_context_digest_alone(tmp_path: Path) -> None:
    from trysquare.context import context_digest, dump_context

    context = {"repo": str(tmp_path / "repo"), "touched": ["a.py"]}
    pointed = {**context, "session_facts": str(tmp_path / "validation" / "script" / "session.json")}
    assert context_digest(dump_context(context), context, root=tmp_path) == context_digest(
        dump_context(pointed), pointed, root=tmp_path
    )


@pytest.mark.skipif(
    NODE is None, reason="node is not installed: the JavaScript validator cannot run"
)
def test_the_js_validator_scores_the_demo_like_the_python_one(cli, tmp_path: Path) -> None:
    from trysquare.demo import build_matrix, find_examples

    examples = find_examples()
    scores = {}
    for script in ("validator.py", "validator.mjs"):
        folder = tmp_path / script
        build_matrix(examples, folder)
        shutil.copy2(ROOT / "examples" / script, folder / script)
        scenario = write_scenario(
            folder,
            f"""
            [task]
            test_command = "python3 -m unittest discover -s tests"
            artefacts = ["__pycache__", "*.pyc"]

            [[validation]]
            mode = "script"
            command = "{script}"
            metrics = ["delivered", "in_scope", "tests"]
            """,
        )
        done = cli("validate", scenario, folder / "runs", "--no-progress")
        assert done.returncode == 0, done.stdout + done.stderr
        measures = json.loads((folder / "runs" / "measures.json").read_text())
        scores[script] = {
            row["id"]: (row["metrics"], {k: v for k, v in row["reasons"].items() if k != "tests"})
            for row in measures
        }
    assert scores["validator.mjs"] == scores["validator.py"]
    in_scope = {run: metrics["in_scope"] for run, (metrics, _) in scores["validator.mjs"].items()}
    assert False in in_scope.values() and True in in_scope.values()  # a real difference scored


def test_two_scripts_of_one_run_read_its_session_once(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trysquare.sessions import facts

    read = []
    original = facts.session_facts
    monkeypatch.setattr(facts, "session_facts", lambda *a: read.append(1) or original(*a))
    experiment = tmp_path / "exp"
    _run(experiment / "runs" / "a1")
    write_script(tmp_path / "s", "score.py", READS_FACTS)
    write_script(tmp_path / "s", "other.py", READS_FACTS.replace('"fixed_at"', '"fixed"'))
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["fixed_at"]

        [[validation]]
        name = "other"
        mode = "script"
        command = "other.py"
        metrics = ["fixed"]
        """,
    )
    done = cli("validate", scenario, experiment, "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(read) == 1
    other = experiment / "runs" / "a1" / "validation" / "other" / "session.json"
    assert json.loads(other.read_text())["first_write"]["counter.py"] == 3
