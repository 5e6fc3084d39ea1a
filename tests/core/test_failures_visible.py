"""Failures visible where the user looks (issue 16.3)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

from trysquare.cli.validate import _say_verdicts_kept
from trysquare.failures import stderr_tail

from tests.helpers import write_scenario, write_script

GARBAGE = r"""
import sys
sys.stdout.write("{not json \x1b[2J" + "x" * 5000)
"""
GOOD = r"""
import json, sys
print(json.dumps({"metrics": {"NAME": True}}))
"""


def one_run(make_run) -> Path:
    run = make_run("r1", cell="c", repetition=1)
    run.base({"counter.py": "x = 1\n"})
    run.repo.write("counter.py", "x = 2\n")
    return run.finish()


def test_unreadable_output_is_quoted_and_kept(cli, make_run, tmp_path: Path) -> None:
    run_dir = one_run(make_run)
    write_script(tmp_path / "s", "score.py", GARBAGE)
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["ok"]
    """,
    )
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 1
    result = json.loads((run_dir / "validation" / "script.json").read_text())
    assert "printed unreadable JSON" in result["error"]
    assert "it began: '{not json \\x1b[2Jxxx" in result["error"] and result["error"].endswith(" …")
    assert len(result["error"]) < 400  # the first bytes, not the 5000
    kept = (run_dir / "validation" / "script" / "stdout").read_bytes()
    assert kept.startswith(b"{not json \x1b[2J") and len(kept) == len("{not json \x1b[2J") + 5000
    # The invalid result's line says it, escaped.
    assert "it began: '{not json" in done.stdout and "\x1b" not in done.stdout


def test_replay_only_a_new_validator_builds_its_contexts(cli, make_run, tmp_path: Path) -> None:
    run_dir = one_run(make_run)
    folder = tmp_path / "s"
    write_script(folder, "first.py", GOOD.replace("NAME", "first"))
    write_script(folder, "second.py", GOOD.replace("NAME", "second"))
    table = """
        [[validation]]
        name = "{0}"
        mode = "script"
        command = "{0}.py"
        metrics = ["{0}"]
    """
    scenario = write_scenario(folder, table.format("first"))
    assert cli("validate", scenario, tmp_path / "exp", "--no-progress").returncode == 0
    write_scenario(folder, table.format("first") + table.format("second"))
    done = cli(
        "validate", scenario, tmp_path / "exp", "--no-progress", "--replay", "--only", "second"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "1 run: 1 valid"
    assert (run_dir / "validation" / "second" / "context.json").is_file()
    assert json.loads((run_dir / "validation" / "second.json").read_text())["metrics"] == {
        "second": True
    }


def test_force_says_judge_verdicts_were_kept() -> None:
    judge = SimpleNamespace(name="judge", costly=True)
    script = SimpleNamespace(name="script", costly=False)
    scenario = SimpleNamespace(validations=(script, judge))
    out = io.StringIO()
    _say_verdicts_kept(scenario, [], out)
    assert (
        "kept the up-to-date verdicts of 'judge'" in out.getvalue()
        and "--rejudge" in out.getvalue()
    )
    out = io.StringIO()
    _say_verdicts_kept(scenario, ["script"], out)
    assert out.getvalue() == ""


def test_stderr_tail_reads_only_the_end(tmp_path: Path) -> None:
    (tmp_path / "validation").mkdir()
    lines = [f"line {n}" for n in range(5000)]
    (tmp_path / "validation" / "v.stderr").write_text("\n".join(lines) + "\n\n")
    assert stderr_tail(tmp_path, "v") == lines[-10:]
    assert stderr_tail(tmp_path, "missing") == []
    (tmp_path / "validation" / "link.stderr").symlink_to(tmp_path / "validation" / "v.stderr")
    assert stderr_tail(tmp_path, "link") == []  # never read through the agent's symlink
