"""What ``trysquare COMMAND --help`` says: a description and an example per core command,
and a help line for each argument that had none (saying what a path is relative to).

Kept apart from how commands are wired, so that the words can change without touching it;
only ``PATH_NOTE`` comes from the declarations (:mod:`trysquare.cli.arguments`), which say it
too and are read without this module on a plain command line. Plugin commands (``form``,
``view``) carry their own.
"""

from __future__ import annotations

import argparse
from typing import Any

from trysquare.cli.arguments import PATH_NOTE

__all__ = ["PATH_NOTE", "apply"]

_COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "Build the shipped example matrix (a Python repository, two cells, runs made with real "
        "git) into DIR, validate it with the script and form modes, and print its report. "
        "Needs nothing but Python and git: no network, no model.",
        "trysquare demo\n  trysquare demo /tmp/try-it --no-progress",
    ),
    "validate": (
        "Build each run's context, run the scenario's validators on it and record the results "
        "beside the run (validation/<name>.json) and measures.json in each experiment folder. "
        "Results whose validator and context are unchanged are reused. Exit 0 when every run is "
        "valid, 1 when a result of a selected validator is invalid, a run folder could not be "
        "read, a cell has no judged value of a [verdict] criterion, or --rejudge got no new "
        "verdict (the previous one kept); with --fail-on unjudged, also when a metric is "
        "unjudged. 2 when nothing ran, 130/143 when interrupted.",
        "trysquare validate scenario.toml runs/\n"
        "  trysquare validate scenario.toml runs/ --cell 'rule / *' -x -q\n"
        "  trysquare validate scenario.toml runs/ --junit-xml junit.xml --format json"
        " > summary.json\n"
        "  trysquare validate scenario.toml runs/ -q --fail-on unjudged",
    ),
    "check": (
        "Load the scenario and refuse, before anything runs or is paid for, what cannot be "
        "measured; with PATHs, also read every run and print the judge's blinding line. "
        "Spends nothing. Exit 0 when it all loads, 1 when a run cannot be read, 2 when the "
        "scenario does not load.",
        "trysquare check scenario.toml\n  trysquare check scenario.toml runs/ --format json",
    ),
    "context": (
        "Print the context.json a validator would be handed for one run, without running it: "
        "what to feed a validator you are writing.",
        "trysquare context scenario.toml runs/a7f3 --validator script > context.json",
    ),
    "session": (
        "Print what a session log says, as one JSON object: every tool call (name, failed, "
        "files read and written), the failed calls, the first call that wrote each file the "
        "calls wrote or the run touched, the skills that arrived expanded, and the reader's "
        "notes. The same reading trysquare.assay answers from and a script validator's "
        "context points to (session_facts). Exit 2 when PATH is not there, 1 when the log "
        "cannot be read.",
        "trysquare session runs/a7f3\n  trysquare session session.jsonl --format pi --repo clone/",
    ),
    "report": (
        "Rebuild measures.json from the recorded results, write synthesis.md in PATH and print "
        "the report: per-cell scores with their unjudged and pending counts, the gap table "
        "against [verdict].reference, and why a cell is not publishable. Exit 1 when a cell is "
        "not publishable.",
        "trysquare report scenario.toml runs/\n"
        "  trysquare report scenario.toml runs/ --format json --cell 'rule / *' -o report.json",
    ),
    "trust": (
        "Sign here, with this machine's key, every result under PATH that is a well-formed "
        "trysquare result but not signed here: an experiment copied from another machine, or "
        "results recorded before trysquare signed them. Each is named; the result as it was "
        "goes to its history. This is your word that trysquare wrote them: never run it on "
        "folders a measured agent could have written since (re-validate those instead).",
        "trysquare trust scenario.toml runs/\n"
        "  trysquare trust scenario.toml runs/ --cell 'rule / *'",
    ),
    "plan": (
        "Read the recorded results as `report` does (writing nothing) and print, for each cell, "
        "how many more runs would establish its open gaps against [verdict].reference with an "
        "80% chance if the observed rates held: the largest need across the criteria, by the "
        "procedure [verdict] stopping and correction name. --format toml is for a harness "
        "([more] cell = runs); --budget N spreads N runs where they buy the most certainty.",
        "trysquare plan scenario.toml runs/\n"
        "  trysquare plan scenario.toml runs/ --format toml > more.toml\n"
        "  trysquare plan scenario.toml runs/ --budget 40 --format json",
    ),
    "record": (
        "Write RUN_DIR/run.toml from flags, for a harness that ran an agent. Paths on this "
        "command line (--repo, --prompt, --session, --trace, --etalon-checkout) are relative to "
        "the current directory, as in every command, and stored relative to the run folder; "
        "--given and --exclude name paths inside the clone.",
        "trysquare record runs/a7f3 --cell 'rule / high' --repetition 1 --prompt prompt.txt "
        "--session session.jsonl --etalon-tag etalon-v1",
    ),
    "plugins": (
        "List the installed trysquare plugins, what each provides (modes, judge providers, "
        "session formats, executors, report formats) and any that failed to load; then which "
        "protection of the measured clone this machine gives.",
        "trysquare plugins\n  trysquare plugins --json",
    ),
    "install": (
        "Install trysquare plugins into the environment trysquare itself runs in (its "
        "interpreter's pip, else uv pip), which matters when trysquare was installed as a tool "
        "(pipx, uv tool). Each requirement is first fetched alone into a scratch folder: one "
        "that declares no entry point in the 'trysquare' group is refused and nothing is "
        "installed.",
        "trysquare install trysquare-anthropic\n  trysquare install ./my-plugin\n"
        "  trysquare install -U trysquare-dask",
    ),
    "uninstall": (
        "Remove trysquare plugins from the environment trysquare runs in. A distribution that "
        "is not installed, or is not a trysquare plugin, is refused.",
        "trysquare uninstall trysquare-anthropic",
    ),
    "schema": (
        "Print the JSON Schema (draft 2020-12) that the --format json output of validate, "
        "check or report (or plugins --json) follows, for a CI step that checks what it "
        "reads. Keys may be added without a new schema_version; one that changes meaning or "
        "goes away raises it.",
        "trysquare schema validate > validate.schema.json\n  trysquare schema report",
    ),
}

# Arguments that had no help line, by destination (the same word means the same thing everywhere).
_ARGUMENTS: dict[str, str] = {
    "scenario": f"the scenario file, scenario.toml ({PATH_NOTE})",
    "paths": f"an experiment folder: every run.toml below it is a run ({PATH_NOTE})",
    "path": f"the experiment folder: every run.toml below it is a run ({PATH_NOTE})",
    "run_dir": f"the run folder, holding run.toml ({PATH_NOTE})",
    "jobs": "how many validators run at once (default: the number of CPUs)",
    "executor": "where tasks run: local (default) or one a plugin registers (trysquare plugins lists them)",
    "executor_option": "an option for the executor (repeatable), e.g. address=tcp://127.0.0.1:8786",
    "validator": "the validator's name (default: the first in the scenario)",
    "json": "print a JSON list, one object per plugin",
    "cell": "the cell this run belongs to, e.g. 'rule / high'",
    "repetition": "which repetition of its cell this run is (0 or more)",
    "session_format": "the session log's format, e.g. pi (default: detected from its content)",
    "trace": f"a trace file of the run ({PATH_NOTE})",
    "etalon_tag": "the git tag of the reference the agent started from",
    "etalon_checkout": f"a folder holding the etalon's files ({PATH_NOTE}; default: made from the tag)",
    "id": "the run's id (default: the run folder's name)",
}

# Options naming a file or folder whose help line does not yet say what it is relative to.
_PATHS = frozenset({"config", "output", "repo", "prompt", "session", "trace", "dir", "run_dir"})


def apply(commands: argparse._SubParsersAction[Any]) -> None:
    """Give each core command its description and example, and each bare argument its help."""
    for name, parser in commands.choices.items():
        if name in _COMMANDS:
            description, example = _COMMANDS[name]
            parser.description = description
            parser.epilog = f"example:\n  {example}"
            parser.formatter_class = _Formatter
        for action in parser._actions:
            if action.help is None and action.dest in _ARGUMENTS:
                action.help = _ARGUMENTS[action.dest]
            elif action.dest in _PATHS and action.help and "relative" not in action.help:
                action.help = f"{action.help} ({PATH_NOTE})"


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Wraps the description as prose, keeps the example's lines as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example:"):
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)
