"""``trysquare validate``, ``check`` and ``demo``: running validators and vetting a matrix first."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trysquare._shown import shown
from trysquare.cli.common import (
    _load,
    _refuse_duplicates,
    document_only,
    load_experiments,
    write_document,
)
from trysquare.cli.signals import arm_signal_deadline
from trysquare.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from trysquare.runs import Experiment


def _validate(args: argparse.Namespace) -> int:
    from trysquare.runner import ValidateOptions
    from trysquare.selection import Selection

    if args.junit_xml is not None and not args.junit_xml.absolute().parent.is_dir():
        # Said before anything runs: CI must not learn it after an hour of validators.
        folder = args.junit_xml.absolute().parent
        raise UsageError(f"--junit-xml {args.junit_xml}: the folder {folder} does not exist")
    scenario = _load(args.scenario, args.config)
    whole = load_experiments(args.paths, replay=args.replay)
    _refuse_duplicates(whole)
    selection = Selection.from_args(args.cell, args.run)
    experiments = selection.apply(whole)
    options = ValidateOptions(
        only=tuple(args.only),
        replay=args.replay,
        force=args.force,
        rerun_suite=args.rerun_suite,
        rejudge=args.rejudge,
        progress=False if args.no_progress else None,
        executor=args.executor,
        executor_options=_key_values(args.executor_option),
        quiet=args.quiet or args.format == "json",
        exitfirst=args.exitfirst,
        fail_on=tuple(dict.fromkeys(args.fail_on)),
        require_isolation=args.require_isolation,
        wait=not args.no_wait,
    )
    if args.jobs is not None:  # else the cores this process may use (ValidateOptions)
        import attrs

        options = attrs.evolve(options, jobs=args.jobs)
    _say_isolation(scenario, required=args.require_isolation)

    def outputs(summary: Any) -> int:
        if args.force and not args.rejudge:
            _say_verdicts_kept(
                scenario, args.only, sys.stderr if args.format == "json" else sys.stdout
            )
        # Selected runs were recorded; measures.json goes on holding every run.
        if selection.active:
            from trysquare.selection import restore_unselected

            restore_unselected(scenario, whole, experiments)
        return _ci_outputs(args, scenario, experiments, summary)

    machine = args.format == "json"
    if machine:
        with document_only():  # json: stdout holds the one object, whatever a mode prints
            return _run_validate(scenario, experiments, options, out=sys.stderr, finish=outputs)
    if args.format != "github":
        return _run_validate(scenario, experiments, options, out=sys.stdout, finish=outputs)
    from trysquare import github

    # The per-task lines hold the agent's text: GitHub reads no command in them.
    pause, args.github_token = github.stop_commands()
    print(pause, flush=True)
    try:
        return _run_validate(scenario, experiments, options, out=sys.stdout, finish=outputs)
    finally:
        if args.github_token is not None:  # interrupted before the annotations
            print(github.resume_commands(args.github_token), flush=True)


def _say_verdicts_kept(scenario: Any, only: Sequence[str], out: Any) -> None:
    """--force re-runs what is cheap; a paid verdict (a judge) is asked again only by --rejudge."""
    kept = [v.name for v in scenario.validations if v.costly and (not only or v.name in only)]
    if kept:
        names = ", ".join(f"'{name}'" for name in kept)
        print(
            f"--force kept the up-to-date verdicts of {names}: a judge is asked again only "
            "with --rejudge (which pays for new verdicts)",
            file=out,
        )


def _ci_outputs(args: argparse.Namespace, scenario: Any, experiments: Any, summary: Any) -> int:
    """``--junit-xml`` and ``--format json`` from what validate recorded; the closing line otherwise."""
    exit_code = summary.exit_code
    if args.junit_xml is None and args.format == "text":
        print(summary.closing_line())
        return exit_code
    from trysquare import ci

    found = ci.records(scenario, experiments, args.only)
    if args.junit_xml is not None:
        from trysquare.junit import write_junit

        try:
            write_junit(args.junit_xml, found, name=f"trysquare {scenario.path.stem}")
        except OSError as error:
            problem = error.strerror or str(error)
            print(
                shown(f"trysquare: --junit-xml {args.junit_xml}: not written: {problem}"),
                file=sys.stderr,
            )
            exit_code = max(exit_code, 1)
    if args.format == "json":
        write_document(
            ci.dump(ci.validate_document(summary, found, scenario=scenario, exit_code=exit_code))
        )
        return exit_code
    if args.format == "github":
        from trysquare import github

        print(github.resume_commands(args.github_token))
        args.github_token = None
        for line in github.annotation_lines(found):
            print(line)
    print(summary.closing_line())
    return exit_code


def _run_validate(
    scenario: Any, experiments: Any, options: Any, *, out: Any = None, finish: Any = None
) -> int:
    from trysquare import _process
    from trysquare.runner import validate

    received: list[int] = []

    def stop(signum: int, _frame: Any) -> None:
        received.append(signum)
        # Running validators end now, a judge's requests in flight too; nothing of theirs
        # is recorded.
        _process.interrupt()
        arm_signal_deadline(signum)  # a wait no kill ends (a plugin's blocking call) still ends

    _process.interrupt(asked=False)
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        summary = validate(
            scenario,
            experiments,
            options,
            out=out or sys.stdout,
            should_stop=lambda: bool(received),
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _process.interrupt(asked=False)
    if received:
        print(
            f"trysquare: interrupted: {summary.executed} task(s) finished and were kept; "
            "run validate again to do the rest",
            file=sys.stderr,
        )
        return 128 + received[0]
    if finish is not None:
        return int(finish(summary))
    print(summary.closing_line())
    return summary.exit_code


def _key_values(items: Sequence[str]) -> dict[str, str]:
    values = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--executor-option {item}: expected KEY=VALUE")
        values[key] = value
    return values


def _check(args: argparse.Namespace) -> int:
    if args.format != "json":
        return _check_matrix(args)
    with document_only():  # stdout holds the one object, whatever a mode prints
        return _check_matrix(args)


def _check_matrix(args: argparse.Namespace) -> int:
    scenario = _load(args.scenario, args.config)
    machine = args.format == "json"
    # With --format json the lines a person reads go into the one object on stdout.
    say = (lambda _line: None) if machine else print
    metrics = sum(len(v.metrics) for v in scenario.validations)
    say(
        f"{scenario.path.name}: loads ({len(scenario.validations)} validator(s), {metrics} metric(s))"
    )
    from trysquare.jail import isolation_line
    from trysquare.sandbox import protection_line

    protection = protection_line()
    say(protection)
    say(isolation_line(scenario.task.jail))
    from trysquare.suite_where import suite_lines

    suite = suite_lines(scenario.task.test_command)
    for line in suite:
        say(shown(line))
    if not args.paths:
        return _check_json(scenario, 0, protection, lines=suite) if machine else 0
    from trysquare.context import preflight
    from trysquare.errors import RunError

    experiments = load_experiments(args.paths)
    runs = []
    skipped = [str(error.message) for experiment in experiments for error in experiment.errors]
    for run in (run for experiment in experiments for run in experiment.runs):
        try:
            preflight(run)
            runs.append(run)
        except RunError as error:
            skipped.append(error.message)
            print(f"trysquare: skipped: {shown(error.message)}", file=sys.stderr)
    from trysquare.suite_where import dependency_lines

    task = scenario.task
    needs = dependency_lines(task.test_command, task.prepare, [run.repo for run in runs])
    for line in needs:
        say(shown(line))
    suite = suite + needs
    lines = suite + [
        line
        for validation in scenario.validations
        for line in validation.check_runs(scenario, runs)
    ]
    for line in lines[len(suite) :]:
        say(shown(line))
    problems = _matrix_problems(scenario, experiments)
    for problem in problems:
        print(f"trysquare: {shown(problem)}", file=sys.stderr)
    unreadable = (
        sum(len(e.errors) for e in experiments) + sum(len(e.runs) for e in experiments) - len(runs)
    )
    say(f"{len(runs)} run(s) readable" + (f", {unreadable} not" if unreadable else ""))
    code = 1 if unreadable or problems else 0
    if machine:
        return _check_json(
            scenario,
            code,
            protection,
            lines=lines,
            problems=problems,
            skipped=skipped,
            readable=len(runs),
            unreadable=unreadable,
        )
    return code


def _check_json(scenario: Any, code: int, protection: str, **found: Any) -> int:
    from trysquare import ci

    write_document(
        ci.dump(ci.check_document(scenario, exit_code=code, protection=protection, **found))
    )
    return code


def _matrix_problems(scenario: Any, experiments: Sequence[Experiment]) -> list[str]:
    """Typos that would change the table (a reference no run has, a cell one edit from another...)."""
    from trysquare._matrix import matrix_problems
    from trysquare.report.tables import declared_cells

    problems = []
    for experiment in experiments:
        declared = declared_cells(scenario.axes, scenario.variants)
        problems += matrix_problems(scenario, experiment.runs, declared)
    return problems


def _say_isolation(scenario: Any, *, required: bool) -> None:
    """Before validate runs anything: refuse when the jail is required and cannot start;
    say loudly (stderr) when the agent's code will run outside it."""
    import attrs

    from trysquare.jail import availability, isolation_line

    policy = scenario.task.jail
    if required:
        policy = attrs.evolve(policy, required=True)
    runs_agent_code = scenario.task.test_command is not None or any(
        v.runs_the_agents_code for v in scenario.validations
    )
    if not runs_agent_code and not policy.must_jail:
        return  # nothing of the agent's runs: no need to probe for the jail
    found = availability()
    if found.available:
        return
    if policy.must_jail:
        where = "--require-isolation" if required else '[task] isolation = "required"'
        raise UsageError(
            f"{scenario.path.name}: {where} and the jail cannot start here ({found.reason}); "
            "nothing was run"
        )
    print(f"trysquare: warning: {isolation_line(policy)}", file=sys.stderr)


def _demo(args: argparse.Namespace) -> int:
    from trysquare.demo import run_demo

    return run_demo(Path(args.dir), progress=not args.no_progress, node=args.node)
