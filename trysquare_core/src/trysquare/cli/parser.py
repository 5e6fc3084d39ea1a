"""The command line's arguments: one parser for every built-in command (and the plugins' own).

A refused command line is shown as the chosen command's usage line, then one sentence.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from trysquare._version import __version__
from trysquare.cli.arguments import (
    BUILTIN_COMMANDS,
    _ArgumentsError,
    declare_commands,
)


class _Parser(argparse.ArgumentParser):
    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every argument it is given (to check its metavar),
        # each asking the terminal its size: the width is taken once per command line built
        # instead, as argparse takes it (the columns, less 2).
        if isinstance(self.formatter_class, type) and issubclass(
            self.formatter_class, argparse.HelpFormatter
        ):
            return self.formatter_class(prog=self.prog, width=_help_width())
        return super()._get_formatter()

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
_widths: list[int] = []


def _help_width() -> int:
    if not _widths:
        _widths.append(_terminal_columns() - 2)
    return _widths[0]


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``, as argparse takes it: ``COLUMNS`` when it is a
    positive number, else the width of the terminal on stdout, else 80. Worked out here: a
    command that copies and removes no file (``report``) need not load shutil (and the
    compression modules it imports) for one number."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    stdout = sys.__stdout__
    if stdout is None:  # no stdout at all: shutil's fallback too
        return 80
    try:
        return os.get_terminal_size(stdout.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


def build_parser(*, with_plugins: bool = True, word: str | None = None) -> argparse.ArgumentParser:
    """The command line; with ``word`` (the command asked for), a built-in command's parser
    is the only one built and loads no plugin, since no other command can be the one asked
    for (help, and any other word, build them all: help lists them, a misspelt command is
    told the close ones)."""
    only = word if word in BUILTIN_COMMANDS else None
    _widths.clear()  # a caller building the command line again may have another terminal

    def wanted(name: str) -> bool:
        return only is None or name == only

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

    declare_commands(commands, wanted)

    from trysquare import helptext, plugins

    helptext.apply(commands)

    if with_plugins and only is None:
        # each plugin guarded on its own
        plugins.add_commands(commands, parser_class=_Parser, word=word)
    return parser
