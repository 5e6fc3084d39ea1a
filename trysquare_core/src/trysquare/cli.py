"""The ``trysquare`` command line (also ``python -m trysquare``).

Exit codes: 0 all well; 1 the work ran and something fell short; 2 nothing ran
(usage, a scenario or config that does not load, no run found); 130/143
interrupted. A refusal is one sentence on stderr; ``--debug`` shows a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trysquare import __version__
from trysquare._shown import shown
from trysquare.helptext import PATH_NOTE
from trysquare.errors import NoRunsError, TrysquareError, UsageError
from trysquare.plugin_api import add_selection_options

if TYPE_CHECKING:
    from trysquare.runs import Experiment

__all__ = ["load_experiments", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own exit code is 2 too; keep one format
        raise _ArgumentsError(f"{self.prog}: {message}", usage=self.format_usage())

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        # The innermost command parser finishes first: it is the one the words were for.
        if getattr(parsed, _CHOSEN, None) is None:
            setattr(parsed, _CHOSEN, self)
        return parsed, extras

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        # argparse leaves unknown words to the top parser, whose usage says nothing of the
        # command they were given to: the command that was chosen refuses them itself.
        parsed, extras = self.parse_known_args(args, namespace)
        chosen = getattr(parsed, _CHOSEN, None) or self
        delattr(parsed, _CHOSEN)
        if extras:
            chosen.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


_CHOSEN = "_trysquare_chosen_parser"


class _ArgumentsError(UsageError):
    """A command line argparse refused: shown as its usage line, then the sentence, once each."""

    def __init__(self, message: str, *, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


def build_parser(*, with_plugins: bool = True) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="trysquare",
        description="Turn finished coding-agent runs into named metrics. Paths on every command "
        "line are relative to the current directory; `trysquare COMMAND --help` describes one.",
        epilog="example:\n  trysquare demo\n"
        "  trysquare validate scenario.toml runs/ && trysquare report scenario.toml runs/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"trysquare {__version__}")
    parser.add_argument("--debug", action="store_true", help="show a traceback on failure")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    demo = commands.add_parser("demo", help="build the shipped example matrix, validate it, print its report")
    demo.add_argument("dir", nargs="?", default="trysquare-demo", help="where to build it (default: ./trysquare-demo)")
    demo.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    demo.add_argument(
        "--node", action="store_true",
        help="the Node example instead (examples/node: node --test, a validator in JavaScript)",
    )
    demo.set_defaults(handler=_demo)

    validate = commands.add_parser("validate", help="run validators over runs and record their metrics")
    validate.add_argument("scenario", type=Path)
    validate.add_argument("--config", type=Path, metavar="FILE", help="trysquare.toml (default: the nearest above the scenario)")
    validate.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    validate.add_argument("--only", action="append", default=[], metavar="NAME", help="only this validator (repeatable)")
    validate.add_argument("--jobs", type=_positive_int, default=os.cpu_count() or 1, metavar="N")
    validate.add_argument(
        "--replay", action="store_true",
        help="reuse the archived contexts (the run's facts: touched, files, base, response, diff) "
        "instead of rebuilding them from the clones; the scenario is read as it is now (declared "
        "metrics, test_command, prepare, artefacts)",
    )  # fmt: skip
    validate.add_argument("--force", action="store_true", help="re-run validators whose results are up to date")
    validate.add_argument(
        "--rerun-suite", action="store_true",
        help="run.tests() runs the suite again instead of reusing the outcome recorded for the "
        "same clone (re-runs every validator but judges)",
    )
    validate.add_argument("--rejudge", action="store_true", help="ask judges again even for up-to-date verdicts")
    validate.add_argument(
        "--require-isolation", action="store_true",
        help="refuse to run the agent's code (the suite, prepare, hidden tests) outside the jail, "
        'as [task] isolation = "required" does (exit 2 where the jail cannot start)',
    )
    validate.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    validate.add_argument("--executor", default="local", metavar="NAME")
    validate.add_argument("--executor-option", action="append", default=[], metavar="KEY=VALUE")
    add_selection_options(validate)
    validate.add_argument(
        "-x", "--exitfirst", action="store_true",
        help="stop at the first invalid result: finished results are kept, no other task starts, "
        "running validators are ended and record nothing",
    )  # fmt: skip
    validate.add_argument(
        "-q", "--quiet", action="store_true",
        help="print only the closing line, invalid results and errors",
    )  # fmt: skip
    validate.add_argument(
        "--fail-on", action="append", choices=("unjudged", "pending"), default=[], metavar="WHAT",
        help="exit 1 also when a selected validator left a metric unjudged (unjudged) or without "
        "a value yet (pending); repeatable. Without it: exit 1 on an invalid result, a run "
        "folder that cannot be read, or a cell none of whose runs judged a [verdict] criterion",
    )  # fmt: skip
    validate.add_argument(
        "--format", choices=("text", "json", "github"), default="text",
        help="json: one summary object on stdout (schema_version, counts, every run x validator); "
        "no per-task lines; errors stay on stderr. github: the text output, then an ::error line "
        "per invalid result and a ::warning per unjudged one (GitHub Actions annotations)",
    )  # fmt: skip
    validate.add_argument(
        "--junit-xml", type=Path, metavar="FILE",
        help="also write the results as JUnit XML to FILE (relative to the current directory): "
        "a testsuite per cell, a testcase per run x validator",
    )  # fmt: skip
    validate.set_defaults(handler=_validate)

    check = commands.add_parser("check", help="refuse at load what cannot be measured; spends nothing")
    check.add_argument("scenario", type=Path)
    check.add_argument("--config", type=Path, metavar="FILE", help="trysquare.toml (default: the nearest above the scenario)")
    check.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    check.add_argument(
        "--format", choices=("text", "json"), default="text",
        help="json: one object on stdout (schema_version, validators, blinding, problems); errors stay on stderr",
    )  # fmt: skip
    check.set_defaults(handler=_check)

    context = commands.add_parser("context", help="print the context a validator would get for a run")
    context.add_argument("scenario", type=Path)
    context.add_argument("--config", type=Path, metavar="FILE", help="trysquare.toml (default: the nearest above the scenario)")
    context.add_argument("run_dir", type=Path)
    context.add_argument("--validator", metavar="NAME")
    context.set_defaults(handler=_context)

    session = commands.add_parser(
        "session", help="print what a session log says, as JSON: tool calls, first writes, skills"
    )
    session.add_argument(
        "session_path", type=Path, metavar="PATH",
        help="a run folder (holding run.toml) or a session log: a .jsonl file or a folder of "
        f"them ({PATH_NOTE})",
    )  # fmt: skip
    session.add_argument(
        "--format", dest="session_format", metavar="NAME",
        help="the session log's format, e.g. pi (default: run.toml's, else told from the content)",
    )  # fmt: skip
    session.add_argument(
        "--repo", type=Path, metavar="DIR",
        help="the measured clone, which the paths in the reading are given within "
        "(default: the run's clone)",
    )  # fmt: skip
    session.set_defaults(handler=_session)

    report = commands.add_parser("report", help="write synthesis.md and print the report")
    report.add_argument("scenario", type=Path)
    report.add_argument("path", type=Path)
    report.add_argument(
        "--format", default="md", metavar="NAME",
        help="a registered report format: md (default), json, csv, html with trysquare-view",
    )
    report.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the report to FILE")
    report.add_argument(
        "--runs", action="store_true",
        help="print only the runs with an invalid result or an unjudged or pending metric, and why",
    )
    add_selection_options(report, files_note=True)
    report.set_defaults(handler=_report)

    trust = commands.add_parser(
        "trust", help="sign here the results you vouch trysquare wrote (from another machine)"
    )
    trust.add_argument("scenario", type=Path)
    trust.add_argument("path", type=Path)
    add_selection_options(trust)
    trust.set_defaults(handler=_trust)
    plan = commands.add_parser("plan", help="how many more runs each cell needs to settle its gaps")
    plan.add_argument("scenario", type=Path)
    plan.add_argument("path", type=Path)
    plan.add_argument(
        "--format", default="table", choices=("table", "json", "toml"),
        help="table (default), json, or toml: [more] cell = runs, for a harness to read",
    )
    plan.add_argument(
        "--budget", type=_positive_int, metavar="N",
        help="spread N more runs over the cells where they buy the most certainty",
    )
    plan.set_defaults(handler=_plan)

    record = commands.add_parser(
        "record",
        help="write a run.toml from flags",
        description="Write RUN_DIR/run.toml. Paths on this command line (--repo, --prompt, "
        "--session, --trace, --etalon-checkout) are relative to the current directory, as in "
        "every command, and stored relative to the run folder; --given and --exclude name "
        "paths inside the clone.",
    )
    record.add_argument("run_dir", type=Path, help="the run folder (run.toml is written there)")
    record.add_argument("--cell", required=True)
    record.add_argument("--repetition", type=int, required=True)
    record.add_argument("--repo", help="the measured clone (default: RUN_DIR/repo)")
    record.add_argument(
        "--base",
        help="commit the agent started from (default: the etalon's commit, or the commit "
        "adding the --given files on top of it, when HEAD is that commit; otherwise required)",
    )
    record.add_argument(
        "--exclude", action="append", default=[], metavar="PATTERN",
        help="gitignore-style pattern of a file the harness injected into the clone, not the "
        "agent's work (repeatable), e.g. AGENTS.md or .pi/",
    )  # fmt: skip
    record.add_argument("--prompt", required=True, help="the prompt file")
    record.add_argument("--session", help="the agent's log: a .jsonl file or a folder of them")
    record.add_argument("--session-format")
    record.add_argument("--trace")
    record.add_argument("--model", help="the model under test, e.g. provider/model")
    record.add_argument(
        "--given", action="append", default=[], metavar="PATH",
        help="a file the agent was given, as a path in the clone; it must exist at base",
    )  # fmt: skip
    record.add_argument("--etalon-tag")
    record.add_argument("--etalon-checkout")
    record.add_argument("--id")
    record.add_argument("--force", action="store_true", help="replace an existing run.toml")
    record.set_defaults(handler=_record)

    from trysquare.authoring import add_commands

    add_commands(commands)  # try, init: the validator author's inner loop

    plugins_cmd = commands.add_parser("plugins", help="list installed plugins")
    plugins_cmd.add_argument("--json", action="store_true")
    plugins_cmd.set_defaults(handler=_plugins)

    install = commands.add_parser(
        "install", help="install plugins into trysquare's own environment"
    )
    install.add_argument(
        "requirements", nargs="+", metavar="REQUIREMENT",
        help="a plugin: a name (trysquare-anthropic), a wheel, a folder, a URL",
    )  # fmt: skip
    install.add_argument("-U", "--upgrade", action="store_true", help="upgrade it if installed")
    install.set_defaults(handler=_install)

    uninstall = commands.add_parser(
        "uninstall", help="remove plugins from trysquare's own environment"
    )
    uninstall.add_argument(
        "names", nargs="+", metavar="NAME", help="an installed plugin's distribution name"
    )
    uninstall.set_defaults(handler=_uninstall)

    schema = commands.add_parser(
        "schema", help="print the JSON Schema a command's --format json output follows"
    )
    schema.add_argument(
        "name", choices=("validate", "check", "report", "plugins"), metavar="COMMAND",
        help="validate, check, report or plugins",
    )  # fmt: skip
    schema.set_defaults(handler=_schema)

    from trysquare import helptext, plugins

    helptext.apply(commands)

    if with_plugins:
        plugins.add_commands(commands, parser_class=_Parser)  # each plugin guarded on its own
    return parser




def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


# After SIGINT or SIGTERM a command stops what it does and says so; should it still be
# waiting this many seconds later (a blocking open, a plugin's hook), it is ended.
SIGNAL_GRACE = 5.0


class _Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised where the main thread is (exit ``128 + signum``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_deadline_armed: list[int] = []


def arm_signal_deadline(signum: int) -> None:
    """End this process ``SIGNAL_GRACE`` seconds after signal ``signum`` unless it ended by then.

    Python runs a signal handler only between bytecodes of the main thread: a thread
    waiting in a system call (an open on a FIFO, a plugin's socket) retries it after the
    handler, and a worker thread is never interrupted. Writes are atomic renames, so
    ending here leaves what a ``kill -9`` leaves: nothing torn, temporary files the next
    start sweeps.
    """
    if _deadline_armed:
        return
    _deadline_armed.append(signum)

    def end() -> None:
        name = signal.Signals(signum).name
        os.write(2, (
            f"trysquare: interrupted: still busy {SIGNAL_GRACE:g} s after {name}; ended without "
            "finishing (nothing half-written is kept)\n"
        ).encode())
        os._exit(128 + signum)

    import threading

    timer = threading.Timer(SIGNAL_GRACE, end)
    timer.daemon = True
    timer.start()


def _interrupt(signum: int, _frame: Any) -> None:
    arm_signal_deadline(signum)
    process = sys.modules.get("trysquare._process")
    if process is not None:
        process.kill_all()  # children this command started end with it
    raise _Interrupted(signum)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if _asks_version(argv):
        print(f"trysquare {__version__}")  # before any plugin loads: a broken one cannot stop it
        return 0
    import threading

    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _main(argv)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# Help waits this long for the plugins (their commands are in it), then goes without them.
HELP_PLUGIN_WAIT = 5.0


def _main(argv: list[str]) -> int:
    debug = "--debug" in argv
    try:
        parser = build_parser(with_plugins=_plugins_within_help_wait(argv))
        args = parser.parse_args(argv)
        if getattr(args, "handler", None) is None:
            parser.print_help()
            return 2
        return int(args.handler(args))
    except TrysquareError as error:
        if debug:
            raise
        # Messages name paths, cells and values from run folders: never raw on a terminal.
        if isinstance(error, _ArgumentsError):
            # The message already starts with the command ("trysquare validate: ...").
            sys.stderr.write(error.usage)
            print(shown(error.message, newlines=True), file=sys.stderr)
            return error.exit_code
        print(f"trysquare: {shown(error.message, newlines=True)}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt as interrupted:
        print("trysquare: interrupted", file=sys.stderr)
        return 128 + interrupted.signum if isinstance(interrupted, _Interrupted) else 130
    except BrokenPipeError:
        return 1
    except Exception as error:
        if debug:
            raise
        print(
            f"trysquare: internal error: {type(error).__name__}: {shown(error)} "
            "(this is a bug in trysquare or a plugin; --debug shows the traceback)",
            file=sys.stderr,
        )
        return 1


def _plugins_within_help_wait(argv: Sequence[str]) -> bool:
    """Whether help may list the plugins' commands: they loaded within ``HELP_PLUGIN_WAIT``.

    Only when help is asked for: a slow plugin (one that waits at import) is named and
    left out, and the built-in help printed at once. Any other command waits for them.
    """
    words = argv[: argv.index("--")] if "--" in argv else argv
    if not ({"-h", "--help"} & set(words)) and words:
        return True
    from trysquare import plugins

    slow = plugins.load_within(HELP_PLUGIN_WAIT)
    if slow is None:
        return True
    print(
        shown(f"trysquare: warning: plugin '{slow}' is still loading after {HELP_PLUGIN_WAIT:g} s; "
              "this help leaves out the commands of every plugin"),
        file=sys.stderr,
    )
    return False


def _asks_version(argv: Sequence[str]) -> bool:
    """Whether ``--version`` comes before any command (where argparse would honour it)."""
    for word in argv:
        if word == "--version":
            return True
        if not word.startswith("-") or word == "--":
            return False
    return False


def _load(path: Path, config: Path | None = None) -> Any:
    from trysquare.scenario import load_scenario

    return load_scenario(path, config=config)


def load_experiments(paths: Sequence[Path], *, replay: bool = False) -> list[Experiment]:
    """The experiments below ``paths`` (see :func:`trysquare.plugin_api.load_experiments`)."""
    from trysquare.plugin_api import load_experiments as load

    return load(paths, replay=replay)


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
        jobs=args.jobs,
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
    )
    _say_isolation(scenario, required=args.require_isolation)

    def outputs(summary: Any) -> int:
        if args.force and not args.rejudge:
            _say_verdicts_kept(scenario, args.only, sys.stderr if args.format == "json" else sys.stdout)
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


_document: list[Any] = []  # the stream the command's one document goes to (document_only)


@contextmanager
def document_only() -> Iterator[None]:
    """Keep standard output for the command's one document (``--format json``, a report).

    Meanwhile ``sys.stdout`` is standard error: whatever else is printed, in any thread (a
    mode's ``print`` while a run is validated, a report format's), cannot corrupt it. The
    document is written with :func:`write_document`.
    """
    _document.append(sys.stdout)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = _document.pop()


def write_document(text: str) -> None:
    """Write the command's document to standard output (the real one, under :func:`document_only`)."""
    (_document[-1] if _document else sys.stdout).write(text)


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
            print(shown(f"trysquare: --junit-xml {args.junit_xml}: not written: {problem}"), file=sys.stderr)
            exit_code = max(exit_code, 1)
    if args.format == "json":
        write_document(ci.dump(ci.validate_document(summary, found, scenario=scenario, exit_code=exit_code)))
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
            scenario, experiments, options, out=out or sys.stdout, should_stop=lambda: bool(received)
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
    say(f"{scenario.path.name}: loads ({len(scenario.validations)} validator(s), {metrics} metric(s))")
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
        line for validation in scenario.validations
        for line in validation.check_runs(scenario, runs)
    ]
    for line in lines[len(suite):]:
        say(shown(line))
    problems = _matrix_problems(scenario, experiments)
    for problem in problems:
        print(f"trysquare: {shown(problem)}", file=sys.stderr)
    unreadable = sum(len(e.errors) for e in experiments) + sum(len(e.runs) for e in experiments) - len(runs)
    say(f"{len(runs)} run(s) readable" + (f", {unreadable} not" if unreadable else ""))
    code = 1 if unreadable or problems else 0
    if machine:
        return _check_json(
            scenario, code, protection, lines=lines, problems=problems, skipped=skipped,
            readable=len(runs), unreadable=unreadable,
        )
    return code


def _check_json(scenario: Any, code: int, protection: str, **found: Any) -> int:
    from trysquare import ci

    write_document(ci.dump(ci.check_document(scenario, exit_code=code, protection=protection, **found)))
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


def _refuse_duplicates(experiments: Sequence[Experiment]) -> None:
    from trysquare._matrix import refuse_duplicates

    for experiment in experiments:
        refuse_duplicates(experiment.runs)


def _context(args: argparse.Namespace) -> int:
    from trysquare import context as contexts
    from trysquare.runs import RUN_FILE, load_run

    scenario = _load(args.scenario, args.config)
    if not scenario.validations:
        raise UsageError(f"{scenario.path.name} declares no [[validation]]")
    validation = scenario.validation(args.validator) if args.validator else scenario.validations[0]
    if not (args.run_dir / RUN_FILE).is_file():
        raise NoRunsError(f"{args.run_dir}: no {RUN_FILE} here (a run is a folder holding {RUN_FILE})")
    run = load_run(args.run_dir / RUN_FILE)
    facts = contexts.gather_facts(run)
    sys.stdout.write(contexts.dump_context(contexts.build_context(scenario, run, validation, facts)))
    return 0


def _session(args: argparse.Namespace) -> int:
    from trysquare import _atomic, repo, sessions
    from trysquare.errors import RepoError, RunError
    from trysquare.runs import RUN_FILE, load_run

    path: Path = args.session_path
    clone: Path | None = args.repo
    session_format: str | None = args.session_format
    touched: list[str] = []
    if (path / RUN_FILE).is_file():
        run = load_run(path / RUN_FILE)
        if run.session is None:
            raise RunError(f"{path / RUN_FILE}: the run names no session log")
        if run.base_commit is not None:
            try:
                touched = sorted(repo.changed_files(run.repo, run.base_commit, run.excluded))
            except RepoError as error:
                raise RunError(f"{path / RUN_FILE}: {error.message}") from None
        path, clone = run.session, clone or run.repo
        session_format = session_format or run.session_format
    elif not path.exists():
        raise UsageError(f"{path}: no such file or folder (give a run folder or a session log)")
    from trysquare.sessions.facts import session_facts

    reading = sessions.open_session(path, format=session_format, repo=clone)
    sys.stdout.write(_atomic.dump_json(session_facts(reading, touched)))
    return 0


def _report(args: argparse.Namespace) -> int:
    from trysquare.report import run_report

    scenario = _load(args.scenario)
    from trysquare.selection import Selection

    experiments = load_experiments([args.path])
    _refuse_duplicates(experiments)
    selection = Selection.from_args(args.cell, args.run)
    selected = selection.apply(experiments)[0] if selection.active else None
    if args.output is not None:
        return run_report(scenario, experiments[0], args.format, runs_only=args.runs,
                          output=args.output, selected=selected)
    with document_only():  # stdout holds the report, whatever a plugin's format prints
        return run_report(scenario, experiments[0], args.format, runs_only=args.runs,
                          selected=selected, out=write_document)


def _trust(args: argparse.Namespace) -> int:
    from trysquare import results
    from trysquare.lock import experiment_lock
    from trysquare.selection import Selection

    scenario = _load(args.scenario)
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

    scenario = _load(args.scenario)
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
        Layout.from_scenario(scenario), rows, appearance=[run.cell for run in experiment.runs],
        skipped=[str(error) for error in experiment.errors],
    )
    sys.stdout.write(render_plan(build_plan(report, budget=args.budget), args.format))
    return 0


def _record(args: argparse.Namespace) -> int:
    from trysquare import _atomic, repo
    from trysquare.context import preflight
    from trysquare.runs import RUN_FILE, load_run, run_toml

    target = args.run_dir / RUN_FILE
    if target.exists() and not args.force:
        raise UsageError(f"{target} exists already (use --force to replace it)")
    if args.etalon_checkout and not args.etalon_tag:
        raise UsageError("--etalon-checkout needs --etalon-tag")
    folder = args.run_dir.absolute()
    stored = {
        flag: None if value is None else _relative_to_run(folder, value)
        for flag, value in (
            ("repo", args.repo), ("prompt", args.prompt), ("session", args.session),
            ("trace", args.trace), ("etalon_checkout", args.etalon_checkout),
        )
    }  # fmt: skip
    repo_text = stored["repo"] or "repo"
    clone = folder / repo_text
    # Pinned: `HEAD` now is the commit meant; HEAD later may be another.
    base = _record_base(clone, repo_text, args.base, args.etalon_tag, args.given)
    missing = repo.missing_at(clone, base, args.given) if args.given else []
    if missing:
        raise UsageError(f"--given {missing[0]}: not a file at base {base} in {clone}")
    etalon = None
    if args.etalon_tag:
        etalon = {"tag": args.etalon_tag}
        if stored["etalon_checkout"]:
            etalon["checkout"] = stored["etalon_checkout"]
    text = run_toml({
        "id": args.id,
        "cell": args.cell,
        "repetition": args.repetition,
        "repo": repo_text,
        "base": base,
        "prompt": stored["prompt"],
        "session": stored["session"],
        "session_format": args.session_format,
        "trace": stored["trace"],
        "model": args.model,
        "given": sorted(set(args.given)),
        "excluded": list(dict.fromkeys(args.exclude)) or None,
        "etalon": etalon,
    })
    previous = target.read_bytes() if target.exists() else None
    _atomic.write_text(target, text)
    try:
        run = load_run(target)
        preflight(run)
    except TrysquareError as error:
        # Never leave a run.toml behind that trysquare itself cannot use.
        if previous is None:
            target.unlink()
        else:
            _atomic.write_bytes(target, previous)
        raise UsageError(error.message) from None
    print(shown(f"wrote {target} (run '{run.id}', cell '{run.cell}', base {base[:12]})"))
    return 0


def _relative_to_run(folder: Path, value: str) -> str:
    """A path typed relative to the current directory, as run.toml stores it: relative
    to the run folder (POSIX separators), so the run folder can move as a whole."""
    path = Path(value).expanduser()
    return Path(os.path.relpath(path.absolute(), folder)).as_posix()


def _record_base(clone: Path, repo_text: str, base: str | None, tag: str | None, given: list[str]) -> str:
    """The commit ``record`` pins: ``--base`` as named, else HEAD only when HEAD is the
    etalon's commit or the one commit adding the given files on top of it."""
    from trysquare import repo
    from trysquare.errors import RepoError

    try:
        if base is not None:
            return repo.resolve_commit(clone, base)
        try:
            head = repo.resolve_commit(clone, "HEAD", what="HEAD")
        except RepoError:
            if (clone / ".git").exists():
                raise UsageError(
                    f"--repo {repo_text}: the clone has no commit: commit the base (the tree the "
                    "agent started from) first, or name it with --base"
                ) from None
            raise
        if tag is None:
            raise UsageError(
                f"--base is needed: without --etalon-tag, record cannot tell whether HEAD "
                f"({head[:12]}) of {repo_text} is where the agent started or the agent's own commit"
            )
        try:
            etalon = repo.resolve_commit(clone, tag, what="etalon tag")
        except RepoError:
            raise UsageError(
                f"--etalon-tag {tag}: no tag '{tag}' naming a commit in the clone {repo_text} "
                "(`git tag` in the clone lists its tags)"
            ) from None
    except RepoError as error:
        raise UsageError(f"--repo {repo_text} / --base {base or 'HEAD'}: {error.message}") from None
    if head == etalon:
        return head
    if given and repo.parent_of(clone, head) == etalon and repo.paths_between(clone, etalon, head) <= set(given):
        return head  # the harness's commit of the given files, on top of the etalon
    ahead = repo.commits_between(clone, etalon, head)
    raise UsageError(
        f"HEAD of {repo_text} is {ahead} commit{'s' if ahead != 1 else ''} past the etalon "
        f"'{tag}' ({etalon[:12]}) and is not the commit adding the given files: it may hold the "
        "agent's committed work, so record will not guess; name the commit the agent started "
        "from with --base"
    )


def _plugins(args: argparse.Namespace) -> int:
    import attrs

    from trysquare import plugins

    listed = plugins.infos()
    if args.json:
        # A list (its shape is pinned by the design), each entry everything the text listing
        # says (a refused name in "error", as in the text) and the schema_version a reader
        # checks (`trysquare schema plugins`).
        from trysquare.ci import SCHEMA_VERSION

        entries = [
            {
                **{key: value for key, value in attrs.asdict(info).items() if key != "refused"},
                "error": _plugin_problem(info),
                "schema_version": SCHEMA_VERSION,
            }
            for info in listed
        ]
        print(json.dumps(entries, indent=2))
        return 1 if any(_plugin_problem(info) for info in listed) else 0
    if not listed:
        print("no plugins installed")
    for info in listed:
        provided = [
            f"{label}: {', '.join(values)}"
            for label, values in (
                ("modes", info.modes), ("providers", info.providers),
                ("session formats", info.session_formats), ("executors", info.executors),
                ("report formats", info.report_formats),
            )
            if values
        ]
        status = f"FAILED: {info.error}" if info.error else "; ".join(provided) or "hooks: " + ", ".join(info.hooks)
        if info.refused and not info.error:
            status += "; REFUSED: " + "; ".join(info.refused)
        print(shown(f"{info.name} {info.version or ''}".rstrip() + f"  {status}"))
    _print_protection()
    # A plugin that failed, or was refused a name, is work fallen short.
    return 1 if any(_plugin_problem(info) for info in listed) else 0


def _plugin_problem(info: Any) -> str | None:
    """What went wrong with a plugin: its failure, or the names it was refused."""
    if info.error:
        return str(info.error)
    return "; ".join(info.refused) or None


def _install(args: argparse.Namespace) -> int:
    from trysquare import installer

    from trysquare._install import checkout_root

    root = checkout_root()
    if root is not None:
        print(
            f"trysquare: warning: trysquare runs from the checkout {root}: the next `uv sync` "
            "undoes this install (a workspace member is installed by uv sync --all-packages)",
            file=sys.stderr,
        )
    names = installer.install(args.requirements, upgrade=args.upgrade)
    print(f"installed into {sys.executable}: {', '.join(names)} (trysquare plugins lists it)")
    return 0


def _uninstall(args: argparse.Namespace) -> int:
    from trysquare import installer

    names = installer.uninstall(args.names)
    print(f"removed from {sys.executable}: {', '.join(names)}")
    return 0


def _schema(args: argparse.Namespace) -> int:
    from trysquare import ci

    sys.stdout.write(ci.schema_text(args.name))
    return 0


def _print_protection() -> None:
    """Which protection of the measured clone is in force on this machine (Landlock or
    detection), and where the agent's code runs (the jail or the fallback)."""
    from trysquare.jail import isolation_line
    from trysquare.sandbox import protection_line

    print(protection_line())
    print(isolation_line())


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
