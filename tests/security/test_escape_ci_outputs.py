"""The agent's text in CI outputs: JUnit XML, ``--format json``, an invalid result's stderr tail.

The records are built here with what a run folder can carry (a run id, a cell, a
reason, an error quoting the agent's file, the validator's stderr echoing the
agent's test output); the writers are the ones ``validate`` uses.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

from trysquare import ci
from trysquare.ci import ResultRecord
from trysquare.failures import invalid_lines
from trysquare.junit import render_junit

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.ci", "trysquare.junit", "trysquare.failures")


HOSTILE = 'id\x1b]0;PWNED\x07\x1b[2J ]]></failure><testcase name="forged"/> \x00\x0b\x85\u202e\ud800\ufffe & <!-- -->'
RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202e\ud800-\udfff\ufffe]")
# JSON may hold U+FFFE (a noncharacter, not a control): only what a terminal acts on must be escaped.
RAW_JSON = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202e\ud800-\udfff]")


def hostile_records() -> list[ResultRecord]:
    return [
        ResultRecord(
            run=HOSTILE,
            cell=HOSTILE,
            repetition=1,
            validator="script",
            status="failed",
            metrics={HOSTILE: HOSTILE},
            reasons={HOSTILE: HOSTILE},
            error=HOSTILE,
            stderr_tail=(HOSTILE, HOSTILE),
        )
    ]


def test_junit_xml_holds_hostile_text_as_text() -> None:
    data = render_junit(hostile_records())
    root = ET.fromstring(data)  # a `]]>` or a control character would make this raise
    cases = list(root.iter("testcase"))
    assert len(cases) == 1  # the forged <testcase> in the text stayed text
    assert len(list(root.iter("failure"))) == 1
    text = data.decode("utf-8", errors="strict")
    assert not RAW.search(text), "a control, bidi or other character XML cannot hold went in raw"
    assert "\\x1b]0;PWNED\\x07" in cases[0].attrib["name"]


def test_json_summary_holds_hostile_text_escaped() -> None:
    summary = SimpleNamespace(
        runs=1,
        states={"valid": 0, "invalid": 1, "pending": 0},
        unpublishable=[HOSTILE],
        executed=1,
        reused=0,
        not_started=0,
        skipped_runs=[],
        stopped=None,
        closing_line=lambda: HOSTILE,
    )
    text = ci.dump(
        ci.validate_document(
            summary, hostile_records(), scenario=SimpleNamespace(path=Path("s.toml")), exit_code=1
        )
    )
    assert not RAW_JSON.search(text), "a control, C1, bidi or surrogate character went out raw"
    document = json.loads(text)
    assert document["records"][0]["run"] == HOSTILE  # escaped, not altered
    assert document["schema_version"] == ci.SCHEMA_VERSION


def test_stderr_tail_on_a_terminal_is_escaped(tmp_path: Path) -> None:
    (tmp_path / "validation").mkdir()
    (tmp_path / "validation" / "script.stderr").write_bytes(
        HOSTILE.encode("utf-8", "surrogatepass") + b"\n\xff\xfe\n"
    )
    lines = invalid_lines(tmp_path, "script", {"state": "invalid"})
    assert len(lines) == 2 and all(not RAW_JSON.search(line) for line in lines)
    assert "\\x1b]0;PWNED\\x07" in lines[0]
