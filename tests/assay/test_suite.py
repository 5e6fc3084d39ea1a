"""run.tests() on real git runs, and reading a count of tests from a runner's output."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from trysquare._suite import count_tests, tail
from trysquare.assay import Assay

PYTHON = sys.executable

Tiny = Callable[..., Path]

# --- counting -------------------------------------------------------------------------

UNITTEST_OK = """...
----------------------------------------------------------------------
Ran 3 tests in 0.001s

OK
"""
UNITTEST_NONE = "\n----------------------------------------------------------------------\nRan 0 tests in 0.000s\n\nOK\n"
PYTEST_DEFAULT = "collected 5 items\n\nt.py ..F.s                     [100%]\n\n=== 1 failed, 3 passed, 1 skipped in 0.12s ===\n"
PYTEST_QUIET = "....\n4 passed in 0.01s\n"
PYTEST_COLLECTION_ERROR = "E   ImportError: cannot import name 'x'\n=== short test summary info ===\nERROR t.py\n!!! Interrupted: 1 error during collection !!!\n=== 1 error in 0.08s ===\n"
PYTEST_NONE = "collected 0 items\n\n=== no tests ran in 0.01s ===\n"
PYTEST_ALL_SKIPPED = "ss\n=== 2 skipped in 0.01s ===\n"
PYTEST_WARNINGS = "=== 2 passed, 1 warning in 0.30s ===\n"
NODE_TAP = "TAP version 13\n# Subtest: adds\nok 1 - adds\n1..2\n# tests 2\n# suites 0\n# pass 1\n# fail 1\n# duration_ms 40\n"
NODE_SPEC = "\u2714 adds (0.5ms)\n\u2139 tests 3\n\u2139 suites 0\n\u2139 pass 3\n\u2139 fail 0\n"
NODE_NONE = "\u2139 tests 0\n\u2139 pass 0\n"
GO_VERBOSE = "=== RUN   TestAdd\n--- PASS: TestAdd (0.00s)\n=== RUN   TestSub\n    --- PASS: TestSub/neg (0.00s)\n--- FAIL: TestSub (0.00s)\nFAIL\nFAIL\texample.com/calc\t0.002s\n"
GO_PACKAGES = "ok  \texample.com/calc\t0.003s\nok  \texample.com/calc/x\t(cached)\n?   \texample.com/calc/cmd\t[no test files]\n"
GO_NOTHING = (
    "?   \texample.com/calc\t[no test files]\nok  \texample.com/other\t0.001s [no tests to run]\n"
)
GO_BUILD_FAILED = (
    "# example.com/calc\n./calc.go:3:1: syntax error\nFAIL\texample.com/calc [build failed]\nFAIL\n"
)
CARGO = "running 2 tests\ntest a ... ok\ntest b ... FAILED\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n   Doc-tests calc\n\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n"
CARGO_NONE = "running 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n"
JEST = "PASS src/a.test.js\nFAIL src/b.test.js\n\nTest Suites: 1 failed, 1 passed, 2 total\nTests:       1 failed, 2 passed, 3 total\nSnapshots:   0 total\nTime:        0.5 s\n"
JEST_NONE = (
    "No tests found, exiting with code 1\nRun with `--passWithNoTests` to exit with code 0\n"
)
VITEST = "\x1b[32m \u2713\x1b[39m src/a.test.ts (2)\n\n\x1b[2m Test Files \x1b[22m \x1b[1m\x1b[32m1 passed\x1b[39m\x1b[22m\x1b[90m (1)\x1b[39m\n\x1b[2m      Tests \x1b[22m \x1b[1m\x1b[31m1 failed\x1b[39m\x1b[22m\x1b[2m | \x1b[22m\x1b[1m\x1b[32m1 passed\x1b[39m\x1b[22m\x1b[90m (2)\x1b[39m\n"
VITEST_PLAIN = " Test Files  1 passed (1)\n      Tests  4 passed (4)\n   Start at  10:00:00\n"


@pytest.mark.parametrize(
    ("output", "count"),
    [
        (UNITTEST_OK, 3),
        ("Ran 1 test in 0.000s\n\nFAILED (errors=1)\n", 1),
        (UNITTEST_NONE, 0),
        (PYTEST_DEFAULT, 4),
        (PYTEST_QUIET, 4),
        (PYTEST_COLLECTION_ERROR, 1),
        (PYTEST_NONE, 0),
        (PYTEST_ALL_SKIPPED, 0),
        (PYTEST_WARNINGS, 2),
        (NODE_TAP, 2),
        (NODE_SPEC, 3),
        (NODE_NONE, 0),
        (GO_VERBOSE, 2),
        (GO_PACKAGES, 2),
        (GO_NOTHING, 0),
        (GO_BUILD_FAILED, 1),
        (CARGO, 2),
        (CARGO_NONE, 0),
        (JEST, 3),
        (JEST_NONE, 0),
        (VITEST, 2),
        (VITEST_PLAIN, 4),
        ("all good\n", None),
        ("", None),
        (UNITTEST_OK + PYTEST_QUIET, 7),  # two runners in one command add up
    ],
)
def test_count_tests(output: str, count: int | None) -> None:
    assert count_tests(output) == count


def test_tail_keeps_the_end() -> None:
    text = "\n".join(f"line {n}" for n in range(100))
    assert tail(text).splitlines()[-1] == "line 99"
    assert len(tail(text).splitlines()) == 30
    assert len(tail("x" * 10_000)) <= 3003


# --- running a suite on a real run ------------------------------------------------------


def _tree_digest(repo: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(repo.rglob("*")):
        digest.update(str(path.relative_to(repo)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
            digest.update(str(os.stat(path).st_mode).encode())
    return digest.hexdigest()


def test_a_passing_suite_is_true_and_the_clone_is_untouched(tiny: Tiny) -> None:
    run = Assay.load(tiny(ran_suite=False))
    before = _tree_digest(run.repo)
    verdict = run.tests()
    assert (verdict.value, verdict.reason) == (True, "")
    # The suite wrote its bytecode in the throwaway copy, not in the measured clone.
    assert _tree_digest(run.repo) == before
    assert not list(run.repo.rglob("__pycache__"))


def test_a_failing_suite_is_false_with_the_tail_of_its_output(tiny: Tiny) -> None:
    verdict = Assay.load(tiny(change=False)).tests()
    assert verdict.value is False
    assert "exit 1, 3 tests ran" in verdict.reason
    assert "test_remove_unseen_word_stays_at_zero" in verdict.reason
    assert "FAILED (failures=1)" in verdict.reason


def test_the_verdict_is_kept_after_the_first_call(tiny: Tiny) -> None:
    run = Assay.load(tiny())
    assert run.tests() is run.tests()


def test_a_failing_prepare_is_unjudged(tiny: Tiny) -> None:
    prepare = (f"{PYTHON} -c 'raise SystemExit(3)'",)
    verdict = Assay.load(tiny(prepare=prepare)).tests()
    assert verdict.value is None
    assert "prepare" in verdict.reason and "exit 3" in verdict.reason


def test_prepare_runs_first_in_the_same_copy(tiny: Tiny) -> None:
    # prepare writes a module the suite imports: it ran first, and in the suite's folder.
    context = tiny(
        test_command=f"{PYTHON} -c 'import prepared'",
        prepare=(f'{PYTHON} -c \'open("prepared.py", "w").close()\'',),
        metrics=("ok",),
    )
    verdict = Assay.load(context).tests()
    assert verdict.value is True, verdict.reason
    assert not (Assay.load(context).repo / "prepared.py").exists()


def test_a_suite_that_runs_no_tests_is_unjudged(tiny: Tiny) -> None:
    command = f"{PYTHON} -m unittest discover -s tests -p 'nothing_*.py'"
    verdict = Assay.load(tiny(test_command=command, metrics=("ok",))).tests()
    # unittest exits non-zero or zero with 0 tests depending on the version: either way unjudged.
    assert verdict.value is None
    assert "ran no tests" in verdict.reason or "could not" in verdict.reason


def test_zero_tests_with_exit_zero_is_unjudged(tiny: Tiny) -> None:
    command = f"{PYTHON} -c 'print(\"Ran 0 tests in 0.000s\")'"
    verdict = Assay.load(tiny(test_command=command, metrics=("ok",))).tests()
    assert verdict.value is None and "ran no tests" in verdict.reason


def test_without_a_count_the_exit_code_decides(tiny: Tiny) -> None:
    passing = f"{PYTHON} -c pass"
    failing = f"{PYTHON} -c 'raise SystemExit(\"broken\")'"
    assert Assay.load(tiny(test_command=passing, metrics=("ok",))).tests().value is True
    verdict = Assay.load(tiny(test_command=failing, metrics=("ok",))).tests()
    assert verdict.value is False and "broken" in verdict.reason


def test_a_suite_over_its_timeout_is_unjudged(tiny: Tiny) -> None:
    command = f"{PYTHON} -c 'import time; time.sleep(30)'"
    verdict = Assay.load(tiny(test_command=command, metrics=("ok",))).tests(timeout=1)
    assert verdict.value is None
    assert "did not finish within the timeout of 1 s" in verdict.reason


def test_a_suite_that_cannot_start_is_unjudged(tiny: Tiny) -> None:
    command = "no-such-program-trysquare --test"
    verdict = Assay.load(tiny(test_command=command, metrics=("ok",))).tests()
    assert verdict.value is None
    assert "could not start" in verdict.reason


def test_the_suite_is_split_without_a_shell(tiny: Tiny) -> None:
    # A quoted argument reaches the program as one word, and nothing expands it.
    command = f"{PYTHON} -c 'import sys; sys.exit(sys.argv[1] != \"a b\")' 'a b'"
    verdict = Assay.load(tiny(test_command=command, metrics=("ok",))).tests()
    assert verdict.value is True, verdict.reason


def test_the_harness_context_keeps_test_command_absent(tiny: Tiny) -> None:
    context = tiny(test_command=None, metrics=("delivered",))
    assert "test_command" not in json.loads(context.read_text())
    with pytest.raises(LookupError, match="declares no test_command"):
        Assay.load(context).tests()


# --- a suite that ran nothing is unjudged, never False (issue 14.3) ---------------------


def _script(tmp_path: Path, name: str, body: str) -> Path:
    """A wrapper script, named so nothing in its name says "pytest"."""
    path = tmp_path / name
    path.write_text(f"#!{PYTHON}\n{body}", encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("body", "words"),
    [
        # pytest's "no tests collected" and usage error, behind a wrapper: no count printed.
        ("import sys; print('collecting ... ERROR: not found: tests/x.py'); sys.exit(4)", "exit 4"),
        ("import sys; print('collected nothing'); sys.exit(5)", "exit 5"),
        # unittest on 3.12+ with an empty discovery.
        ("import sys; print('NO TESTS RAN'); sys.exit(5)", "NO TESTS RAN"),
        # npm with no such script (npm 10 says `npm error`, older ones `npm ERR!`).
        (
            "import sys; print('npm error Missing script: \"test\"', file=sys.stderr); sys.exit(1)",
            "npm has no such script",
        ),
        (
            "import sys; print('npm ERR! Missing script: \"test\"', file=sys.stderr); sys.exit(1)",
            "npm has no such script",
        ),
        # A shell or `env` inside the wrapper could not run the real suite.
        ("import sys; print('env: jest: No such file or directory'); sys.exit(127)", "exit 127"),
        ("import sys; print('permission denied: ./run'); sys.exit(126)", "exit 126"),
    ],
)
def test_a_suite_that_ran_nothing_is_unjudged_whatever_its_name(
    tiny: Tiny, tmp_path: Path, body: str, words: str
) -> None:
    script = _script(tmp_path, "check-all", body)
    verdict = Assay.load(tiny(test_command=str(script), metrics=("ok",))).tests()
    assert verdict.value is None, verdict.reason
    assert words in verdict.reason and "nobody judged" in verdict.reason


def test_real_unittest_finding_nothing_is_unjudged(tiny: Tiny, tmp_path: Path) -> None:
    # Inside the clone's copy: a folder outside it is not in the jail's view at all.
    command = f"{PYTHON} -m unittest discover -s . -p no_such_test_file.py"
    verdict = Assay.load(tiny(test_command=command, metrics=("ok",))).tests()
    assert verdict.value is None and "nobody judged" in verdict.reason


def test_a_suite_that_ran_and_failed_names_the_summary_it_read(tiny: Tiny, tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        "check-all",
        "import sys; print('FAIL: test_x'); print('Ran 3 tests in 0.01s'); print('FAILED (failures=1)');"
        " sys.exit(1)",
    )
    verdict = Assay.load(tiny(test_command=str(script), metrics=("ok",))).tests()
    assert verdict.value is False
    assert "3 tests ran; read from unittest's `Ran N tests`" in verdict.reason


def test_a_failing_suite_with_no_summary_says_the_exit_code_decided(tiny: Tiny) -> None:
    failing = f"{PYTHON} -c 'raise SystemExit(\"broken\")'"
    verdict = Assay.load(tiny(test_command=failing, metrics=("ok",))).tests()
    assert verdict.value is False
    assert "no test summary recognised, so the exit code decided" in verdict.reason


def test_a_silent_failing_prepare_leaves_no_dangling_colon(tiny: Tiny) -> None:
    context = tiny(
        test_command=f"{PYTHON} -c pass",
        prepare=[f"{PYTHON} -c 'raise SystemExit(3)'"],
        metrics=("ok",),
    )
    verdict = Assay.load(context).tests()
    assert verdict.value is None
    assert not verdict.reason.rstrip().endswith(":")
    assert verdict.reason.endswith("(it printed nothing)")


def test_a_failing_prepare_reason_ends_with_its_output_tail(tiny: Tiny) -> None:
    context = tiny(
        test_command=f"{PYTHON} -c pass",
        prepare=[f"{PYTHON} -c 'import sys; print(\"npm ci: lockfile mismatch\"); sys.exit(1)'"],
        metrics=("ok",),
    )
    verdict = Assay.load(context).tests()
    assert verdict.value is None
    assert verdict.reason.endswith("npm ci: lockfile mismatch")


def test_home_is_writable_inside_the_jail_so_caches_work(tiny: Tiny) -> None:
    # npm, pip, cargo and go keep their caches under $HOME: `npm ci` failed with EACCES on
    # $HOME/.npm where the jail ran the suite as nobody in a /tmp only root could write.
    cache = (
        f'{PYTHON} -c \'import pathlib; c = pathlib.Path.home() / ".npm" / "_cacache"; '
        'c.mkdir(parents=True); (c / "index").write_text("x")\''
    )
    context = tiny(
        test_command=f"{PYTHON} -c 'print(\"Ran 1 test in 0.0s\")'",
        prepare=(cache,),
        metrics=("ok",),
    )
    verdict = Assay.load(context).tests()
    assert verdict.value is True, verdict.reason


def test_a_write_refused_outside_the_scratch_gets_trysquares_hint(tiny: Tiny) -> None:
    # npm's own advice for EACCES is `sudo chown -R ...`: trysquare names the path and the fix.
    denied = f'{PYTHON} -c \'open("/usr/trysquare-denied", "w")\''
    verdict = Assay.load(tiny(prepare=(denied,))).tests()
    assert verdict.value is None
    assert "(trysquare: writing /usr/trysquare-denied was refused:" in verdict.reason
    assert "npm ci --cache .npm-cache" in verdict.reason
