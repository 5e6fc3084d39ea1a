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

from trysquare._env import child_environment
from trysquare._process import TAIL_LINES, output_text, run_steps, tail
from trysquare._suite_counts import (
    ANSI,
    TAP_NOT_OK,
    count_tests,
    did_not_load,
    load_failures,
    ran_nothing,
    read_counts,
)
from trysquare._words import split_command
from trysquare.jail import JailPolicy, jail_key
from trysquare.sandbox import Sandbox

__all__ = ["SuiteVerdict", "count_tests", "ran_nothing", "read_counts", "run_suite", "tail"]


class SuiteVerdict:
    """What one run of the suite found: ``True``, ``False`` or ``None`` (unjudged), and why.

    The assay turns it into its ``Metric``; kept a plain record here so that this module
    never imports the assay (which imports this one to run the suite).
    """

    __slots__ = ("reason", "value")

    def __init__(self, value: bool | None, reason: str = "") -> None:
        self.value = value
        self.reason = reason

    @classmethod
    def unjudged(cls, reason: str) -> SuiteVerdict:
        return cls(None, reason)

    @property
    def judged(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        return f"SuiteVerdict({self.value!r}, {self.reason!r})"


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
) -> SuiteVerdict:
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
    from trysquare.git.suite_copy import copy_tree  # lazy: not needed unless a suite runs

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
        return copy_tree(Path(repo), Path(scratch) / "repo")

    verdict, settled = _on_the_prepared_tree(
        Path(repo),
        steps,
        shown,
        env=env,
        timeout=timeout,
        jail=policy,
        guarded=[Path(repo), *guarded],
    ) or _run_steps_on(
        copy_run,
        steps,
        shown,
        env=env,
        timeout=timeout,
        jail=policy,
        guarded=[Path(repo), *guarded],
    )
    if settled or base is None:
        return verdict
    control = _control_at_base(
        Path(repo),
        base,
        steps,
        shown,
        env=env,
        timeout=timeout,
        jail=policy,
        guarded=[Path(repo), *guarded],
        pass_env=pass_env,
    )
    if control is None:
        return verdict  # the base tree could not be read: nobody can tell
    ran, said = control
    if ran:
        return SuiteVerdict(
            False,
            f"the suite ran tests at base ({said}) and none in this run, so this run's tree "
            f"stopped it: {verdict.reason}",
        )
    # Short: the reason's own tail (what the suite printed) is what a reader needs.
    return SuiteVerdict.unjudged(f"(so at base too) {verdict.reason}")


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
) -> tuple[SuiteVerdict, bool] | None:
    """The suite run on a copy of the run's shared prepared tree (:mod:`trysquare._prepared`:
    ``prepare`` once per run within a ``validate``, hidden tests reading the same tree), or
    ``None`` when the tree is not shared here (or its copy failed): prepare your own."""
    from trysquare import _prepared

    if len(steps) < 2:
        return None
    started = time.monotonic()
    shared = _prepared.shared_prepare(
        repo,
        steps[:-1],
        env=env,
        timeout=timeout,
        jail=jail,
        guarded=guarded,
        tail_lines=TAIL_LINES,
    )
    if shared is None:
        return None
    problem = shared.problem_for(_NOBODY_JUDGED)
    if problem is not None:
        last = shared.last
        hint = "" if last is None else _confinement_hint(output_text(last), shared.origin)
        return SuiteVerdict.unjudged(problem + hint), last is not None and last.timed_out

    def copy_prepared(scratch: str) -> Path:
        return _prepared.copy_prepared(shared, Path(scratch) / "repo")

    left = max(timeout - (time.monotonic() - started), 0.0)
    try:
        return _run_steps_on(
            copy_prepared,
            steps[-1:],
            shown,
            env=env,
            timeout=left,
            jail=jail,
            guarded=guarded,
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
) -> tuple[SuiteVerdict, bool]:
    """The verdict of the steps on a fresh copy, and whether it is settled: ``False`` when
    the suite ran nothing (it could not start, prepare failed, it ran no test), which a
    control at base may decide; a timeout is settled (unjudged: no control decides it).
    ``shown_as``: the path the jail shows the scratch folder at (a prepared tree's own)."""

    from trysquare._scratch import throwaway_folder

    # Removed however deep a tree the agent's code left in it (never a crash into "unjudged").
    with throwaway_folder("trysquare-tests-") as scratch:
        seen_as = scratch if shown_as is None else shown_as
        env = {**env, "TMPDIR": seen_as}
        copy = make_copy(scratch)
        done = run_steps(
            steps,
            cwd=copy,
            timeout=timeout,
            env=env,
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
        return SuiteVerdict.unjudged(
            (done.problem or "there was no suite to run") + hint
        ), timed_out
    verdict = _verdict(shown, done.last.returncode, output_text(done.last))
    if hint and verdict.value is not True:
        verdict = SuiteVerdict(verdict.value, verdict.reason + hint)
    return verdict, verdict.judged


# A write refused by the confinement, as node, npm, Python and the shell say it.
_DENIED = re.compile(r"EACCES|EROFS|EPERM|Permission denied|Read-only file system")
_DENIED_PATH = re.compile(r"""(?:^|[\s'"`(=])(/[^\s'"`,:)]+)""")


def _confinement_hint(output: str, scratch: str) -> str:
    """trysquare's own word on a write the confinement refused outside the scratch folder:
    the path, and what to do (a tool's own advice, ``sudo chown``, would not help)."""
    lines = ANSI.sub("", output).splitlines()
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

    from trysquare import _atomic
    from trysquare.errors import RepoError
    from trysquare.git.etalon import materialise_etalon
    from trysquare.git.shadow import _cache_root

    try:
        tree = materialise_etalon(repo, base)
    except (RepoError, OSError):
        return None
    decided = {
        "version": 1,
        "tree": tree.name,
        "steps": [list(argv) for _, argv in steps],
        "pass_env": sorted(pass_env),
        "jail": jail_key(jail),
    }
    key = hashlib.sha256(json.dumps(decided, sort_keys=True).encode()).hexdigest()
    cache = _cache_root() / "controls"
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
    said = (
        "it passed"
        if verdict.value is True
        else ("it ran and failed" if verdict.value is False else first[:200])
    )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        _atomic.write_json(entry, {"ran": judged, "said": said}, root=cache)
    except OSError:
        pass  # not kept: the next run asks again
    return judged, said


_FAILURES_SHOWN = 10


def _failed_lines(output: str) -> list[str]:
    """The tests a TAP stream says failed (``not ok`` lines), a file that did not load named
    as such, so a reason whose tail starts mid-YAML still says what failed."""
    text = ANSI.sub("", output)
    unloaded = dict(load_failures(text))
    lines: list[str] = []
    for match in TAP_NOT_OK.finditer(text):
        name = match.group(2).strip()
        if name.endswith("# SKIP") or "# TODO" in name:
            continue
        if not match.group(1) and name in unloaded:
            lines.append(did_not_load([(name, unloaded[name])])[0])
        else:
            lines.append(match.group(0).strip())
    return list(dict.fromkeys(lines))


def _tail_after_colon(output: str, lines: int = TAIL_LINES) -> str:
    """``":\n<tail>"``, or a plain "(no output)" rather than a dangling colon."""
    kept = tail(output, lines)
    return f":\n{kept}" if kept.strip() else " (it printed nothing)"


def _verdict(shown: str, returncode: int | None, output: str) -> SuiteVerdict:
    """The suite's verdict from its exit code and output (see the module docstring)."""

    count, markers = read_counts(output)
    nothing = ran_nothing(returncode, output, count)
    if nothing is not None:
        return SuiteVerdict.unjudged(
            f"the suite `{shown}` ran nothing, so nobody judged it: {nothing}"
            f"{_tail_after_colon(output, 5)}"
        )
    if returncode == 0:
        return SuiteVerdict(True)
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
    return SuiteVerdict(False, f"the suite failed ({how}{read}){listed}{_tail_after_colon(output)}")
