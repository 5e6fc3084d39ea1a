"""CI outputs of ``validate`` and ``check``: JUnit XML, ``--format json``, ``schema_version`` (issue 16.1)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from trysquare.ci import SCHEMA_VERSION, ResultRecord
from trysquare.junit import render_junit

from tests.helpers import write_scenario, write_script

# Behaviour by repetition: 0 valid, 1 invalid with a long hostile stderr, 2 unjudged.
VALIDATOR = r"""
import json, sys
context = json.load(open(sys.argv[1]))
rep = context["repetition"]
if rep == 1:
    for n in range(15):
        sys.stderr.write(f"trace line {n}\n")
    sys.stderr.write("end ]]> </failure> \x1b[2J \x00 bell\x07\n")
    sys.exit(3)
if rep == 2:
    print(json.dumps({"metrics": {"ok": None}, "reasons": {"ok": "could not tell ]]> </testcase>"}}))
else:
    print(json.dumps({"metrics": {"ok": True}, "reasons": {"ok": "fine & <b>dandy</b>"}}))
"""

HOSTILE_ID = 'r2 <&"]]>'


def build(make_run, tmp_path: Path) -> tuple[Path, Path]:
    for index, (run_id, cell) in enumerate(
        [("r0", "alpha"), ("r1", "alpha"), (HOSTILE_ID, "beta <x>")]
    ):
        run = make_run(f"run{index}", cell=cell, repetition=index)
        run.base({"counter.py": "x = 1\n"})
        run.repo.write("counter.py", f"x = {index}\n")
        run.extra["id"] = run_id
        run.finish()
    write_script(tmp_path / "s", "score.py", VALIDATOR)
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["ok"]
    """,
    )
    return scenario, tmp_path / "exp"


# The JUnit XML schema CI readers validate against (Surefire's, as Jenkins and pytest's
# xunit2 use it): which children and attributes each element may have.
CHILDREN = {
    "testsuites": {"testsuite"},
    "testsuite": {"testsuite", "properties", "testcase", "system-out", "system-err"},
    "properties": {"property"},
    "property": set(),
    "testcase": {"skipped", "error", "failure", "system-out", "system-err"},
    "failure": set(),
    "skipped": set(),
    "error": set(),
    "system-out": set(),
    "system-err": set(),
}
ATTRIBUTES = {
    "testsuites": ({"name", "time", "tests", "failures", "errors"}, set()),
    "testsuite": (
        {
            "name",
            "tests",
            "failures",
            "errors",
            "group",
            "time",
            "skipped",
            "timestamp",
            "hostname",
            "id",
            "package",
            "file",
            "log",
            "url",
            "version",
        },
        {"name", "tests", "failures", "errors"},
    ),
    "properties": (set(), set()),
    "property": ({"name", "value"}, {"name", "value"}),
    "testcase": ({"name", "time", "classname", "group"}, {"name"}),
    "failure": ({"type", "message"}, set()),
    "skipped": ({"type", "message"}, set()),
    "error": ({"type", "message"}, set()),
    "system-out": (set(), set()),
    "system-err": (set(), set()),
}
TIME = re.compile(r"(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]{0,3})?")


def assert_schema_valid(element: ET.Element) -> None:
    allowed, required = ATTRIBUTES[element.tag]
    assert set(element.attrib) <= allowed, (element.tag, set(element.attrib) - allowed)
    assert required <= set(element.attrib), (element.tag, required - set(element.attrib))
    if element.tag in ("testsuites", "testsuite") and "time" in element.attrib:
        assert TIME.fullmatch(element.attrib["time"]), element.attrib["time"]
    for child in element:
        assert child.tag in CHILDREN[element.tag], (element.tag, child.tag)
        assert_schema_valid(child)


def test_validate_junit_xml_and_json(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    xml_path = tmp_path / "out" / "junit.xml"
    (tmp_path / "out").mkdir()
    done = cli(
        "validate", scenario, experiment, "--junit-xml", xml_path, "--format", "json", "--jobs", "2"
    )
    assert done.returncode == 1, done.stderr
    # stdout is one JSON object and nothing else: no per-task line, no closing line.
    summary = json.loads(done.stdout)
    assert summary["schema_version"] == SCHEMA_VERSION
    assert summary["command"] == "validate" and summary["exit_code"] == 1
    # The unjudged run is valid as a run (its metric counts as unjudged in the report).
    assert summary["states"] == {"valid": 2, "invalid": 1, "pending": 0}
    assert summary["results"] == {"passed": 1, "failed": 1, "unjudged": 1, "pending": 0}
    by_run = {record["run"]: record for record in summary["records"]}
    assert by_run["r1"]["status"] == "failed" and "exited with code 3" in by_run["r1"]["error"]
    assert len(by_run["r1"]["stderr_tail"]) == 10
    assert by_run["r1"]["stderr_tail"][0] == "trace line 6"
    assert by_run[HOSTILE_ID]["status"] == "unjudged" and by_run[HOSTILE_ID]["unjudged"] == ["ok"]
    assert "\x1b" not in done.stdout and "\x1b" not in done.stderr
    # The invalid result is still said, on stderr, with its stderr's last lines.
    assert (
        "r1" in done.stderr and "trace line 14" in done.stderr and "trace line 4" not in done.stderr
    )

    data = xml_path.read_bytes()
    root = ET.fromstring(data)
    assert_schema_valid(root)
    assert (
        root.tag == "testsuites" and root.attrib["tests"] == "3" and root.attrib["failures"] == "1"
    )
    suites = {suite.attrib["name"]: suite for suite in root.iter("testsuite")}
    assert set(suites) == {"alpha", "beta <x>"}
    assert suites["alpha"].attrib["tests"] == "2" and suites["alpha"].attrib["failures"] == "1"
    cases = {case.attrib["name"]: case for case in root.iter("testcase")}
    assert set(cases) == {"r0::script", "r1::script", f"{HOSTILE_ID}::script"}
    assert (
        list(cases["r0::script"].iter("failure")) == []
        and list(cases["r0::script"].iter("skipped")) == []
    )
    failure = cases["r1::script"].find("failure")
    assert failure is not None and "exited with code 3" in failure.attrib["message"]
    assert "trace line 14" in failure.text and "trace line 5" not in failure.text
    # The agent-controlled bytes arrive as visible escapes, never raw, never breaking the file.
    assert "]]> </failure> \\x1b[2J \\x00 bell\\x07" in failure.text
    skipped = cases[f"{HOSTILE_ID}::script"].find("skipped")
    assert skipped is not None and skipped.attrib["type"] == "unjudged"
    assert "could not tell ]]> </testcase>" in skipped.attrib["message"]
    properties = {p.attrib["name"]: p.attrib["value"] for p in suites["alpha"].iter("property")}
    assert properties == {"r0::script::ok": "true", "r0::script::ok::reason": "fine & <b>dandy</b>"}
    assert cases["r0::script"].find("system-out").text == "ok = true  (fine & <b>dandy</b>)"

    # Again: every result is reused (the invalid one too: nothing changed), and the XML
    # still has every run x validator; the closing line counts them.
    again = cli("validate", scenario, experiment, "--no-progress", "--junit-xml", xml_path)
    assert again.stdout.splitlines()[-1].endswith("; 3 results unchanged (reused)")
    assert ET.fromstring(xml_path.read_bytes()).attrib["tests"] == "3"

    report = json.loads(cli("report", scenario, experiment, "--format", "json").stdout)
    assert report["schema_version"] == SCHEMA_VERSION
    # measures.json keeps its pinned list shape.
    assert isinstance(json.loads((experiment / "measures.json").read_text()), list)


def test_render_junit_escapes_what_xml_cannot_hold() -> None:
    nasty = "a\x00b\x1bc\x0bd\ud800e\ufffef ]]> <x/> & \" '"
    records = [
        ResultRecord(
            run=nasty,
            cell=nasty,
            repetition=1,
            validator="v",
            status="failed",
            error=nasty,
            stderr_tail=(nasty,),
            metrics={nasty: nasty},
            reasons={nasty: nasty},
        ),
        ResultRecord(
            run="p", cell="c", repetition=None, validator="v", status="pending", pending=("m",)
        ),
    ]
    data = render_junit(records)
    root = ET.fromstring(data)  # parses: nothing XML 1.0 cannot hold went in raw
    assert_schema_valid(root)
    case = next(root.iter("testcase"))
    shown = "a\\x00b\\x1bc\\x0bd\\ud800e\\ufffef ]]> <x/> & \" '"
    assert case.attrib["classname"] == shown and case.attrib["name"] == f"{shown}::v"
    assert case.find("failure").attrib["message"] == shown
    assert case.find("system-err").text == shown
    pending = next(c for c in root.iter("testcase") if c.attrib["name"] == "p::v")
    assert pending.find("skipped").attrib["type"] == "pending"


def test_check_format_json(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    (experiment / "runs" / "broken").mkdir()
    (experiment / "runs" / "broken" / "run.toml").write_text("cell = 3\n")
    done = cli("check", scenario, experiment, "--format", "json")
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert document["schema_version"] == SCHEMA_VERSION and document["command"] == "check"
    assert document["validators"] == [{"name": "script", "mode": "script", "metrics": ["ok"]}]
    assert document["runs"] == {"readable": 3, "unreadable": 1}
    assert document["skipped_runs"] and "broken" in document["skipped_runs"][0]
    assert "broken" in done.stderr  # errors stay on stderr too
    alone = cli("check", scenario, "--format", "json")
    assert alone.returncode == 0 and json.loads(alone.stdout)["runs"] is None
    refused = cli("check", tmp_path / "nope.toml", "--format", "json")
    assert refused.returncode == 2 and refused.stdout == "" and "nope.toml" in refused.stderr
