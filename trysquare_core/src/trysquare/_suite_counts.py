"""Reading what a suite printed: the summaries of unittest, pytest, node, mocha, jest, vitest,
go and cargo, and the ways a runner says it ran nothing.

:mod:`trysquare._suite` runs the suite and decides its verdict from these readings; kept
apart so that the readers (a table of each runner's words) can be read, and tested against
captured output, on their own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = [
    "ANSI",
    "TAP_NOT_OK",
    "count_tests",
    "did_not_load",
    "load_failures",
    "ran_nothing",
    "read_counts",
]

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# unittest: "Ran 3 tests in 0.001s" (also "Ran 1 test in ...").
_UNITTEST = re.compile(r"^Ran (\d+) tests? in ", re.MULTILINE)

# pytest's closing summary, with or without the "=" rulers of the default mode:
#   "==== 2 failed, 3 passed, 1 warning in 0.12s ====", "5 passed in 0.01s",
#   "no tests ran in 0.01s", "1 error in 0.3s" (a collection error).
_PYTEST_LINE = re.compile(
    r"^=*[ \t]*((?:no tests ran|\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|"
    r"deselected|rerun))(?:, (?:\d+ \w+))*) in [\d.]+s\b.*$",
    re.MULTILINE,
)
_PYTEST_PART = re.compile(r"(\d+) (passed|failed|errors?|xfailed|xpassed)\b")

# node --test: TAP ("# tests 4") or the spec reporter ("ℹ tests 4").
_NODE = re.compile(r"^(?:#|\u2139) tests (\d+)[ \t\r]*$", re.MULTILINE)

# go test: per-test lines under -v (top level only: subtests are indented),
# and per-package lines otherwise. go separates a package line's fields with a
# tab ("ok  \tpkg\t0.01s"), which keeps TAP's "ok 1 - name" and jest's
# "FAIL src/a.test.js" out.
_GO_TEST = re.compile(r"^--- (?:PASS|FAIL): ", re.MULTILINE)
_GO_VERBOSE = re.compile(r"^=== RUN ", re.MULTILINE)
_GO_PACKAGE_OK = re.compile(r"^ok {0,3}\t\S+\t.*$", re.MULTILINE)
_GO_PACKAGE_FAIL = re.compile(r"^FAIL\t\S+.*$", re.MULTILINE)
_GO_NO_TESTS = re.compile(r"^\? {0,3}\t\S+\t\[no test files\]", re.MULTILINE)

# cargo test: one line per test binary, doc-tests included.
_CARGO = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed;", re.MULTILINE)

# Whitespace in these is never `\s`, which spans lines: `^\s*` at every line of a long
# run of blank lines (the agent's output) costs quadratic time.
# jest: "Tests:       1 failed, 2 passed, 3 total"; vitest: "Tests  1 failed | 2 passed (3)".
# Counted: passed and failed (skipped and todo tests did not run; an all-skipped suite ran none).
_JEST = re.compile(r"^[ \t\r]*Tests:[ \t]+(.*?)\d+ total[ \t\r]*$", re.MULTILINE)
_VITEST = re.compile(
    r"^[ \t\r]*Tests[ \t]+((?:\d+ \w+(?: \| )?)+)[ \t]*\(\d+\)[ \t\r]*$", re.MULTILINE
)
_JS_RAN = re.compile(r"(\d+) (?:passed|failed)\b")
_JS_NONE = re.compile(r"^[ \t\r]*No tests? (?:files )?found", re.MULTILINE)

# mocha's spec reporter (and its dot, list... reporters): "  3 passing (35ms)", "  1 failing";
# pending tests were not run. Failures in hooks count among the failing.
_MOCHA_PASSING = re.compile(
    r"^ *(\d+) passing \(\d+(?:\.\d+)?(?:ms|s|m|h)\)[ \t\r]*$", re.MULTILINE
)
_MOCHA_FAILING = re.compile(r"^ *(\d+) failing[ \t\r]*$", re.MULTILINE)
# mocha stopping before any test: a file that does not load, or no file at all.
_MOCHA_EXCEPTION = re.compile(r"^[ \t\r]*Exception during run: (.*)$", re.MULTILINE)
_MOCHA_NO_FILES = re.compile(r"^[ \t\r]*Error: No test files found\b", re.MULTILINE)


def _unittest(text: str) -> int | None:
    counts = [int(n) for n in _UNITTEST.findall(text)]
    return sum(counts) if counts else None


def _pytest(text: str) -> int | None:
    total = None
    for match in _PYTEST_LINE.finditer(text):
        # Skipped and deselected tests were not run; errors were (collection included).
        ran = sum(int(n) for n, _ in _PYTEST_PART.findall(match.group(1)))
        total = (total or 0) + ran
    return total


def _node(text: str) -> int | None:
    counts = [int(n) for n in _NODE.findall(text)]
    if not counts:
        return None
    # node counts a test file that failed to load (or crashed) as one more test.
    return max(0, sum(counts) - len(load_failures(text)))


# A TAP `not ok` line and its YAML block ("  ---" ... "  ...").
TAP_NOT_OK = re.compile(r"^( *)not ok \d+ - (.*)$", re.MULTILINE)
_TAP_BLOCK_MAX = 20_000
_TAP_BLOCK = re.compile(r"\n *---\n(.*?)^ *\.\.\.$", re.MULTILINE | re.DOTALL)
# node: the comment lines a file's process printed before its entry ("# Error: ...").
_TAP_ERROR = re.compile(r"^# ((?:\w*Error|Error)\b[^\n]*)$", re.MULTILINE)


def load_failures(text: str) -> list[tuple[str, str]]:
    """node --test's entries that are a test *file* whose process failed, not a test.

    Each is (the file, the error its process printed, or ""). Node reports such a file
    as a test of its own: top level, named by its path, with the process's
    ``exitCode`` in its YAML block and ``error: 'test failed'``.
    """
    found: list[tuple[str, str]] = []
    last_end = 0
    for match in TAP_NOT_OK.finditer(text):
        if match.group(1):
            continue  # a subtest
        # A block is short; bounding the look keeps a huge output linear.
        block = _TAP_BLOCK.match(text[match.end() : match.end() + _TAP_BLOCK_MAX])
        if block is None:
            continue
        yaml = block.group(1)
        if (
            not re.search(r"^  exitCode: ", yaml, re.MULTILINE)
            or "error: 'test failed'" not in yaml
        ):
            continue
        errors = _TAP_ERROR.findall(text, last_end, match.start())
        found.append((match.group(2).strip(), errors[-1] if errors else ""))
        last_end = match.end() + block.end()
    return found


def _mocha(text: str) -> int | None:
    passing = [int(n) for n in _MOCHA_PASSING.findall(text)]
    if not passing:
        return None
    return sum(passing) + sum(int(n) for n in _MOCHA_FAILING.findall(text))


def _go(text: str) -> int | None:
    # Per-test lines count only under -v (`=== RUN` lines): without it go still prints a
    # `--- FAIL:` line for each failing test and nothing for the passing ones, so a count
    # of those would say "1 test ran" of many.
    tests = len(_GO_TEST.findall(text)) if _GO_VERBOSE.search(text) else 0
    if tests:
        return tests
    # Without -v only packages are reported: each `ok` (unless it ran nothing) or
    # `FAIL` package (a build failure included) stands for at least one judgement.
    packages = 0
    for line in _GO_PACKAGE_OK.findall(text):
        if "[no tests to run]" not in line:
            packages += 1
    packages += len(_GO_PACKAGE_FAIL.findall(text))
    if packages:
        return packages
    if _GO_NO_TESTS.search(text) or "[no tests to run]" in text:
        return 0
    return None


def _cargo(text: str) -> int | None:
    rows = _CARGO.findall(text)
    if not rows:
        return None
    return sum(int(passed) + int(failed) for passed, failed in rows)


def _jest_vitest(text: str) -> int | None:
    counts = [
        sum(int(n) for n in _JS_RAN.findall(parts))
        for parts in (*_JEST.findall(text), *_VITEST.findall(text))
    ]
    if counts:
        return sum(counts)
    if _JS_NONE.search(text):
        return 0
    return None


_READERS: tuple[Callable[[str], int | None], ...] = (
    _unittest,
    _pytest,
    _node,
    _go,
    _cargo,
    _jest_vitest,
    _mocha,
)

# What each reader is called in a reason ("3 tests ran per the unittest summary").
_READER_NAMES: dict[Callable[[str], int | None], str] = {
    _unittest: "unittest's `Ran N tests`",
    _pytest: "pytest's summary line",
    _node: "node --test's `tests N`",
    _go: "go test's result lines",
    _cargo: "cargo test's `test result:`",
    _jest_vitest: "jest/vitest's `Tests:` line",
    _mocha: "mocha's `N passing`/`N failing`",
}

# Said by a runner that ran nothing, whatever its exit code.
_UNITTEST_NONE = re.compile(r"^NO TESTS RAN\b", re.MULTILINE)
_NPM_MISSING = re.compile(r"^npm (?:ERR!|error) Missing script: ?(.*)$", re.MULTILINE)


def read_counts(output: str) -> tuple[int | None, list[str]]:
    """The count of tests ``output`` reports, and the names of the summaries it was read from."""
    text = ANSI.sub("", output)
    found = [(n, _READER_NAMES[read]) for read in _READERS if (n := read(text)) is not None]
    if not found:
        return None, []
    return sum(n for n, _ in found), [name for _, name in found]


def ran_nothing(returncode: int | None, output: str, count: int | None) -> str | None:
    """Why a finished suite judged nothing, or ``None`` when it did judge.

    A suite that never ran a test has said nothing about the code: reading it as
    ``False`` would turn "nobody judged" into "the agent failed".
    """
    text = ANSI.sub("", output)
    if count == 0:
        unloaded = load_failures(text)
        if unloaded:
            return "it ran no tests: " + "; ".join(did_not_load(unloaded))
        return "it ran no tests"
    if count is None:
        stopped = _MOCHA_EXCEPTION.search(text)
        if stopped:
            return f"mocha stopped before running a test ({stopped.group(1).strip()})"
        if _MOCHA_NO_FILES.search(text):
            return "mocha found no test files"
    if _UNITTEST_NONE.search(text):
        return "unittest said NO TESTS RAN"
    missing = _NPM_MISSING.search(text)
    if missing:
        return f"npm has no such script ({missing.group(1).strip() or 'Missing script'})"
    if count is None and returncode in (126, 127):
        meaning = "is not executable" if returncode == 126 else "was not found"
        return f"exit {returncode}: the program (or one it runs) {meaning}"
    if count is None and returncode in (4, 5):
        return (
            f"exit {returncode} with no count of tests run (pytest's usage error or "
            '"no tests collected")'
        )
    return None


def count_tests(output: str) -> int | None:
    """How many tests ``output`` says were run, or ``None`` when no runner's summary is found.

    Every recognised summary is added up, so a command that runs two runners in
    turn (``make test``) counts both; colour codes are ignored.

    >>> count_tests("...\\n----\\nRan 3 tests in 0.001s\\n\\nOK\\n")
    3
    >>> count_tests("no tests ran in 0.01s") == 0
    True
    """
    text = ANSI.sub("", output)
    found = [n for n in (read(text) for read in _READERS) if n is not None]
    return sum(found) if found else None


def did_not_load(unloaded: Sequence[tuple[str, str]]) -> list[str]:
    """Each test file that did not load (``load_failures``), said with its error."""
    return [f"{file} did not load" + (f" ({error})" if error else "") for file, error in unloaded]
