"""Running a scenario's declared suite for ``run.tests()``, and reading what it ran.

Kept apart from ``trysquare.assay`` so that importing the assay stays cheap: this
module (and ``subprocess`` behind ``trysquare._process``) is loaded only when a
validator actually calls ``run.tests()``.

The verdict rules (what ``run.tests()`` promises):

- ``prepare`` or the suite timing out -> unjudged: nobody judged.
- ``prepare`` failing or not starting, the suite not starting, or the suite
  reporting that it ran zero tests -> decided by a control run at base: where the
  same suite runs tests on the base tree, this run failed (its tree stopped the
  suite); where it runs nothing there either, unjudged — a suite that tested
  nothing has not said the code works (nor that it is broken).
- the suite saying, some other way, that it ran nothing -> unjudged: exit 4 or 5
  with no count of tests (pytest's usage error and "no tests collected" — read by
  the exit code, not the command's name, since a wrapper script may run pytest),
  unittest's "NO TESTS RAN", npm's "Missing script", mocha's "Exception during
  run" or "No test files found", exit 126/127 (the program is not executable / not
  found, as a shell or ``env`` reports it). A node test file that fails to load is
  not a test (node counts it as one).
- otherwise the exit code decides, and a failure carries the TAP ``not ok`` lines,
  the tail of the output, and names the summary it read (or says it fell back to
  the exit code).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from trysquare._env import child_environment
from trysquare._process import TAIL_LINES, output_text, run_steps, tail
from trysquare._words import split_command
from trysquare.jail import JailPolicy, jail_key
from trysquare.sandbox import Sandbox

if TYPE_CHECKING:
    from trysquare.assay import Metric

__all__ = ["count_tests", "ran_nothing", "read_counts", "run_suite", "tail"]

# How much of a failing suite's output a reason carries.

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# unittest: "Ran 3 tests in 0.001s" (also "Ran 1 test in ...").
_UNITTEST = re.compile(r"^Ran (\d+) tests? in ", re.M)

# pytest's closing summary, with or without the "=" rulers of the default mode:
#   "==== 2 failed, 3 passed, 1 warning in 0.12s ====", "5 passed in 0.01s",
#   "no tests ran in 0.01s", "1 error in 0.3s" (a collection error).
_PYTEST_LINE = re.compile(
    r"^=*[ \t]*((?:no tests ran|\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|"
    r"deselected|rerun))(?:, (?:\d+ \w+))*) in [\d.]+s\b.*$",
    re.M,
)
_PYTEST_PART = re.compile(r"(\d+) (passed|failed|errors?|xfailed|xpassed)\b")

# node --test: TAP ("# tests 4") or the spec reporter ("ℹ tests 4").
_NODE = re.compile(r"^(?:#|\u2139) tests (\d+)[ \t\r]*$", re.M)

# go test: per-test lines under -v (top level only: subtests are indented),
# and per-package lines otherwise. go separates a package line's fields with a
# tab ("ok  \tpkg\t0.01s"), which keeps TAP's "ok 1 - name" and jest's
# "FAIL src/a.test.js" out.
_GO_TEST = re.compile(r"^--- (?:PASS|FAIL): ", re.M)
_GO_VERBOSE = re.compile(r"^=== RUN ", re.M)
_GO_PACKAGE_OK = re.compile(r"^ok {0,3}\t\S+\t.*$", re.M)
_GO_PACKAGE_FAIL = re.compile(r"^FAIL\t\S+.*$", re.M)
_GO_NO_TESTS = re.compile(r"^\? {0,3}\t\S+\t\[no test files\]", re.M)

# cargo test: one line per test binary, doc-tests included.
_CARGO = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed;", re.M)

# Whitespace in these is never `\s`, which spans lines: `^\s*` at every line of a long
# run of blank lines (the agent's output) costs quadratic time.
# jest: "Tests:       1 failed, 2 passed, 3 total"; vitest: "Tests  1 failed | 2 passed (3)".
# Counted: passed and failed (skipped and todo tests did not run; an all-skipped suite ran none).
_JEST = re.compile(r"^[ \t\r]*Tests:[ \t]+(.*?)\d+ total[ \t\r]*$", re.M)
_VITEST = re.compile(r"^[ \t\r]*Tests[ \t]+((?:\d+ \w+(?: \| )?)+)[ \t]*\(\d+\)[ \t\r]*$", re.M)
_JS_RAN = re.compile(r"(\d+) (?:passed|failed)\b")
_JS_NONE = re.compile(r"^[ \t\r]*No tests? (?:files )?found", re.M)

# mocha's spec reporter (and its dot, list... reporters): "  3 passing (35ms)", "  1 failing";
# pending tests were not run. Failures in hooks count among the failing.
_MOCHA_PASSING = re.compile(r"^ *(\d+) passing \(\d+(?:\.\d+)?(?:ms|s|m|h)\)[ \t\r]*$", re.M)
_MOCHA_FAILING = re.compile(r"^ *(\d+) failing[ \t\r]*$", re.M)
# mocha stopping before any test: a file that does not load, or no file at all.
_MOCHA_EXCEPTION = re.compile(r"^[ \t\r]*Exception during run: (.*)$", re.M)
_MOCHA_NO_FILES = re.compile(r"^[ \t\r]*Error: No test files found\b", re.M)


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
    return max(0, sum(counts) - len(_load_failures(text)))


# A TAP `not ok` line and its YAML block ("  ---" ... "  ...").
_TAP_NOT_OK = re.compile(r"^( *)not ok \d+ - (.*)$", re.M)
_TAP_BLOCK_MAX = 20_000
_TAP_BLOCK = re.compile(r"\n *---\n(.*?)^ *\.\.\.$", re.M | re.S)
# node: the comment lines a file's process printed before its entry ("# Error: ...").
_TAP_ERROR = re.compile(r"^# ((?:\w*Error|Error)\b[^\n]*)$", re.M)


def _load_failures(text: str) -> list[tuple[str, str]]:
    """node --test's entries that are a test *file* whose process failed, not a test.

    Each is (the file, the error its process printed, or ""). Node reports such a file
    as a test of its own: top level, named by its path, with the process's
    ``exitCode`` in its YAML block and ``error: 'test failed'``.
    """
    found: list[tuple[str, str]] = []
    last_end = 0
    for match in _TAP_NOT_OK.finditer(text):
        if match.group(1):
            continue  # a subtest
        # A block is short; bounding the look keeps a huge output linear.
        block = _TAP_BLOCK.match(text[match.end() : match.end() + _TAP_BLOCK_MAX])
        if block is None:
            continue
        yaml = block.group(1)
        if not re.search(r"^  exitCode: ", yaml, re.M) or "error: 'test failed'" not in yaml:
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
_UNITTEST_NONE = re.compile(r"^NO TESTS RAN\b", re.M)
_NPM_MISSING = re.compile(r"^npm (?:ERR!|error) Missing script: ?(.*)$", re.M)


def read_counts(output: str) -> tuple[int | None, list[str]]:
    """The count of tests ``output`` reports, and the names of the summaries it was read from."""
    text = _ANSI.sub("", output)
    found = [(n, _READER_NAMES[read]) for read in _READERS if (n := read(text)) is not None]
    if not found:
        return None, []
    return sum(n for n, _ in found), [name for _, name in found]


def ran_nothing(returncode: int | None, output: str, count: int | None) -> str | None:
    """Why a finished suite judged nothing, or ``None`` when it did judge.

    A suite that never ran a test has said nothing about the code: reading it as
    ``False`` would turn "nobody judged" into "the agent failed".
    """
    text = _ANSI.sub("", output)
    if count == 0:
        unloaded = _load_failures(text)
        if unloaded:
            return "it ran no tests: " + "; ".join(_did_not_load(unloaded))
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
            "\"no tests collected\")"
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
    text = _ANSI.sub("", output)
    found = [n for n in (read(text) for read in _READERS) if n is not None]
    return sum(found) if found else None


def _words(command: str | Sequence[str]) -> list[str]:
    # The scenario carries strings; an already split argv is accepted as it is.
    if isinstance(command, str):
        return split_command(command)
    return [str(word) for word in command]


def run_suite(
    repo: Path,
    test_command: str | Sequence[str],
    prepare: Sequence[str | Sequence[str]] = (),
    *,
    timeout: float = 600.0,
    pass_env: Sequence[str] = (),
    protected: Iterable[str] = (),
    jail: JailPolicy | None = None,
    guarded: Sequence[str | Path] = (),
    base: str | None = None,
) -> Metric:
    """Run ``prepare`` then ``test_command`` in a throwaway copy of ``repo``; return the verdict.

    ``timeout`` bounds the whole of it, prepare included. The measured clone is
    never written to: everything runs in a copy under a temporary folder that is
    removed afterwards. The suite is the measured agent's code: it runs in the
    jail (:mod:`trysquare.jail`, ``jail`` the scenario's policy; the defaults when
    ``None``), never sees ``guarded`` folders, and gets this process's environment
    minus every secret-looking variable not named in ``pass_env`` (the scenario's
    ``[task] pass_env``).

    When the suite ran nothing in this tree (it could not start, ``prepare`` failed,
    it collected no test) and ``base`` (the commit the agent started from) is given,
    the same suite runs once on the tree at ``base`` — the control, kept in
    trysquare's cache per base tree and suite. Where it ran tests at base, this run
    *failed*: its tree stopped the suite. Only where it ran nothing at base too is the
    verdict unjudged: then nobody could have judged it.
    """
    from trysquare import repo as repo_module  # lazy: not needed unless a suite runs

    from trysquare.assay import Metric  # noqa: F811 (the module is loaded by now)
    suite = _words(test_command)
    if not suite:
        raise ValueError("the scenario's test_command is empty: there is no suite to run")
    shown = " ".join(suite)
    steps = [("prepare", _words(step)) for step in prepare] + [("the suite", suite)]
    env = child_environment(passed=pass_env, protected=protected)
    # The runner's door for this validator's suite requests is not the suite's business.
    from trysquare._suiteslot import SOCKET_ENV

    env.pop(SOCKET_ENV, None)
    policy = jail if jail is not None else JailPolicy()

    def copy_run(scratch: str) -> Path:
        return repo_module.copy_tree(Path(repo), Path(scratch) / "repo")

    verdict, settled = _on_the_prepared_tree(
        Path(repo), steps, shown, env=env, timeout=timeout, jail=policy,
        guarded=[Path(repo), *guarded],
    ) or _run_steps_on(
        copy_run, steps, shown, env=env, timeout=timeout, jail=policy, guarded=[Path(repo), *guarded]
    )
    if settled or base is None:
        return verdict
    control = _control_at_base(
        Path(repo), base, steps, shown, env=env, timeout=timeout, jail=policy,
        guarded=[Path(repo), *guarded], pass_env=pass_env,
    )
    if control is None:
        return verdict  # the base tree could not be read: nobody can tell
    ran, said = control
    if ran:
        return Metric(
            False,
            f"the suite ran tests at base ({said}) and none in this run, so this run's tree "
            f"stopped it: {verdict.reason}",
        )
    # Short: the reason's own tail (what the suite printed) is what a reader needs.
    return Metric.unjudged(f"(so at base too) {verdict.reason}")


_NOBODY_JUDGED = "so nobody judged the suite"


def _on_the_prepared_tree(
    repo: Path,
    steps: Sequence[tuple[str, Sequence[str]]],
    shown: str,
    *,
    env: dict[str, str],
    timeout: float,
    jail: JailPolicy,
    guarded: Sequence[str | Path],
) -> tuple[Metric, bool] | None:
    """The suite run on a copy of the run's shared prepared tree (:mod:`trysquare._prepared`:
    ``prepare`` once per run within a ``validate``, hidden tests reading the same tree), or
    ``None`` when the tree is not shared here (or its copy failed): prepare your own."""
    from trysquare import _prepared
    from trysquare.assay import Metric

    if len(steps) < 2:
        return None
    started = time.monotonic()
    shared = _prepared.shared_prepare(
        repo, steps[:-1], env=env, timeout=timeout, jail=jail, guarded=guarded,
        tail_lines=TAIL_LINES,
    )
    if shared is None:
        return None
    problem = shared.problem_for(_NOBODY_JUDGED)
    if problem is not None:
        last = shared.last
        hint = "" if last is None else _confinement_hint(output_text(last), shared.origin)
        return Metric.unjudged(problem + hint), last is not None and last.timed_out

    def copy_prepared(scratch: str) -> Path:
        return _prepared.copy_prepared(shared, Path(scratch) / "repo")

    left = max(timeout - (time.monotonic() - started), 0.0)
    try:
        return _run_steps_on(
            copy_prepared, steps[-1:], shown, env=env, timeout=left, jail=jail, guarded=guarded,
            shown_as=shared.origin,
        )
    except OSError:
        return None  # the prepared tree could not be copied: this suite prepares its own


def _run_steps_on(
    make_copy: Callable[[str], Path],
    steps: Sequence[tuple[str, Sequence[str]]],
    shown: str,
    *,
    env: dict[str, str],
    timeout: float,
    jail: JailPolicy,
    guarded: Sequence[str | Path],
    shown_as: str | None = None,
) -> tuple[Metric, bool]:
    """The verdict of the steps on a fresh copy, and whether it is settled: ``False`` when
    the suite ran nothing (it could not start, prepare failed, it ran no test), which a
    control at base may decide; a timeout is settled (unjudged: no control decides it).
    ``shown_as``: the path the jail shows the scratch folder at (a prepared tree's own)."""
    from trysquare.assay import Metric

    from trysquare._scratch import throwaway_folder

    # Removed however deep a tree the agent's code left in it (never a crash into "unjudged").
    with throwaway_folder("trysquare-tests-") as scratch:
        seen_as = scratch if shown_as is None else shown_as
        env = {**env, "TMPDIR": seen_as}
        copy = make_copy(scratch)
        done = run_steps(
            steps, cwd=copy, timeout=timeout, env=env,
            # The agent's test code writes only in its throwaway scratch folder
            # (where the kernel allows it): never the clone, the run, the etalon cache.
            sandbox=Sandbox([scratch]),
            jail=jail,
            guarded=guarded,
            consequence=_NOBODY_JUDGED,
            shown_as=shown_as,
        )
    hint = "" if done.last is None else _confinement_hint(output_text(done.last), seen_as)
    if done.problem is not None or done.last is None:
        timed_out = done.last is not None and done.last.timed_out
        return Metric.unjudged((done.problem or "there was no suite to run") + hint), timed_out
    verdict = _verdict(shown, done.last.returncode, output_text(done.last))
    if hint and verdict.value is not True:
        verdict = Metric(verdict.value, verdict.reason + hint)
    return verdict, verdict.judged


# A write refused by the confinement, as node, npm, Python and the shell say it.
_DENIED = re.compile(r"EACCES|EROFS|EPERM|Permission denied|Read-only file system")
_DENIED_PATH = re.compile(r"""(?:^|[\s'"`(=])(/[^\s'"`,:)]+)""")


def _confinement_hint(output: str, scratch: str) -> str:
    """trysquare's own word on a write the confinement refused outside the scratch folder:
    the path, and what to do (a tool's own advice, ``sudo chown``, would not help)."""
    lines = _ANSI.sub("", output).splitlines()
    for number, line in enumerate(lines):
        if _DENIED.search(line) is None:
            continue
        # npm names the path on a line of its own after the code ("npm error path /x").
        for nearby in lines[number : number + 4]:
            for path in _DENIED_PATH.findall(nearby):
                if path == scratch or path.startswith(scratch.rstrip("/") + "/"):
                    continue
                if path.startswith(("/dev/", "/proc/")):
                    continue
                return (
                    f"\n(trysquare: writing {path} was refused: the suite and prepare may write "
                    "only their copy of the clone and $TMPDIR (in the jail, $HOME too) — point "
                    "the tool's cache or output there, e.g. `npm ci --cache .npm-cache`)"
                )
    return ""


def _control_at_base(
    repo: Path,
    base: str,
    steps: Sequence[tuple[str, Sequence[str]]],
    shown: str,
    *,
    env: dict[str, str],
    timeout: float,
    jail: JailPolicy,
    guarded: Sequence[str | Path],
    pass_env: Sequence[str],
) -> tuple[bool, str] | None:
    """Whether the suite runs tests on the tree at ``base``, and what it said; ``None``
    when that tree cannot be read. Kept in trysquare's cache (never a run folder, which
    is the agent's) per base tree and suite, so every run of a matrix pays it once."""
    import hashlib
    import json

    from trysquare import _atomic, repo as repo_module
    from trysquare.errors import RepoError

    try:
        tree = repo_module.materialise_etalon(repo, base)
    except (RepoError, OSError):
        return None
    decided = {
        "version": 1, "tree": tree.name, "steps": [list(argv) for _, argv in steps],
        "pass_env": sorted(pass_env), "jail": jail_key(jail),
    }
    key = hashlib.sha256(json.dumps(decided, sort_keys=True).encode()).hexdigest()
    cache = repo_module._cache_root() / "controls"
    entry = cache / f"{key}.json"
    try:
        kept = json.loads(entry.read_bytes())
        if isinstance(kept, dict) and isinstance(kept.get("ran"), bool):
            return kept["ran"], str(kept.get("said", ""))
    except (OSError, ValueError):
        pass

    def copy_base(scratch: str) -> Path:
        import shutil

        target = Path(scratch) / "repo"
        shutil.copytree(tree, target, symlinks=True)
        for folder, _dirs, files in os.walk(target):  # the etalon cache keeps files read-only
            os.chmod(folder, 0o755)
            for name in files:
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    os.chmod(path, os.stat(path).st_mode | 0o200)
        return target

    verdict, settled = _run_steps_on(
        copy_base, steps, shown, env=env, timeout=timeout, jail=jail, guarded=guarded
    )
    judged = verdict.judged
    if settled and not judged:
        return None  # a control that timed out says nothing either way; not kept
    first = verdict.reason.splitlines()[0] if verdict.reason else ""
    said = "it passed" if verdict.value is True else (
        "it ran and failed" if verdict.value is False else first[:200]
    )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        _atomic.write_json(entry, {"ran": judged, "said": said}, root=cache)
    except OSError:
        pass  # not kept: the next run asks again
    return judged, said


def _did_not_load(unloaded: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{file} did not load" + (f" ({error})" if error else "") for file, error in unloaded]


_FAILURES_SHOWN = 10


def _failed_lines(output: str) -> list[str]:
    """The tests a TAP stream says failed (``not ok`` lines), a file that did not load named
    as such, so a reason whose tail starts mid-YAML still says what failed."""
    text = _ANSI.sub("", output)
    unloaded = dict(_load_failures(text))
    lines: list[str] = []
    for match in _TAP_NOT_OK.finditer(text):
        name = match.group(2).strip()
        if name.endswith("# SKIP") or "# TODO" in name:
            continue
        if not match.group(1) and name in unloaded:
            lines.append(_did_not_load([(name, unloaded[name])])[0])
        else:
            lines.append(match.group(0).strip())
    return list(dict.fromkeys(lines))


def _tail_after_colon(output: str, lines: int = TAIL_LINES) -> str:
    """``":\n<tail>"``, or a plain "(no output)" rather than a dangling colon."""
    kept = tail(output, lines)
    return f":\n{kept}" if kept.strip() else " (it printed nothing)"


def _verdict(shown: str, returncode: int | None, output: str) -> Metric:
    """The suite's verdict from its exit code and output (see the module docstring)."""
    from trysquare.assay import Metric

    count, markers = read_counts(output)
    nothing = ran_nothing(returncode, output, count)
    if nothing is not None:
        return Metric.unjudged(
            f"the suite `{shown}` ran nothing, so nobody judged it: {nothing}"
            f"{_tail_after_colon(output, 5)}"
        )
    if returncode == 0:
        return Metric(True)
    assert returncode is not None
    how = f"killed by signal {-returncode}" if returncode < 0 else f"exit {returncode}"
    if count is None:
        read = "; no test summary recognised, so the exit code decided"
    else:
        read = f", {count} test{'s' if count != 1 else ''} ran; read from {' and '.join(markers)}"
    failed = _failed_lines(output)
    listed = ""
    if failed:
        more = len(failed) - _FAILURES_SHOWN
        listed = "; failing: " + "; ".join(failed[:_FAILURES_SHOWN])
        listed += f"; and {more} more" if more > 0 else ""
    return Metric(False, f"the suite failed ({how}{read}){listed}{_tail_after_colon(output)}")
