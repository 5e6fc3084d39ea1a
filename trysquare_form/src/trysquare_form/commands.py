"""``trysquare form export`` and ``trysquare form ingest``, added through the core's hook."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trysquare.api import UsageError, add_selection_options, shown

if TYPE_CHECKING:
    from trysquare.api import Commands

__all__ = ["register"]


def register(cli: Commands) -> None:
    """Add ``form`` and its two subcommands to the ``trysquare`` parser."""
    form = cli.add_parser(
        "form",
        help="metrics a human fills: a blind, shuffled TOML form",
        description="The form mode's two halves: export a blind, shuffled form of the runs, "
        "then ingest it once a person has filled it. Paths are relative to the current directory.",
        epilog="example:\n  trysquare form export scenario.toml runs/ -o form.toml\n"
        "  trysquare form ingest scenario.toml runs/ form.toml --by alice",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    form.set_defaults(handler=lambda _args: _usage(form))
    commands = form.add_subparsers(dest="form_command", metavar="COMMAND", parser_class=type(form))

    export = commands.add_parser(
        "export",
        help="write a blind, shuffled form for the runs under PATH",
        description="Write FORM.toml: one table per run, shuffled, under an opaque id, with a "
        "copy of each piece the scenario names and a commented hint per metric. The id-to-run "
        "key stays in PATH/.trysquare/forms/, never in the form.",
        epilog="example:\n  trysquare form export scenario.toml runs/ -o form.toml --cell 'rule / *'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument(
        "scenario", type=Path, help="the scenario file (relative to the current directory)"
    )
    export.add_argument(
        "path", type=Path, metavar="PATH",
        help="the experiment folder: every run.toml below it is a run (relative to the current directory)",
    )  # fmt: skip
    export.add_argument(
        "-o", "--output", type=Path, required=True, metavar="FORM.toml",
        help="where to write the form (relative to the current directory); its pieces go beside it",
    )  # fmt: skip
    export.add_argument(
        "--seed", type=_seed, metavar="N", help="shuffle with this seed (default: a random one)"
    )
    export.add_argument("--only", metavar="NAME", help="which form validator (default: the first)")
    export.add_argument(
        "--all", action="store_true", help="also runs whose metrics are all filled, to correct them"
    )
    export.add_argument("--force", action="store_true", help="replace an existing form")
    add_selection_options(export)
    export.set_defaults(handler=_export)

    ingest = commands.add_parser(
        "ingest",
        help="record the answers of a filled form",
        description="Record the metrics a filled form holds, for those nothing else produces; "
        "never overwrites a measured one. Says how many were merged, unchanged, still pending "
        "and refused, with the reasons.",
        epilog="example:\n  trysquare form ingest scenario.toml runs/ form.toml --by alice",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ingest.add_argument(
        "scenario", type=Path, help="the scenario file (relative to the current directory)"
    )
    ingest.add_argument(
        "path", type=Path, metavar="PATH",
        help="the experiment folder the form was exported from (relative to the current directory)",
    )  # fmt: skip
    ingest.add_argument(
        "form",
        type=Path,
        metavar="FORM.toml",
        help="the filled form (relative to the current directory)",
    )
    ingest.add_argument("--by", metavar="NAME", help="who filled it (default: your login name)")
    ingest.add_argument(
        "--accept-stale", action="store_true",
        help="take answers about pieces that changed since the export, or older than an answer "
        "recorded since (refused otherwise); each is recorded as taken so",
    )  # fmt: skip
    ingest.set_defaults(handler=_ingest)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def _load(scenario_path: Path, path: Path) -> tuple[Any, Any]:
    from trysquare.api import load_experiments, load_scenario

    scenario = load_scenario(scenario_path)
    (experiment,) = load_experiments([path])
    return scenario, experiment


def _export(args: argparse.Namespace) -> int:
    from trysquare.api import Selection

    from trysquare_form.export import export_form

    scenario, experiment = _load(args.scenario, args.path)
    (experiment,) = Selection.from_args(args.cell, args.run).apply([experiment])
    result = export_form(
        scenario,
        experiment,
        args.output,
        seed=args.seed,
        validation=args.only,
        include_filled=args.all,
        force=args.force,
    )
    for error in result.skipped:
        print(shown(f"trysquare: skipped: {error.message}"), file=sys.stderr)
    print(shown(result.blinding))
    count = len(result.runs)
    print(
        shown(
            f"wrote {args.output}: {count} run{'s' if count != 1 else ''} to fill for '{result.validation}' "
            f"(seed {result.seed}); pieces in {result.pieces.name}/, key in {result.key}"
        )
    )
    return 1 if result.skipped or experiment.errors else 0


def _ingest(args: argparse.Namespace) -> int:
    from trysquare_form.ingest import default_by, ingest_form

    by = args.by if args.by is not None else default_by()
    if by is None:
        raise UsageError("cannot tell who filled the form; pass --by NAME")
    scenario, experiment = _load(args.scenario, args.path)
    report = ingest_form(scenario, experiment, args.form, by=by, accept_stale=args.accept_stale)
    # Every text from the form (ids, names, values) is shown escaped, one line each.
    print(shown(f"{report.form.name}: {report.summary}"))
    for refusal in report.refused:
        print(shown(f"refused: {refusal}"))
    print(shown(_states_line(report.states, report.measures.name)))
    return 1 if report.refused or experiment.errors else 0


def _states_line(states: dict[str, int] | Any, measures: str) -> str:
    runs = sum(states.values())
    parts: Sequence[str] = [
        f"{states[s]} {s}" for s in ("valid", "invalid", "pending") if states.get(s)
    ]
    return f"{measures}: {runs} run{'s' if runs != 1 else ''}: {', '.join(parts) or 'none'}"
