"""Unknown inputs leave the metric reading them unjudged, with why, and no None check (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import write_scenario, write_script

VALIDATOR = r"""
from trysquare.assay import validator

@validator
def evaluate(run):
    return {
        "words": lambda: len(run.response.split()),
        "src_first": lambda: run.first_write("src/a.py"),
        "wrote_src": lambda: run.first_write("src/a.py", default=None) is not None,
        "touched_any": bool(run.touched),
    }

raise SystemExit(evaluate.cli())
"""

# One call, a read: nothing wrote src/a.py, and no final message was left.
SESSION = [
    {"type": "message", "message": {"role": "user", "content": "Fix a.py"}},
    {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "c0", "name": "read", "arguments": {"path": "src/a.py"}}
            ],
        },
    },
    {
        "type": "message",
        "message": {
            "role": "toolResult",
            "toolCallId": "c0",
            "content": [{"type": "text", "text": "a = 1"}],
            "isError": False,
        },
    },
]


def test_unknown_response_and_no_write_are_unjudged_metrics(cli, make_run, tmp_path: Path) -> None:
    run = make_run("r1", cell="alpha", repetition=1)
    run.base({"src/a.py": "a = 1\n"})
    run_dir = run.finish(session=SESSION)
    write_script(tmp_path / "s", "score.py", VALIDATOR)
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["words", "src_first", "wrote_src", "touched_any"]
    """,
    )
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((run_dir / "validation" / "score.json").read_text())
    assert result["state"] == "valid"  # one unknown input never refuses the whole run
    assert result["metrics"] == {
        "words": None,
        "src_first": None,
        "wrote_src": False,
        "touched_any": False,
    }
    assert result["reasons"]["words"].startswith("no response was recorded")
    assert result["reasons"]["src_first"].startswith("no call wrote src/a.py")
    assert (
        "2 unjudged: src_first (no call wrote src/a.py); words (no response was recorded)"
        in done.stdout
    )
