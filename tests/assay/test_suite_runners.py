"""The suite readers on real runner output: node --test (TAP) and mocha.

``runners/`` holds output captured from node 20 and mocha 10 (paths rewritten to
``/work/calc``); where node is installed, the node cases are also produced afresh.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from trysquare._suite import _verdict, ran_nothing, read_counts

pytestmark = pytest.mark.fast

RUNNERS = Path(__file__).parent / "runners"
NODE = shutil.which("node")


def _read(name: str) -> str:
    return (RUNNERS / name).read_text(encoding="utf-8")


def test_mocha_passing_and_failing_are_counted() -> None:
    count, markers = read_counts(_read("mocha-spec.txt"))
    assert count == 4  # 3 passing, 1 failing; the pending one did not run
    assert markers == ["mocha's `N passing`/`N failing`"]
    verdict = _verdict("mocha", 1, _read("mocha-spec.txt"))
    assert verdict.value is False and "4 tests ran; read from mocha's" in (verdict.reason or "")


def test_a_mocha_hook_failure_is_among_the_failing() -> None:
    assert read_counts(_read("mocha-hook.txt"))[0] == 5


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("mocha-load.txt", "mocha stopped before running a test (Error: Cannot find module"),
        ("mocha-none.txt", "mocha found no test files"),
    ],
)
def test_mocha_that_ran_nothing_is_unjudged(name: str, why: str) -> None:
    output = _read(name)
    verdict = _verdict("mocha", 1, output)
    assert verdict.value is None
    assert why in (verdict.reason or "")


def test_a_node_test_file_that_does_not_load_is_no_test() -> None:
    output = _read("node20-tap-load-failure.txt")
    assert "# tests 3" in output  # node counts the file as a test
    assert read_counts(output)[0] == 2
    reason = _verdict("node --test", 1, output).reason or ""
    assert "2 tests ran" in reason
    # The failing lines reach the reason, though the tail starts mid-YAML.
    assert "failing: not ok 2 - subtracts; " in reason
    assert (
        "/work/calc/t/b.test.js did not load (Error: Cannot find module 'simple-statistics')"
        in (reason)
    )


def test_node_with_no_file_loaded_ran_nothing() -> None:
    output = _read("node20-tap-nothing-loaded.txt")
    count, _ = read_counts(output)
    assert count == 0
    why = ran_nothing(1, output, count) or ""
    assert why.startswith("it ran no tests: /work/calc/t2/b.test.js did not load")
    assert "Cannot find package 'left-pad-missing'" in why
    assert _verdict("node --test", 1, output).value is None


@pytest.mark.skipif(NODE is None, reason="node is not installed: the captured output is read alone")
def test_real_node_output_is_read_the_same(tmp_path: Path) -> None:
    (tmp_path / "a.test.js").write_text(
        "const test = require('node:test'); const assert = require('node:assert');\n"
        "test('adds', () => assert.strictEqual(1 + 1, 2));\n"
        "test('subtracts', () => assert.strictEqual(2 - 1, 2));\n"
    )
    (tmp_path / "b.test.js").write_text(
        "require('simple-statistics');\nrequire('node:test')('mean', () => {});\n"
    )
    assert NODE is not None
    done = subprocess.run(
        [NODE, "--test", "--test-reporter=tap", "a.test.js", "b.test.js"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1
    assert read_counts(output)[0] == 2
    reason = _verdict("node --test", done.returncode, output).reason or ""
    assert "not ok 2 - subtracts" in reason
    assert "b.test.js did not load (Error: Cannot find module 'simple-statistics')" in reason


@pytest.mark.parametrize(
    ("name", "count", "returncode", "value"),
    [("cargo-passing.txt", 2, 0, True), ("cargo-failing.txt", 2, 101, False)],
)
def test_cargo_test_result_lines_are_counted(
    name: str, count: int, returncode: int, value: bool
) -> None:
    output = _read(name)
    assert read_counts(output) == (count, ["cargo test's `test result:`"])
    assert _verdict("cargo test", returncode, output).value is value


@pytest.mark.parametrize(
    ("name", "returncode", "count", "value"),
    [
        ("jest.txt", 1, 2, False),  # 1 failed, 1 skipped, 1 passed; a file that did not load
        ("vitest.txt", 1, 2, False),  # the same, through vitest (colour codes as printed)
        ("jest-skipped.txt", 0, 0, None),  # every test skipped or todo: exit 0, nothing ran
        ("vitest-skipped.txt", 0, 0, None),
    ],
)
def test_jest_and_vitest_count_only_tests_that_ran(
    name: str, returncode: int, count: int, value: bool | None
) -> None:
    output = _read(name)
    assert read_counts(output) == (count, ["jest/vitest's `Tests:` line"])
    assert _verdict("jest", returncode, output).value is value
