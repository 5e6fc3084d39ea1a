"""``trysquare report``, ``trust``, ``plan`` and ``schema``: reading what validate recorded."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from trysquare._shown import shown
from trysquare.cli.common import (
    _load,
    _refuse_duplicates,
    document_only,
    load_experiments,
    write_document,
)
from trysquare.errors import UsageError

if TYPE_CHECKING:
    import argparse


def _report(args: argparse.Namespace) -> int:
    from trysquare.report import run_report

    scenario = _load(args.scenario, runs_validators=False)  # no validator runs
    from trysquare.selection import Selection

    experiments = load_experiments([args.path])
    _refuse_duplicates(experiments)
    selection = Selection.from_args(args.cell, args.run)
    selected = selection.apply(experiments)[0] if selection.active else None
    if args.output is not None:
        return run_report(
            scenario,
            experiments[0],
            args.format,
            runs_only=args.runs,
            output=args.output,
            selected=selected,
        )
    with document_only():  # stdout holds the report, whatever a plugin's format prints
        return run_report(
            scenario,
            experiments[0],
            args.format,
            runs_only=args.runs,
            selected=selected,
            out=write_document,
        )


def _trust(args: argparse.Namespace) -> int:
    from trysquare import results
    from trysquare.lock import experiment_lock
    from trysquare.selection import Selection

    scenario = _load(args.scenario, runs_validators=False)  # no validator runs
    whole = load_experiments([args.path])
    _refuse_duplicates(whole)
    experiments = Selection.from_args(args.cell, args.run).apply(whole)
    signed = 0
    for experiment in experiments:
        with experiment_lock(experiment.root, experiment.runs, command="trust"):
            for run in experiment.runs:
                for validation in scenario.validations:
                    try:
                        why = results.adopt_result(run, validation.name)
                    except (OSError, results.UnreadableResult) as error:
                        print(shown(f"trysquare: {run.label}: {error}"), file=sys.stderr)
                        continue
                    if why is not None:
                        signed += 1
                        said = f"{results.unsigned_sentence(run, validation.name, why)}: signed now"
                        print(shown(f"trysquare: {said}"))
    print(f"{signed} result{'s' if signed != 1 else ''} signed here on your word")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from trysquare import results
    from trysquare.report import Layout, build_report
    from trysquare.report.plan import build_plan, render_plan

    scenario = _load(args.scenario, runs_validators=False)  # no validator runs
    if scenario.verdict.reference is None:
        raise UsageError(
            f"{args.scenario}: plan needs [verdict] reference, the cell every gap is "
            "measured against"
        )
    experiments = load_experiments([args.path])
    _refuse_duplicates(experiments)
    experiment = experiments[0]
    current = {v.name: v.digest() for v in scenario.validations}
    # Read-only: the rows are rebuilt as `report` does, but measures.json is left as it is.
    rows = results.build_measures(scenario, experiment.runs, current, unusable=experiment.errors)
    report = build_report(
        Layout.from_scenario(scenario),
        rows,
        appearance=[run.cell for run in experiment.runs],
        skipped=[str(error) for error in experiment.errors],
    )
    sys.stdout.write(render_plan(build_plan(report, budget=args.budget), args.format))
    return 0


def _schema(args: argparse.Namespace) -> int:
    from trysquare import ci

    sys.stdout.write(ci.schema_text(args.name))
    return 0
