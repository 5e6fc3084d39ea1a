"""The ``hidden-tests`` mode: judge a run the SWE-bench way.

Test files the agent never saw are copied into a throwaway copy of the measured
repository (the clone itself is never touched), the scenario's ``prepare`` runs,
then the declared command, which writes a JUnit XML report. Two lists of test
ids decide the metrics:

- ``resolved``: every ``fail_to_pass`` test passes and every ``pass_to_pass`` test
  still passes;
- ``f2p`` / ``p2p``: the fraction of each list that passes.

Outcomes come from the report only, never from the command's output or exit
code (a suite with failing tests exits non-zero; that is what it is for). When
nobody can say — no report, a report with no test, a listed id missing from
it, a failing ``prepare``, a timeout — the metrics are unjudged (``null`` with a
reason), never a pass and never a fail.
"""

from __future__ import annotations

import hashlib
import posixpath
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs
from trysquare.errors import RepoError
from trysquare.modes import Job, Outcome, TableSource, Validation, check_timeout
from trysquare.plugin_api import child_environment, run_steps, tail
from trysquare.repo import copy_tree
from trysquare.scenario import ShellWordError, split_command

from trysquare_hidden_tests.junit import Case, ReportError, read_report, unlisted_errors

__all__ = ["ROLES", "HiddenTestsMode", "HiddenTestsValidation"]

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


@attrs.frozen(kw_only=True)
class _Table:
    mode: str
    files: Any
    command: str
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    metrics: Any = None
    name: str = ""
    timeout: float = DEFAULT_TIMEOUT


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

    def digest(self) -> str:
        # The hidden files' bytes and the table identify this validator: editing a
        # hidden test makes every result it gave stale. Absolute paths are left
        # out, so moving the experiment keeps results current.
        hasher = hashlib.sha256()
        table = (
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

    def evaluate(self, job: Job) -> Outcome:
        hidden: list[tuple[str, bytes, int]] = []
        for destination, source in self.files:
            try:
                hidden.append((destination, source.read_bytes(), source.stat().st_mode & 0o777))
            except OSError as error:
                return Outcome.invalid(
                    f"hidden file {source} for {destination} cannot be read "
                    f"({error.strerror or error})"
                )
        prepare = [split_command(step) for step in job.context.get("prepare") or ()]
        with tempfile.TemporaryDirectory(prefix="trysquare-hidden-") as scratch:
            try:
                copy = copy_tree(Path(job.context["repo"]), Path(scratch) / "repo")
            except RepoError as error:
                return Outcome.invalid(f"the measured repository cannot be copied: {error.message}")
            problem = _place(copy, hidden)
            if problem is not None:
                return self._unjudged(problem)
            report = Path(scratch) / "junit.xml"
            argv = [word.replace(_SENTINEL, str(report)) for word in self.argv]
            # The agent's test code runs here, inside trysquare's process tree: no judge
            # key and no secret-looking variable unless [task] pass_env names it.
            env = child_environment(passed=job.suite_pass_env, protected=job.protected_env)
            done = run_steps(
                [("prepare", step) for step in prepare] + [("the command", argv)],
                cwd=copy, timeout=self.timeout,
                env={**env, "TMPDIR": scratch},  # scratch is all a confined suite may write
                # Only the scratch folder holding the copy (and its report) is writable
                # where the kernel allows it: never the clone, the run, the etalon cache.
                writable=[scratch],
                # The agent's code: in the jail, which never shows the run's folder.
                jail=job.jail,
                guarded=[job.run.dir],
                consequence="so no test ran",
                tail_lines=TAIL_LINES,
            )
            stderr = done.transcript
            if done.problem is not None:
                return attrs.evolve(self._unjudged(done.problem), stderr=stderr)
            try:
                cases = read_report(report)
            except ReportError as error:
                evidence = tail(stderr.decode("utf-8", "replace"), TAIL_LINES)
                return attrs.evolve(
                    self._unjudged(f"{error} by `{' '.join(argv)}`:\n{evidence}"),
                    stderr=stderr,
                )
        metrics, reasons = judge(cases, self.fail_to_pass, self.pass_to_pass)
        named = dict(self.roles)
        return Outcome(
            metrics={named[role]: metrics[role] for role, _ in self.roles},
            reasons={named[role]: reasons[role] for role, _ in self.roles if reasons.get(role)},
            stderr=stderr,
        )

    def _unjudged(self, reason: str) -> Outcome:
        return Outcome(
            metrics={name: None for _, name in self.roles},
            reasons={name: reason for _, name in self.roles},
        )


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
    cases: Mapping[str, Case], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The three metrics and their reasons from a report's cases (by role name)."""
    if not cases:
        reason = "the report holds no test, so nothing was judged"
        return dict.fromkeys(ROLES), dict.fromkeys(ROLES, reason)
    listed = set(fail_to_pass) | set(pass_to_pass)
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
        missing = [test for test in ids if test not in cases]
        not_passing = [cases[test] for test in ids if test in cases and not cases[test].passed]
        if missing:
            missing_any.extend(missing)
            metrics[role] = None
            reasons[role] = (
                f"{label} test{'s' if len(missing) > 1 else ''} absent from the report: "
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


class HiddenTestsMode:
    """Registered through ``trysquare_register_modes``; ``mode = "hidden-tests"``."""

    name = MODE

    def load(self, table: Mapping[str, Any], source: TableSource) -> HiddenTestsValidation:
        raw = source.structure(table, _Table)
        check_timeout(source, raw.timeout)
        files = _files(raw.files, source)
        argv = _command(raw.command, source)
        fail_to_pass = _ids(raw.fail_to_pass, "fail_to_pass", source)
        pass_to_pass = _ids(raw.pass_to_pass, "pass_to_pass", source)
        both = sorted(set(fail_to_pass) & set(pass_to_pass))
        if both:
            raise source.refuse("pass_to_pass", f"'{both[0]}' is also listed in fail_to_pass")
        roles = _roles(raw.metrics, source)
        used = {role for role, _ in roles}
        if not fail_to_pass and not pass_to_pass:
            raise source.refuse("fail_to_pass", "list at least one test id (JUnit classname.name)")
        if "f2p" in used and not fail_to_pass:
            raise source.refuse(
                "fail_to_pass",
                "is empty, so f2p could never be judged; list tests or drop f2p from metrics",
            )
        if "p2p" in used and not pass_to_pass:
            raise source.refuse(
                "pass_to_pass",
                "is empty, so p2p could never be judged; list tests or drop p2p from metrics",
            )
        return HiddenTestsValidation(
            mode=raw.mode,
            name=raw.name,
            metrics=tuple(name for _, name in roles),
            files=files,
            command=raw.command,
            argv=tuple(argv),
            fail_to_pass=fail_to_pass,
            pass_to_pass=pass_to_pass,
            roles=roles,
            timeout=raw.timeout,
        )


def _files(value: Any, source: TableSource) -> tuple[tuple[str, Path], ...]:
    if not isinstance(value, Mapping) or not value:
        raise source.refuse(
            "files",
            "must be a table of destination = source, e.g. "
            '{ "tests/test_hidden.py" = "hidden/test_hidden.py" }',
        )
    files: list[tuple[str, Path]] = []
    for destination, relative in value.items():
        key = f'files."{destination}"'
        if not isinstance(relative, str) or not relative:
            raise source.refuse(key, "must be the path of a file beside the scenario")
        normal = posixpath.normpath(destination) if destination else ""
        if (
            not destination
            or "\\" in destination
            or posixpath.isabs(destination)
            or normal in (".", "..")
            or normal.startswith("../")
            or ".git" in normal.split("/")
        ):
            raise source.refuse(
                key, "the destination must be a relative path inside the repository (not in .git)"
            )
        if normal in (known for known, _ in files):
            raise source.refuse(key, f"names the same destination as another key ({normal})")
        path = source.resolve(relative)
        if not path.is_file():
            raise source.refuse(
                key, f"the hidden file '{relative}' does not exist (looked for {path})"
            )
        files.append((normal, path))
    return tuple(sorted(files))


def _command(command: str, source: TableSource) -> list[str]:
    if not command.strip():
        raise source.refuse("command", "is empty")
    if PLACEHOLDER not in command:
        raise source.refuse(
            "command",
            f"must name the JUnit report's path as {PLACEHOLDER} (e.g. --junitxml={PLACEHOLDER})",
        )
    if _SENTINEL in command:
        raise source.refuse("command", "holds a NUL character")
    try:
        return split_command(command.replace(PLACEHOLDER, _SENTINEL))
    except ShellWordError as error:
        raise source.refuse("command", str(error)) from None


def _ids(ids: tuple[str, ...], key: str, source: TableSource) -> tuple[str, ...]:
    seen: set[str] = set()
    for index, test in enumerate(ids, start=1):
        if not test.strip():
            raise source.refuse(f"{key}[{index}]", "is empty")
        if test in seen:
            raise source.refuse(f"{key}[{index}]", f"'{test}' is listed twice")
        seen.add(test)
    return ids


def _roles(value: Any, source: TableSource) -> tuple[tuple[str, str], ...]:
    """``metrics``: a list choosing among the roles, or a table renaming them."""
    if value is None:
        return tuple((role, role) for role in ROLES)
    if isinstance(value, list):
        names: dict[str, str] = {}
        for index, role in enumerate(value, start=1):
            if role not in ROLES:
                raise source.refuse(
                    f"metrics[{index}]",
                    f"must be one of {', '.join(ROLES)} "
                    '(a table renames them: { resolved = "my_name" })',
                )
            if role in names:
                raise source.refuse(f"metrics[{index}]", f"'{role}' is listed twice")
            names[role] = role
    elif isinstance(value, Mapping):
        names = {}
        for role, name in value.items():
            if role not in ROLES:
                raise source.refuse(f"metrics.{role}", f"unknown; the roles are {', '.join(ROLES)}")
            if not isinstance(name, str):
                raise source.refuse(f"metrics.{role}", "must be a metric name (a string)")
            names[role] = name
    else:
        raise source.refuse(
            "metrics", "must be a list of resolved, f2p, p2p or a table renaming them"
        )
    if not names:
        raise source.refuse("metrics", "is empty; leave it out to record resolved, f2p and p2p")
    return tuple((role, names[role]) for role in ROLES if role in names)
