"""Running a scenario's declared suite for ``run.tests()``, and reading what it ran.

Kept apart from ``trysquare.assay`` so that importing the assay stays cheap: this
module (and ``subprocess`` behind ``trysquare._process``) is loaded only when a
validator actually calls ``run.tests()``.

The verdict rules (DESIGN §5):

- ``prepare`` failing, not starting or timing out -> unjudged: nobody judged.
- the suite timing out or not starting -> unjudged.
- the suite reporting that it ran zero tests -> unjudged, whatever its exit code:
  a suite that tested nothing has not said the code works (nor that it is broken).
- otherwise the exit code decides, and a failure carries the tail of the output.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from trysquare._process import ProcessResult, run_process
from trysquare._words import split_command
from trysquare.sandbox import Sandbox

if TYPE_CHECKING:
    from trysquare.assay import Metric

__all__ = ["count_tests", "run_suite", "tail"]

# How much of a failing suite's output a reason carries.
TAIL_LINES = 30
TAIL_CHARS = 3000

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# unittest: "Ran 3 tests in 0.001s" (also "Ran 1 test in ...").
_UNITTEST = re.compile(r"^Ran (\d+) tests? in ", re.M)

# pytest's closing summary, with or without the "=" rulers of the default mode:
#   "==== 2 failed, 3 passed, 1 warning in 0.12s ====", "5 passed in 0.01s",
#   "no tests ran in 0.01s", "1 error in 0.3s" (a collection error).
_PYTEST_LINE = re.compile(
    r"^=*\s*((?:no tests ran|\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|"
    r"deselected|rerun))(?:, (?:\d+ \w+))*) in [\d.]+s\b.*$",
    re.M,
)
_PYTEST_PART = re.compile(r"(\d+) (passed|failed|errors?|xfailed|xpassed)\b")

# node --test: TAP ("# tests 4") or the spec reporter ("ℹ tests 4").
_NODE = re.compile(r"^(?:#|\u2139) tests (\d+)\s*$", re.M)

# go test: per-test lines under -v (top level only: subtests are indented),
# and per-package lines otherwise. go separates a package line's fields with a
# tab ("ok  \tpkg\t0.01s"), which keeps TAP's "ok 1 - name" and jest's
# "FAIL src/a.test.js" out.
_GO_TEST = re.compile(r"^--- (?:PASS|FAIL): ", re.M)
_GO_PACKAGE_OK = re.compile(r"^ok {0,3}\t\S+\t.*$", re.M)
_GO_PACKAGE_FAIL = re.compile(r"^FAIL\t\S+.*$", re.M)
_GO_NO_TESTS = re.compile(r"^\? {0,3}\t\S+\t\[no test files\]", re.M)

# cargo test: one line per test binary, doc-tests included.
_CARGO = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed;", re.M)

# jest: "Tests:       1 failed, 2 passed, 3 total"; vitest: "Tests  1 failed | 2 passed (3)".
_JEST = re.compile(r"^\s*Tests:\s+.*?(\d+) total\s*$", re.M)
_VITEST = re.compile(r"^\s*Tests\s+(?:\d+ \w+(?: \| )?)+\s*\((\d+)\)\s*$", re.M)
_JS_NONE = re.compile(r"^\s*No tests? (?:files )?found", re.M)


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
    return sum(counts) if counts else None


def _go(text: str) -> int | None:
    tests = len(_GO_TEST.findall(text))
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
    counts = [int(n) for n in _JEST.findall(text)] + [int(n) for n in _VITEST.findall(text)]
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
)


def count_tests(output: str) -> int | None:
    """How many tests ``output`` says were run, or ``None`` when no runner's summary is found.

    Every recognised summary is added up, so a command that runs two runners in
    turn (``make test``) counts both; colour codes are ignored.

    >>> count_tests("...\\n----\\nRan 3 tests in 0.001s\\n\\nOK\\n")
    3
    >>> count_tests("no tests ran in 0.01s") == 0
    True
    """
    text = _ANSI.sub("", output)
    found = [n for n in (read(text) for read in _READERS) if n is not None]
    return sum(found) if found else None


def tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last ``lines`` lines of ``text``, at most ``chars`` characters."""
    kept = "\n".join(text.rstrip().splitlines()[-lines:])
    if len(kept) > chars:
        kept = "..." + kept[-chars:]
    return kept


def _words(command: str | Sequence[str]) -> list[str]:
    # The scenario carries strings; an already split argv is accepted as it is.
    if isinstance(command, str):
        return split_command(command)
    return [str(word) for word in command]


def _output(result: object) -> str:
    stdout = getattr(result, "stdout", b"").decode("utf-8", "replace")
    stderr = getattr(result, "stderr", b"").decode("utf-8", "replace")
    return stdout + ("\n" if stdout and stderr else "") + stderr


def run_suite(
    repo: Path,
    test_command: str | Sequence[str],
    prepare: Sequence[str | Sequence[str]] = (),
    *,
    timeout: float = 600.0,
) -> Metric:
    """Run ``prepare`` then ``test_command`` in a throwaway copy of ``repo``; return the verdict.

    ``timeout`` bounds the whole of it, prepare included. The measured clone is
    never written to: everything runs in a copy under a temporary folder that is
    removed afterwards.
    """
    import time

    from trysquare import repo as repo_module  # lazy: not needed unless a suite runs

    from trysquare.assay import Metric  # noqa: F811 (the module is loaded by now)
    suite = _words(test_command)
    if not suite:
        raise ValueError("the scenario's test_command is empty: there is no suite to run")
    steps = [_words(step) for step in prepare]
    deadline = time.monotonic() + timeout
    env = dict(os.environ)
    def step(argv: list[str], what: str) -> ProcessResult | Metric:
        """The finished process, or the unjudged Metric saying why there is none."""
        try:
            done = run_process(
                argv, cwd=copy, timeout=max(deadline - time.monotonic(), 0.0), env=env,
                # The agent's test code writes only in its throwaway scratch folder
                # (where the kernel allows it): never the clone, the run, the etalon cache.
                sandbox=Sandbox([scratch]),
            )
        except OSError as error:
            return Metric.unjudged(f"{what} could not start: {error.strerror or error}")
        if done.timed_out:
            return Metric.unjudged(f"{what} did not finish within {timeout:g} s")
        return done

    with tempfile.TemporaryDirectory(prefix="trysquare-tests-") as scratch:
        env["TMPDIR"] = scratch
        copy = repo_module.copy_tree(Path(repo), Path(scratch) / "repo")
        for argv in steps:
            done = step(argv, f"prepare `{' '.join(argv)}`")
            if isinstance(done, Metric):
                return done
            if done.returncode != 0:
                return Metric.unjudged(
                    f"prepare `{' '.join(argv)}` failed (exit {done.returncode}), so nobody "
                    f"judged the suite:\n{tail(_output(done))}"
                )
        shown = " ".join(suite)
        done = step(suite, f"the suite `{shown}`")
        if isinstance(done, Metric):
            return done
    output = _output(done)
    count = count_tests(output)
    if count == 0:
        return Metric.unjudged(f"the suite `{shown}` ran no tests:\n{tail(output, 5)}")
    if done.returncode == 0:
        return Metric(True)
    assert done.returncode is not None
    how = (
        f"killed by signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
    )
    ran = "" if count is None else f", {count} test{'s' if count != 1 else ''} ran"
    return Metric(False, f"the suite failed ({how}{ran}):\n{tail(output)}")
