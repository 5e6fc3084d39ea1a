"""Every built-in command's arguments, declared once: for argparse (:mod:`trysquare.cli.parser`)
and for the plain reader (:mod:`trysquare.cli._plain_argv`), which reads a plain command line
without importing argparse.

Imports nothing of argparse: a declaration only calls ``add_parser``, ``add_argument`` and
``set_defaults`` on what it is handed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from trysquare.commands import add_selection_options
from trysquare.errors import UsageError

__all__ = ["BUILTIN_COMMANDS", "PATH_NOTE", "declare_commands"]

# Every command reads the paths on its command line the same way.
PATH_NOTE = "relative to the current directory"

# Every built-in command, in the order help lists them.
BUILTIN_COMMANDS = (
    "demo", "validate", "check", "context", "session", "report", "trust", "plan", "record",
    "try", "init", "plugins", "install", "uninstall", "schema",
)  # fmt: skip


class _ArgumentsError(UsageError):
    """A command line argparse refused: shown as its usage line, then the sentence, once each."""

    def __init__(self, message: str, *, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


def declare_commands(commands: Any, wanted: Callable[[str], bool]) -> None:
    """Add each built-in command ``wanted`` says to ``commands`` (argparse's subparsers, or the
    plain reader's recorder), its arguments and its handler. Each command's handler is imported
    in its own block: a command declared alone loads its own module of trysquare.cli, not the
    others'."""
    if wanted("demo"):
        demo = commands.add_parser(
            "demo", help="build the shipped example matrix, validate it, print its report"
        )
        demo.add_argument(
            "dir",
            nargs="?",
            default="trysquare-demo",
            help="where to build it (default: ./trysquare-demo)",
        )
        demo.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
        demo.add_argument(
            "--node",
            action="store_true",
            help="the Node example instead (examples/node: node --test, a validator in JavaScript)",
        )
        from trysquare.cli.validate import _demo

        demo.set_defaults(handler=_demo)

    if wanted("validate"):
        validate = commands.add_parser(
            "validate", help="run validators over runs and record their metrics"
        )
        validate.add_argument("scenario", type=Path)
        validate.add_argument(
            "--config",
            type=Path,
            metavar="FILE",
            help="trysquare.toml (default: the nearest above the scenario)",
        )
        validate.add_argument("paths", nargs="+", type=Path, metavar="PATH")
        validate.add_argument(
            "--only",
            action="append",
            default=[],
            metavar="NAME",
            help="only this validator (repeatable)",
        )
        validate.add_argument(
            "--jobs", type=_positive_int, default=None, metavar="N",
            help="validators at once (default: the cores this process may use: its CPU "
            "affinity, fewer where its cgroup's CPU quota allows less, as in a container)",
        )  # fmt: skip
        validate.add_argument(
            "--replay", action="store_true",
            help="reuse the archived contexts (the run's facts: touched, files, base, response, diff) "
            "instead of rebuilding them from the clones; the scenario is read as it is now (declared "
            "metrics, test_command, prepare, artefacts)",
        )  # fmt: skip
        validate.add_argument(
            "--force", action="store_true", help="re-run validators whose results are up to date"
        )
        validate.add_argument(
            "--rerun-suite",
            action="store_true",
            help="run.tests() runs the suite again instead of reusing the outcome recorded for the "
            "same clone (re-runs every validator but judges)",
        )
        validate.add_argument(
            "--rejudge", action="store_true", help="ask judges again even for up-to-date verdicts"
        )
        validate.add_argument(
            "--require-isolation",
            action="store_true",
            help="refuse to run the agent's code (the suite, prepare, hidden tests) outside the jail, "
            'as [task] isolation = "required" does (exit 2 where the jail cannot start)',
        )
        validate.add_argument(
            "--no-progress", action="store_true", help="never draw a progress bar"
        )
        validate.add_argument(
            "--no-wait",
            action="store_true",
            help="send batch judges' requests and return (exit 0, results pending); a later "
            "validate collects them",
        )
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
        from trysquare.cli.validate import _validate

        validate.set_defaults(handler=_validate, resumes_collector_at_load=True)

    if wanted("check"):
        check = commands.add_parser(
            "check", help="refuse at load what cannot be measured; spends nothing"
        )
        check.add_argument("scenario", type=Path)
        check.add_argument(
            "--config",
            type=Path,
            metavar="FILE",
            help="trysquare.toml (default: the nearest above the scenario)",
        )
        check.add_argument("paths", nargs="*", type=Path, metavar="PATH")
        check.add_argument(
            "--format", choices=("text", "json"), default="text",
            help="json: one object on stdout (schema_version, validators, blinding, problems); errors stay on stderr",
        )  # fmt: skip
        from trysquare.cli.validate import _check

        check.set_defaults(handler=_check, resumes_collector_at_load=True)

    if wanted("context"):
        context = commands.add_parser(
            "context", help="print the context a validator would get for a run"
        )
        context.add_argument("scenario", type=Path)
        context.add_argument(
            "--config",
            type=Path,
            metavar="FILE",
            help="trysquare.toml (default: the nearest above the scenario)",
        )
        context.add_argument("run_dir", type=Path)
        context.add_argument("--validator", metavar="NAME")
        from trysquare.cli.runs import _context

        context.set_defaults(handler=_context)

    if wanted("session"):
        session = commands.add_parser(
            "session",
            help="print what a session log says, as JSON: tool calls, first writes, skills",
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
        from trysquare.cli.runs import _session

        session.set_defaults(handler=_session)

    if wanted("report"):
        report = commands.add_parser("report", help="write synthesis.md and print the report")
        report.add_argument("scenario", type=Path)
        report.add_argument("path", type=Path)
        report.add_argument(
            "--format",
            default="md",
            metavar="NAME",
            help="a registered report format: md (default), json, csv, html with trysquare-view",
        )
        report.add_argument(
            "-o", "--output", type=Path, metavar="FILE", help="write the report to FILE"
        )
        report.add_argument(
            "--runs",
            action="store_true",
            help="print only the runs with an invalid result or an unjudged or pending metric, and why",
        )
        add_selection_options(report, files_note=True)
        from trysquare.cli.reports import _report

        report.set_defaults(handler=_report, resumes_collector_at_load=True)

    if wanted("trust"):
        trust = commands.add_parser(
            "trust", help="sign here the results you vouch trysquare wrote (from another machine)"
        )
        trust.add_argument("scenario", type=Path)
        trust.add_argument("path", type=Path)
        add_selection_options(trust)
        from trysquare.cli.reports import _trust

        trust.set_defaults(handler=_trust, resumes_collector_at_load=True)

    if wanted("plan"):
        plan = commands.add_parser(
            "plan", help="how many more runs each cell needs to settle its gaps"
        )
        plan.add_argument("scenario", type=Path)
        plan.add_argument("path", type=Path)
        plan.add_argument(
            "--format",
            default="table",
            choices=("table", "json", "toml"),
            help="table (default), json, or toml: [more] cell = runs, for a harness to read",
        )
        plan.add_argument(
            "--budget",
            type=_positive_int,
            metavar="N",
            help="spread N more runs over the cells where they buy the most certainty",
        )
        from trysquare.cli.reports import _plan

        plan.set_defaults(handler=_plan, resumes_collector_at_load=True)

    if wanted("record"):
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
        from trysquare.cli.runs import _record

        record.set_defaults(handler=_record)

    if wanted("try") or wanted("init"):
        from trysquare.authoring import add_commands

        add_commands(commands)  # try, init: the validator author's inner loop

    if wanted("plugins"):
        plugins_cmd = commands.add_parser("plugins", help="list installed plugins")
        plugins_cmd.add_argument("--json", action="store_true")
        from trysquare.cli.install import _plugins

        plugins_cmd.set_defaults(handler=_plugins)

    if wanted("install"):
        install = commands.add_parser(
            "install", help="install plugins into trysquare's own environment"
        )
        install.add_argument(
            "requirements", nargs="+", metavar="REQUIREMENT",
            help="a plugin: a name (trysquare-anthropic), a wheel, a folder, a URL",
        )  # fmt: skip
        install.add_argument("-U", "--upgrade", action="store_true", help="upgrade it if installed")
        from trysquare.cli.install import _install

        install.set_defaults(handler=_install)

    if wanted("uninstall"):
        uninstall = commands.add_parser(
            "uninstall", help="remove plugins from trysquare's own environment"
        )
        uninstall.add_argument(
            "names", nargs="+", metavar="NAME", help="an installed plugin's distribution name"
        )
        from trysquare.cli.install import _uninstall

        uninstall.set_defaults(handler=_uninstall)

    if wanted("schema"):
        schema = commands.add_parser(
            "schema", help="print the JSON Schema a command's --format json output follows"
        )
        schema.add_argument(
            "name", choices=("validate", "check", "report", "plugins"), metavar="COMMAND",
            help="validate, check, report or plugins",
        )  # fmt: skip
        from trysquare.cli.reports import _schema

        schema.set_defaults(handler=_schema)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        problem = f"'{text}' is not a whole number"
    else:
        if value >= 1:
            return value
        problem = "must be at least 1"
    import argparse  # only to refuse a number: argparse words the refusal

    raise argparse.ArgumentTypeError(problem)
