"""``validate --junit-xml FILE``: the results as JUnit XML, the report every CI system reads.

The layout follows the JUnit XML schema CI readers accept (Jenkins, GitLab,
GitHub test reporters, Azure): ``<testsuites>`` holding one ``<testsuite>`` per
cell, each holding one ``<testcase>`` per run × validator
(``classname`` = the cell, ``name`` = ``<run id>::<validator>``):

- *passed*: an empty testcase;
- *invalid*: ``<failure>`` whose ``message`` is the error and whose text adds the
  last lines (at most 10) of the validator's stderr;
- *pending* (an unfilled form metric, a result not recorded yet): ``<skipped>``;
- *unjudged* (a valid result with a metric that could not be judged): ``<skipped
  type="unjudged">`` naming the metrics and reasons. An unjudged metric is not a
  pass, and it is not a failure of the run either; a skip is what CI shows as
  "neither" (and never counts as green in a "no skips" policy);
- a run folder that could not be used: a failed testcase, validator
  ``trysquare``.

Metrics and reasons are ``<property>`` elements of the cell's ``<testsuite>``,
named ``<run id>::<validator>::<metric>`` (and ``...::<metric>::reason``): the
schema allows properties there only, not inside a testcase. Each testcase also
repeats them, one per line, in its ``<system-out>``, which every reader shows.

Run ids, cells, reasons, errors and stderr come from run folders (the agent's):
the XML is built with :mod:`xml.etree.ElementTree`, which escapes markup (so a
``]]>`` or a ``</testcase>`` in a reason is text), and every character XML 1.0
cannot hold at all (C0 controls, lone surrogates, U+FFFE/U+FFFF) is first
written as a visible escape (``\\x1b``), so the file always parses; so are C1
controls and bidirectional overrides, which a CI page would show to a person.
"""

from __future__ import annotations

import json
import re
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trysquare._shown import shown
from trysquare.ci import ResultRecord

__all__ = ["render_junit", "write_junit"]

# Characters XML 1.0 has no way to hold, even as a character reference.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: object) -> str:
    """Text safe in an XML 1.0 attribute or element, and on the page a CI system renders.

    Besides what XML cannot hold, C1 controls, bidirectional overrides and the other
    characters :func:`~trysquare._shown.shown` escapes are written as escapes too:
    a CI page is read by a person, as a terminal is. Newlines are kept.
    """
    text = shown(value if isinstance(value, str) else str(value), newlines=True)
    return _NOT_XML.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _seconds(value: float | None) -> str:
    # The schema's time type: digits, an optional point and at most three decimals.
    return f"{max(0.0, value or 0.0):.3f}"


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def render_junit(found: Sequence[ResultRecord], *, name: str = "trysquare") -> bytes:
    """The JUnit XML document (UTF-8 bytes, with its declaration) for ``found``."""
    cells: dict[str, list[ResultRecord]] = {}
    for record in found:
        cells.setdefault(record.cell, []).append(record)
    root = ET.Element("testsuites", {"name": _text(name)})
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    host = socket.gethostname()
    for cell, records in cells.items():
        suite = ET.SubElement(root, "testsuite", {"name": _text(cell or "(no cell)")})
        properties = ET.SubElement(suite, "properties")
        counts = {"tests": 0, "passed": 0, "failures": 0, "skipped": 0, "time": 0.0}
        for record in records:
            counts["tests"] += 1
            counts["time"] += record.duration or 0.0
            _properties(properties, record)
            counts[_testcase(suite, record)] += 1
        if not len(properties):
            suite.remove(properties)
        suite.set("tests", str(counts["tests"]))
        suite.set("failures", str(counts["failures"]))
        suite.set("errors", "0")
        suite.set("skipped", str(counts["skipped"]))
        suite.set("time", _seconds(counts["time"]))
        suite.set("timestamp", stamp)
        suite.set("hostname", _text(host))
        for key in ("tests", "failures"):
            totals[key] += counts[key]
        totals["time"] += counts["time"]
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    root.set("time", _seconds(totals["time"]))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _case_name(record: ResultRecord) -> str:
    return f"{record.run}::{record.validator}"


def _properties(properties: ET.Element, record: ResultRecord) -> None:
    prefix = _case_name(record)
    for metric in sorted(record.metrics):
        ET.SubElement(
            properties,
            "property",
            {
                "name": _text(f"{prefix}::{metric}"),
                "value": _text(_value(record.metrics[metric])),
            },
        )
        reason = record.reasons.get(metric)
        if reason:
            ET.SubElement(
                properties,
                "property",
                {
                    "name": _text(f"{prefix}::{metric}::reason"),
                    "value": _text(reason),
                },
            )


def _testcase(suite: ET.Element, record: ResultRecord) -> str:
    """Add the record's testcase; return the counter it adds to."""
    case = ET.SubElement(
        suite,
        "testcase",
        {
            "classname": _text(record.cell or "(no cell)"),
            "name": _text(_case_name(record)),
            "time": _seconds(record.duration),
        },
    )
    counter = "passed"
    if record.status == "failed":
        failure = ET.SubElement(
            case, "failure", {"type": "invalid", "message": _text(record.error or "invalid")}
        )
        body = [record.error or "invalid"]
        if record.stderr_tail:
            body += ["", f"last {len(record.stderr_tail)} line(s) of stderr:", *record.stderr_tail]
        failure.text = _text("\n".join(body))
        counter = "failures"
    elif record.status in ("pending", "unjudged"):
        missing = record.pending if record.status == "pending" else record.unjudged
        detail = "; ".join(
            f"{m}: {record.reasons[m]}" if record.reasons.get(m) else m for m in missing
        ) or (record.error or "")
        ET.SubElement(
            case,
            "skipped",
            {
                "type": record.status,
                "message": _text(f"{record.status}: {detail}".rstrip(": ")),
            },
        )
        counter = "skipped"
    lines = []
    for metric in sorted(record.metrics):
        line = f"{metric} = {_value(record.metrics[metric])}"
        if record.reasons.get(metric):
            line += f"  ({record.reasons[metric]})"
        lines.append(line)
    if lines:
        ET.SubElement(case, "system-out").text = _text("\n".join(lines))
    if record.stderr_tail:
        ET.SubElement(case, "system-err").text = _text("\n".join(record.stderr_tail))
    return counter


def write_junit(path: Path, found: Sequence[ResultRecord], *, name: str = "trysquare") -> None:
    """Write the JUnit XML of ``found`` to ``path`` (atomically: CI never reads half a file)."""
    from trysquare import _atomic

    _atomic.write_bytes(Path(path), render_junit(found, name=name))
