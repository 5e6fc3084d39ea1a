"""Every subcommand explains itself; usage errors say so once (issue 16.7)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trysquare import cli
from trysquare.cli.parser import build_parser


def commands(
    parser: argparse.ArgumentParser, prefix: str = "trysquare"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from commands(sub, f"{prefix} {name}")


def test_every_subcommand_has_a_description_an_example_and_help_lines() -> None:
    parser = build_parser()
    found = dict(commands(parser))
    # The core's and the in-tree plugins' commands are all there to be checked.
    assert {
        "trysquare validate",
        "trysquare report",
        "trysquare form export",
        "trysquare form ingest",
    } <= set(found)
    problems = []
    for name, sub in found.items():
        if not (sub.description or "").strip():
            problems.append(f"{name}: no description")
        if "example:" not in (sub.epilog or ""):
            problems.append(f"{name}: no example")
        for action in sub._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            label = "/".join(action.option_strings) or action.dest
            if not (action.help or "").strip():
                problems.append(f"{name} {label}: no help line")
            elif action.type is Path and "relative to" not in action.help:
                problems.append(f"{name} {label}: does not say what the path is relative to")
        # The help renders (argparse checks its % formats only then).
        assert sub.format_help()
    assert problems == []


@pytest.mark.parametrize(
    "argv", [["validate"], ["report", "s.toml"], ["validate", "s.toml", "p", "--jobs", "0"]]
)
def test_usage_error_prints_usage_once_without_a_doubled_prefix(argv, capsys) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert err.count("usage:") == 1 and lines[0].startswith(f"usage: trysquare {argv[0]} ")
    assert lines[-1].startswith(f"trysquare {argv[0]}: ")
    assert "trysquare: trysquare" not in err and "Traceback" not in err


def test_a_built_in_command_is_built_alone_and_reads_as_in_the_whole_parser() -> None:
    """``trysquare report ...`` builds only report's parser (a cheaper start): its help, its
    defaults and its handler are those of the full command line."""
    from trysquare.cli.parser import BUILTIN_COMMANDS

    whole = dict(commands(build_parser(with_plugins=False)))
    assert [name.removeprefix("trysquare ") for name in whole] == list(BUILTIN_COMMANDS)
    for word in BUILTIN_COMMANDS:
        alone = dict(commands(build_parser(word=word)))
        siblings = ("try", "init") if word in ("try", "init") else (word,)  # one builder
        assert list(alone) == [f"trysquare {name}" for name in siblings]
        sub, full = alone[f"trysquare {word}"], whole[f"trysquare {word}"]
        assert sub.format_help() == full.format_help()
        defaults = [
            ({a.dest: a.default for a in parser._actions}, parser._defaults)
            for parser in (sub, full)
        ]
        assert defaults[0] == defaults[1]


def test_a_word_that_is_no_built_in_command_builds_every_command(capsys) -> None:
    assert cli.main(["reprot"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'reprot'" in err and "report" in err


def _validate_help(parser: argparse.ArgumentParser) -> str:
    return next(sub for name, sub in commands(parser) if name == "trysquare validate").format_help()


def test_the_terminal_is_asked_its_width_once_per_command_line_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trysquare.cli import parser as parser_module

    asked: list[int] = []
    real = parser_module._terminal_columns

    def counting(*args: Any) -> Any:
        asked.append(1)
        return real(*args)

    monkeypatch.setattr(parser_module, "_terminal_columns", counting)
    monkeypatch.setenv("COLUMNS", "60")
    narrow = build_parser(word="validate")
    assert len(asked) == 1  # argparse alone asks once per argument given
    usage = _validate_help(narrow).split("\n\n")[0]
    assert max(map(len, usage.splitlines())) <= 58
    monkeypatch.setenv("COLUMNS", "120")
    wide = _validate_help(build_parser(word="validate"))
    assert len(asked) == 2 and max(map(len, wide.split("\n\n")[0].splitlines())) > 58
    monkeypatch.setattr(parser_module, "_terminal_columns", real)
    assert wide == _validate_help(build_parser(word="validate"))  # as argparse alone shows it


@pytest.mark.parametrize("columns", [None, "", "0", "-5", "abc", "1", "100", " 90 "])
@pytest.mark.parametrize("stdout", ["kept", "none", "closed", "terminal", "narrowless"])
def test_the_width_is_the_one_shutil_gives(
    monkeypatch: pytest.MonkeyPatch, columns: str | None, stdout: str
) -> None:
    # Worked out without importing shutil: the same columns in every case shutil tells apart.
    import io
    import shutil
    import sys

    from trysquare.cli.parser import _terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    if stdout == "none":
        monkeypatch.setattr(sys, "__stdout__", None)
    elif stdout == "closed":
        closed = io.StringIO()
        closed.close()
        monkeypatch.setattr(sys, "__stdout__", closed)
    elif stdout in ("terminal", "narrowless"):  # a terminal 77 columns wide, or 0 (unknown)
        import fcntl
        import os
        import pty
        import struct
        import termios

        leader, follower = pty.openpty()
        width = 77 if stdout == "terminal" else 0
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, width, 0, 0))
        terminal = os.fdopen(follower, "w")
        monkeypatch.setattr(sys, "__stdout__", terminal)
        try:
            assert _terminal_columns() == shutil.get_terminal_size().columns
            if not columns or not columns.strip().isdigit() or int(columns) <= 0:
                assert _terminal_columns() == (width or 80)
        finally:
            terminal.close()
            os.close(leader)
        return
    assert _terminal_columns() == shutil.get_terminal_size().columns
