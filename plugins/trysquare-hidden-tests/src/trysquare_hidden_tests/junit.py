"""Reading a JUnit XML report: one status per test id, and nothing from logs.

The id of a ``<testcase>`` is ``classname.name`` (``name`` alone when it has no
``classname``): pytest's ``--junitxml`` writes ``tests.test_counter.T.test_sum``,
node's junit reporter ``test.adds two numbers``. Suites may nest (node, jest):
every ``<testcase>`` anywhere in the document counts.

A test *passed* when its ``<testcase>`` holds no ``<failure>``, ``<error>`` or
``<skipped>`` child. Skipped (pytest's xfail included) is not a pass: a hidden
test that did not run has not shown anything. An id reported more than once
(a parametrised runner, a retry) takes its worst status.

Parsing uses :mod:`xml.etree.ElementTree` on a local file. The report is written
by code from the measured repository, so it is not trusted: its size is capped
before parsing, ElementTree never fetches external entities, and the expat that
Python >= 3.11 bundles refuses entity-expansion bombs — so ``defusedxml`` would
add nothing here.
"""

from __future__ import annotations

import re
import stat
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import attrs
from trysquare.api import read_bytes

__all__ = [
    "MAX_REPORT_BYTES",
    "Case",
    "ReportError",
    "parse_report",
    "read_report",
    "unlisted_errors",
]

Status = Literal["passed", "skipped", "failed", "error"]

# Worst first: the status an id reported several times keeps.
_SEVERITY: dict[str, int] = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
MAX_REPORT_BYTES = 64 * 1024 * 1024
MESSAGE_CHARS = 300


class ReportError(Exception):
    """The report cannot be read: nobody can say what passed."""


@attrs.frozen
class Case:
    """What the report says of one test id."""

    id: str
    status: Status
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def read_report(path: Path, *, root: Path | None = None) -> dict[str, Case]:
    """Every test id in the report at ``path`` with its status; raise ReportError if unreadable.

    The agent's test code wrote it, and may have put a FIFO or a link in its place when it
    finished: read only as a regular file with one name, through no link below ``root``
    (default: the report's folder), never waiting on it.
    """
    try:
        if root is not None:
            for folder in (path.parent, *path.parent.parents):
                if folder == root:
                    break
                if folder.is_symlink():
                    raise ReportError("the report's folder was replaced by a symlink, not followed")
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            raise ReportError("the report is a symlink, not followed")
        if not stat.S_ISREG(info.st_mode):
            raise ReportError(
                "the report is not a regular file (a FIFO, socket or device), not read"
            )
        if info.st_nlink != 1:
            raise ReportError("the report is a hard link to another file, not read")
        if info.st_size > MAX_REPORT_BYTES:
            raise ReportError(
                f"the report is {info.st_size} bytes, more than the {MAX_REPORT_BYTES} read"
            )
        data = read_bytes(path, root=root or path.parent)  # refuses a link or FIFO put there since
    except FileNotFoundError:
        raise ReportError("no report was written") from None
    except OSError as error:
        raise ReportError(f"the report cannot be read ({error.strerror or error})") from None
    return parse_report(data)


def parse_report(data: bytes) -> dict[str, Case]:
    """Parse a JUnit XML document (bytes, so its own encoding declaration is honoured)."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as error:
        raise ReportError(f"the report is not well-formed XML ({error})") from None
    if _local(root.tag) not in ("testsuites", "testsuite", "testcase"):
        raise ReportError(
            f"the report's root element is <{root.tag}>, not <testsuites> or <testsuite>"
        )
    cases: dict[str, Case] = {}
    for element in root.iter():
        if _local(element.tag) != "testcase":
            continue
        case = _case(element)
        known = cases.get(case.id)
        if known is None or _SEVERITY[case.status] > _SEVERITY[known.status]:
            cases[case.id] = case
    return cases


def _local(tag: object) -> str:
    # A namespaced tag reads "{uri}testcase"; comments and PIs have no string tag.
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _case(element: ET.Element) -> Case:
    name = element.get("name") or ""
    classname = element.get("classname") or ""
    test_id = f"{classname}.{name}" if classname else name
    status: Status = "passed"
    message = ""
    for child in element:
        kind = _local(child.tag)
        if kind in ("failure", "error", "skipped") and _SEVERITY[_status(kind)] > _SEVERITY[status]:
            status = _status(kind)
            message = _message(child)
    return Case(id=test_id, status=status, message=message)


_KINDS: dict[str, Status] = {"failure": "failed", "error": "error", "skipped": "skipped"}


def _status(kind: str) -> Status:
    return _KINDS[kind]


def _message(child: ET.Element) -> str:
    text = child.get("message") or (child.text or "").strip()
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= MESSAGE_CHARS else first[: MESSAGE_CHARS - 3] + "..."


_SCRIPT_FILE = re.compile(r"/[^/]+\.(?:[cm]?js|[cm]?ts|jsx|tsx)$")


def _file_failure(case: Case) -> bool:
    """node --test's entry for a test *file* whose process failed (it did not load, or it
    crashed): a ``<failure>`` named by the file's path, with only "test failed" to say."""
    return (
        case.status == "failed"
        and case.message == "test failed"
        and bool(_SCRIPT_FILE.search(case.id))
    )


def unlisted_errors(cases: Mapping[str, Case], listed: set[str], limit: int = 3) -> list[str]:
    """Errors the report holds outside the listed ids: a collection error, typically, or a
    node test file that did not load (whose cause the report does not hold)."""
    found = [
        c
        for c in cases.values()
        if c.id not in listed and (c.status == "error" or _file_failure(c))
    ]
    return [
        f"{c.id}: the file did not load or crashed (node's JUnit report keeps no cause: add "
        "`--test-reporter=spec --test-reporter-destination=stdout` to the command to keep it "
        "in the validator's stderr)"
        if _file_failure(c)
        else f"{c.id}: {c.message}"
        if c.message
        else c.id
        for c in found[:limit]
    ]
