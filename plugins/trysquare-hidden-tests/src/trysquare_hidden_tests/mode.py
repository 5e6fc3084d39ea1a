"""The ``hidden-tests`` mode: judge a run the SWE-bench way.

Test files the agent never saw are copied into a throwaway copy of the measured
repository (the clone itself is never touched), the scenario's ``prepare`` runs,
then the declared command, which writes a JUnit XML report. Two lists of test
ids decide the metrics:

- ``resolved``: every ``fail_to_pass`` test passes and every ``pass_to_pass`` test
  still passes;
- ``f2p`` / ``p2p``: the fraction of each list that passes.

Outcomes come from the report only, never from the command's output or exit
code (a suite with failing tests exits non-zero; that is what it is for). The
copy runs with the test runner's settings as they are at base
(:mod:`trysquare_hidden_tests.harness`): the agent's harness is set aside and
named. A run with no usable report (none, unreadable, no test in it, a listed
id missing, a failing ``prepare``, a timeout) is compared with the same command
on the base tree (:mod:`trysquare_hidden_tests.control`): what reports at base
and not here did not pass. When nobody can say — the control cannot report
either, a listed id absent at base too — the metrics are unjudged (``null`` with
a reason), never a pass and never a fail.
"""

from __future__ import annotations

import hashlib
import posixpath
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs
from trysquare.api import (
    Outcome,
    RepoError,
    Validation,
    ValidationTask,
    child_environment,
    copy_tree,
    folders_of,
    materialise_etalon,
    prepared_tree,
    run_steps,
    split_command,
    tail,
    throwaway_folder,
)

from trysquare_hidden_tests.control import Control, at_base, control_key
from trysquare_hidden_tests.harness import SetAsideError, copy_base, set_aside
from trysquare_hidden_tests.junit import Case, ReportError, read_report, unlisted_errors

__all__ = ["ROLES", "HiddenTestsValidation"]

MODE = "hidden-tests"
# The three things this mode measures, in the order they are reported.
ROLES: tuple[str, ...] = ("resolved", "f2p", "p2p")
PLACEHOLDER = "{junit}"
# Stands for {junit} while the command is vetted: split_command rightly refuses
# braces, and a NUL can never be part of a real argument.
_SENTINEL = "\x00junit\x00"
DEFAULT_TIMEOUT = 600.0
# How many ids a reason names before it says "and N more".
SHOWN_IDS = 5
TAIL_LINES = 20
# What the hidden command runs with besides trysquare's environment: no pytest plugin loads by
# itself (name one with -p in the command), no bytecode is left behind.
HARNESS_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
NO_REPORT = "no report was written"  # junit.read_report's words
NO_TEST = "the report holds no test"
LOST = "not in this run's report, reported at base"
# Part of the digest: results measured before the test runner's settings were set aside
# (the run's conftest.py in force), or with prepare run after the hidden files were placed,
# are stale.
_SEMANTICS = 3


@attrs.frozen(kw_only=True)
class HiddenTestsValidation(Validation):
    """A ``[[validation]] mode = "hidden-tests"`` table, loaded."""

    files: tuple[tuple[str, Path], ...]  # (destination in the repo, source beside the scenario)
    command: str
    argv: tuple[str, ...]  # the command's words, {junit} still a sentinel
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    roles: tuple[tuple[str, str], ...]  # (role, metric name), in ROLES order
    timeout: float = DEFAULT_TIMEOUT

    # The suite runs confined to the scratch folder holding its copy.
    confines_what_it_runs: ClassVar[bool] = True
    # It runs the agent's tree and tests (in the jail where it can start).
    runs_the_agents_code: ClassVar[bool] = True

    def digest(self) -> str:
        # The hidden files' bytes and the table identify this validator: editing a
        # hidden test makes every result it gave stale. Absolute paths are left
        # out, so moving the experiment keeps results current.
        hasher = hashlib.sha256()
        table = (
            _SEMANTICS,
            self.mode,
            self.command,
            self.fail_to_pass,
            self.pass_to_pass,
            self.roles,
            self.timeout,
        )
        hasher.update(repr(table).encode())
        for destination, source in self.files:
            hasher.update(f"\0{destination}\0".encode())
            try:
                hasher.update(hashlib.sha256(source.read_bytes()).digest())
            except OSError:
                hasher.update(b"<unreadable>")
        return "sha256:" + hasher.hexdigest()

    def evaluate(self, task: ValidationTask) -> Outcome:
        hidden: list[tuple[str, bytes, int]] = []
        for destination, source in self.files:
            try:
                hidden.append((destination, source.read_bytes(), source.stat().st_mode & 0o777))
            except OSError as error:
                return Outcome.invalid(
                    f"hidden file {source} for {destination} cannot be read "
                    f"({error.strerror or error})"
                )
        prepare = [split_command(step) for step in task.context.get("prepare") or ()]
        repo = Path(task.context["repo"])
        try:
            # The base commit's tree, read from git's objects into trysquare's cache (nothing
            # from the clone's config runs): the test runner's settings come from it.
            base = materialise_etalon(repo, str(task.context["base"]))
        except RepoError as error:
            return Outcome.invalid(f"the base commit's tree cannot be read: {error.message}")
        # The agent's test code runs here, inside trysquare's process tree: no judge key and
        # no secret-looking variable unless [task] pass_env names it; no pytest plugin loads
        # by itself (an installed one the agent's project declares would run first).
        # prepare runs with the suite's environment, so the tree it builds is the one
        # run.tests() shares; the harness's variables are the hidden command's alone.
        prepare_env = child_environment(passed=task.suite_pass_env, protected=task.protected_env)
        env = {**prepare_env, **HARNESS_ENV}
        # prepare runs once per run: on a tree shared with run.tests() where validate shares one.
        deadline = time.monotonic() + self.timeout  # prepare included, whoever ran it
        try:
            prepared = prepared_tree(task, prepare_env, timeout=self.timeout)
        except (RepoError, OSError):
            prepared = None  # this copy prepares its own, and says what went wrong
        if prepared is not None and prepared.problem is not None:
            tried = _Attempt(
                problem=prepared.problem_for("so no test ran"), stderr=prepared.transcript
            )
        else:
            tried = self._attempt(
                lambda dest: copy_tree(repo, dest),
                base,
                hidden,
                prepare,
                env,
                task,
                prepare_env=prepare_env,
                prepared=prepared,
                deadline=deadline,
            )
        if tried.invalid is not None:
            return Outcome.invalid(tried.invalid, stderr=tried.stderr)
        # Nothing measured (prepare failed, the timeout, the tree refused a hidden file) is
        # no report at all: like a missing report, the control at base says whose it is.
        cases = {} if tried.problem is not None else tried.cases or {}
        listed = (*self.fail_to_pass, *self.pass_to_pass)
        stderr = tried.stderr
        at_base: frozenset[str] | None = None
        nobody = ""
        if not cases or any(test not in cases for test in listed):
            # No usable report, or listed tests missing from it: the agent's doing, or nobody's?
            control = self._control(task, base, hidden, prepare, env, prepare_env)
            stderr += _control_transcript(control)
            if control.ids is not None:
                at_base = control.ids
                if not any(test in at_base for test in listed):
                    nobody = "the report at base holds none of the listed tests either"
            else:
                nobody = (
                    "at base the hidden tests could not report either "
                    f"({control.problem.partition(chr(10))[0].rstrip(':')}), so nobody can say"
                )
        metrics, reasons = judge(cases, self.fail_to_pass, self.pass_to_pass, at_base=at_base)
        if not cases:
            if tried.problem is not None:
                whole = tried.problem
                what, _, evidence = whole.partition("\n")
                what = what.rstrip(":")
            else:
                what = tried.report_error or NO_TEST
                evidence = f"`{tried.command}` printed:\n{tried.evidence}"
                whole = f"{what} by `{tried.command}`:\n{tried.evidence}"
            if at_base is not None and any(test in at_base for test in listed):
                headline = (
                    "the hidden tests reported at base and wrote no report in this run"
                    if tried.report_error == NO_REPORT and tried.problem is None
                    else f"the hidden tests reported at base, but in this run {what}"
                )
                shown = f"\n{evidence}" if evidence.strip() else ""
                reasons = {role: f"{headline}; {reason}{shown}" for role, reason in reasons.items()}
            else:
                said = whole + (f"\n{nobody}" if nobody else "")
                reasons = {role: said for role in reasons}
        elif nobody and at_base is None:
            reasons = {
                role: f"{reason}; {nobody}" if metrics[role] is None else reason
                for role, reason in reasons.items()
            }
        named = dict(self.roles)
        return Outcome(
            metrics={named[role]: metrics[role] for role, _ in self.roles},
            reasons={
                named[role]: _with_set_aside(reasons[role], tried.set_aside)
                for role, _ in self.roles
                if reasons.get(role)
            },
            stderr=stderr,
        )

    def _attempt(
        self,
        make_copy: Callable[[Path], Path],
        base: Path,
        hidden: Sequence[tuple[str, bytes, int]],
        prepare: Sequence[Sequence[str]],
        env: Mapping[str, str],
        task: ValidationTask,
        *,
        prepare_env: Mapping[str, str],
        prepared: Any = None,
        deadline: float | None = None,
    ) -> _Attempt:
        """Copy a tree and run ``prepare`` on it (or copy the run's shared ``prepared`` tree),
        then give it base's test-runner settings, place the hidden files, run the command.

        ``prepare`` runs before the hidden files are placed: the agent's install scripts
        never see them."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        # Removed however deep a tree the agent's code left there (never a crash).
        with throwaway_folder("trysquare-hidden-") as scratch:
            shown_as: str | None = None
            transcript = b""
            where = Path(scratch) / "repo"
            if prepared is not None:
                try:
                    copy = prepared.copy_to(Path(scratch) / "repo")
                    shown_as = prepared.origin
                    transcript = b"# prepare (run once for this run's validators):\n"
                    transcript += prepared.transcript
                except OSError:
                    # The shared tree cannot be copied: prepare a copy of this run's own,
                    # beside the one that failed half-way.
                    prepared = None
                    where = Path(scratch) / "own" / "repo"
            try:
                if prepared is None:
                    copy = make_copy(where)
            except RepoError as error:
                return _Attempt(
                    invalid=f"the measured repository cannot be copied: {error.message}"
                )
            except OSError as error:
                return _Attempt(invalid=f"the tree cannot be copied: {error.strerror or error}")
            within = None if prepared is None else prepared.folders_before
            if prepared is None and prepare:
                within = folders_of(copy)
                steps = [("prepare", list(step)) for step in prepare]
                done = run_steps(
                    steps,
                    timeout=max(deadline - time.monotonic(), 0.0),
                    **self._options(Path(scratch), copy, prepare_env, task, None),
                )
                transcript += done.transcript
                problem = done.problem
                last = done.last
                if problem is None and last is not None and last.returncode != 0:
                    # run_steps lets a last step fail: here it is prepare's.
                    output = tail(
                        (last.stdout + last.stderr).decode("utf-8", "replace"), TAIL_LINES
                    )
                    evidence = f":\n{output}" if output.strip() else " (it printed nothing)"
                    problem = (
                        f"prepare `{' '.join(steps[-1][1])}` failed (exit {last.returncode}), "
                        f"so no test ran{evidence}"
                    )
                if problem is not None:
                    return _Attempt(problem=problem, stderr=transcript)
            try:
                set_aside_now = tuple(
                    set_aside(copy, base, keep=[d for d, _, _ in hidden], within=within)
                )
            except SetAsideError as error:
                return _Attempt(problem=str(error), stderr=transcript)
            except OSError as error:
                return _Attempt(
                    problem=f"the test runner's settings at base cannot be put back "
                    f"({error.strerror or error})",
                    stderr=transcript,
                )
            problem = _place(copy, hidden)
            if problem is not None:
                return _Attempt(problem=problem, set_aside=set_aside_now, stderr=transcript)
            return self._run(
                Path(scratch),
                copy,
                env,
                set_aside_now,
                task,
                deadline=deadline,
                transcript=transcript,
                shown_as=shown_as,
                prepared=bool(prepare),
            )

    def _options(
        self,
        scratch: Path,
        copy: Path,
        env: Mapping[str, str],
        task: ValidationTask,
        shown_as: str | None,
    ) -> dict[str, Any]:
        # Only the scratch folder holding the copy (and its report) is writable where the
        # kernel allows it: never the clone, the run, the etalon cache.
        seen_as = str(scratch) if shown_as is None else shown_as
        return {
            "cwd": copy,
            "env": {**env, "TMPDIR": seen_as},  # scratch is all a confined suite may write
            "writable": [str(scratch)],
            # The agent's code: in the jail, which never shows the run's folder.
            "jail": task.jail,
            "guarded": [task.run.dir],
            "consequence": "so no test ran",
            "tail_lines": TAIL_LINES,
            "shown_as": shown_as,
        }

    def _run(
        self,
        scratch: Path,
        copy: Path,
        env: Mapping[str, str],
        set_aside_now: tuple[str, ...],
        task: ValidationTask,
        *,
        deadline: float,
        transcript: bytes,
        shown_as: str | None,
        prepared: bool,
    ) -> _Attempt:
        if set_aside_now:
            transcript += (
                "# trysquare set aside (the hidden tests run with the test-runner settings at "
                f"base): {', '.join(set_aside_now)}\n"
            ).encode()
        options = self._options(scratch, copy, env, task, shown_as)
        # The report's folder is made once prepare has ended, every process it started with
        # it: nothing from before the command can be waiting there as a report.
        report = Path(tempfile.mkdtemp(prefix="report-", dir=scratch)) / "junit.xml"
        # The command names it where it sees it: in the jail, a prepared tree's own path.
        named = report if shown_as is None else Path(shown_as) / report.relative_to(scratch)
        argv = [word.replace(_SENTINEL, str(named)) for word in self.argv]
        shown = " ".join(argv)
        done = run_steps(
            [("the command", argv)], timeout=max(deadline - time.monotonic(), 0.0), **options
        )
        transcript += done.transcript
        if done.problem is not None:
            problem = done.problem
            if done.last is not None and done.last.timed_out:
                problem = (
                    f"the command `{shown}` did not finish within the timeout of "
                    f"{self.timeout:g} s{' (prepare included)' if prepared else ''}"
                )
            return _Attempt(problem=problem, set_aside=set_aside_now, stderr=transcript)
        evidence = tail(transcript.decode("utf-8", "replace"), TAIL_LINES)
        said = _Attempt(set_aside=set_aside_now, stderr=transcript, command=shown)
        try:
            # Read once every process the command started has ended (run_steps saw to it).
            cases = read_report(report, root=scratch)
        except ReportError as error:
            return attrs.evolve(said, report_error=str(error), evidence=evidence)
        if not cases:
            return attrs.evolve(said, cases=cases, report_error=NO_TEST, evidence=evidence)
        return attrs.evolve(said, cases=cases)

    def _control(
        self,
        task: ValidationTask,
        base: Path,
        hidden: Sequence[tuple[str, bytes, int]],
        prepare: Sequence[Sequence[str]],
        env: Mapping[str, str],
        prepare_env: Mapping[str, str],
    ) -> Control:
        key = control_key(
            {
                "tree": base.name,  # materialise_etalon's folder is named by the tree's id
                "validator": self.digest(),
                "prepare": [list(step) for step in prepare],
                "pass_env": sorted(task.suite_pass_env),
            }
        )

        def run() -> Control:
            tried = self._attempt(
                lambda dest: copy_base(base, dest),
                base,
                hidden,
                prepare,
                env,
                task,
                prepare_env=prepare_env,
            )
            if tried.cases:
                return Control(ids=frozenset(tried.cases), transcript=tried.stderr)
            why = tried.invalid or tried.problem or tried.report_error or NO_TEST
            return Control(ids=None, problem=why, transcript=tried.stderr)

        return at_base(key, run)


@attrs.frozen(kw_only=True)
class _Attempt:
    """One run of the hidden tests on a copy (the run's tree, or base's for the control)."""

    cases: dict[str, Case] | None = None  # the report's, when it could be read
    report_error: str = ""  # why the report is no use (none, unreadable, no test in it)
    evidence: str = ""  # the tail of the output, for a reason
    command: str = ""
    problem: str | None = None  # nothing could be measured (prepare, timeout, placing)
    invalid: str | None = None  # the copy could not even be made
    set_aside: tuple[str, ...] = ()
    stderr: bytes = b""


def _with_set_aside(reason: str, set_aside_now: Sequence[str]) -> str:
    if not set_aside_now:
        return reason
    return (
        f"set aside the run's {', '.join(set_aside_now)} (the hidden tests run with the "
        f"test-runner settings at base); {reason}"
    )


def _control_transcript(control: Control) -> bytes:
    if control.cached:
        said = "reported" if control.ids is not None else "could not report"
        return f"\n# control run at base (known, not rerun): {said}\n".encode()
    return b"\n# control run at base:\n" + control.transcript


def _place(copy: Path, hidden: Sequence[tuple[str, bytes, int]]) -> str | None:
    """Write the hidden files into ``copy``; say why not when the tree forbids it."""
    root = copy.resolve()
    for destination, data, mode in hidden:
        target = copy / destination
        # The agent's tree may hold a link where a hidden file goes: writing
        # through it could reach the measured clone. Links are replaced, and no
        # folder on the way may lead out of the copy.
        parent = target.parent.resolve()  # checked before mkdir, which would follow links
        if parent != root and root not in parent.parents:
            return (
                f"the run's tree makes {posixpath.dirname(destination)}/ a link out of the "
                f"repository, so the hidden file {destination} cannot be placed"
            )
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return f"the hidden file {destination} cannot be placed ({error.strerror or error})"
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            return f"the run's tree holds a folder where the hidden file {destination} goes"
        target.write_bytes(data)
        target.chmod(mode)
    return None


def judge(
    cases: Mapping[str, Case],
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    *,
    at_base: Collection[str] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The three metrics and their reasons from a report's cases (by role name).

    ``at_base`` holds the ids the control run reported on the base tree: a listed test
    among them that this report lacks did not pass here (the run lost it); one absent at
    base too leaves its metrics unjudged (nobody can say, a misspelt id perhaps).
    """
    listed = set(fail_to_pass) | set(pass_to_pass)
    base_ids = frozenset(at_base or ())
    if not cases and not listed & base_ids:
        reason = f"{NO_TEST}, so nothing was judged"
        return dict.fromkeys(ROLES), dict.fromkeys(ROLES, reason)
    hint = unlisted_errors(cases, listed)
    hint_text = (
        f" (the report holds errors outside the listed tests: {'; '.join(hint)})" if hint else ""
    )
    metrics: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    missing_any: list[str] = []
    failing: list[str] = []
    for role, label, ids in (
        ("f2p", "fail_to_pass", fail_to_pass),
        ("p2p", "pass_to_pass", pass_to_pass),
    ):
        if not ids:
            metrics[role], reasons[role] = None, f"no {label} test is declared"
            continue
        missing = [test for test in ids if test not in cases and test not in base_ids]
        not_passing = [cases[test] for test in ids if test in cases and not cases[test].passed]
        not_passing += [
            Case(id=test, status="error", message=LOST)
            for test in ids
            if test not in cases and test in base_ids
        ]
        if missing:
            missing_any.extend(missing)
            metrics[role] = None
            reasons[role] = (
                f"{label} test{'s' if len(missing) > 1 else ''} absent from the report"
                f"{' (and from the one at base)' if at_base is not None else ''}: "
                f"{_names(missing)}{hint_text}"
            )
            continue
        passed = len(ids) - len(not_passing)
        metrics[role] = passed / len(ids)
        if not_passing:
            described = [
                f"{c.id} ({c.status}{': ' + c.message if c.message else ''})" for c in not_passing
            ]
            reasons[role] = (
                f"{passed} of {len(ids)} {label} tests pass; not passing: {_names(described)}"
            )
            failing.extend(f"{label} {text}" for text in described)
        else:
            reasons[role] = f"all {len(ids)} {label} tests pass"
    if missing_any:
        metrics["resolved"] = None
        reasons["resolved"] = (
            f"listed tests absent from the report: {_names(missing_any)}{hint_text}"
        )
    elif failing:
        metrics["resolved"] = False
        reasons["resolved"] = f"not resolved: {_names(failing)}"
    else:
        metrics["resolved"] = True
        reasons["resolved"] = (
            f"all {len(fail_to_pass)} fail_to_pass tests pass and all {len(pass_to_pass)} "
            "pass_to_pass tests still pass"
        )
    return metrics, reasons


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:SHOWN_IDS])
    return shown + (f" and {len(items) - SHOWN_IDS} more" if len(items) > SHOWN_IDS else "")
