"""The plain command-line reader gives argparse's attributes, or leaves the line to argparse."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from trysquare.cli import _plain_argv
from trysquare.cli._plain_argv import Arguments, plain_arguments
from trysquare.cli.arguments import BUILTIN_COMMANDS, _ArgumentsError
from trysquare.cli.parser import build_parser

pytestmark = pytest.mark.fast

# Words for every place a command line has one: values each type takes or refuses, spellings
# argparse reads and this reader leaves to it (abbreviations, `=`, `--`, clusters, negatives).
VALUES = ("s.toml", "runs", "", "a b", "3", "0", "-1", "x", "json", "md", "text", "pending")
ODD = ("--", "-", "-h", "--help", "--version", "--debug", "--repl", "--jobs=2", "-xq", "-o=f")


def _argparse(argv: Sequence[str]) -> dict[str, Any] | None:
    """argparse's attributes for ``argv`` (in their order), or None where it refuses it."""
    try:
        parsed = build_parser(word=argv[0] if argv else None).parse_args(list(argv))
    except (_ArgumentsError, SystemExit):
        return None
    return dict(vars(parsed))


def _same(argv: Sequence[str]) -> bool:
    """Whether the plain reader left ``argv`` to argparse, or read it exactly as argparse does."""
    plain = plain_arguments(argv)
    if plain is None:
        return False
    expected = _argparse(argv)
    assert expected is not None, f"argparse refuses {argv!r}, the plain reader took it"
    got = vars(plain)
    assert list(got) == list(expected), argv
    for name, value in expected.items():
        assert type(got[name]) is type(value), (argv, name)
        assert repr(got[name]) == repr(value), (argv, name)
        assert got[name] == value, (argv, name)
    return True


def _spellings(command: str) -> list[tuple[str, ...]]:
    """Each option of ``command`` as words: a flag alone, a valued option with each value."""
    declared = _plain_argv._declared(command)
    assert declared is not None
    words: list[tuple[str, ...]] = []
    for argument in declared.arguments:
        if argument.positional:
            continue
        for name in argument.names:
            if argument.action == "store_true":
                words.append((name,))
            else:
                choices = tuple(argument.choices or ())
                words.extend((name, value) for value in (*choices[:2], *VALUES[:4], "-1"))
    return words


def _read_plainly() -> list[str]:
    return [word for word in BUILTIN_COMMANDS if _plain_argv._declared(word) is not None]


def test_the_commands_read_plainly_are_these() -> None:
    """A declaration this reader does not know sends its command to argparse, silently: a
    command leaving this list is a start made slower, to be seen here."""
    assert _read_plainly() == [
        "validate", "context", "session", "report", "trust", "plan", "record", "plugins",
        "install", "uninstall", "schema",
    ]  # fmt: skip


def test_validate_and_report_lines_are_read_plainly() -> None:
    assert _same(["validate", "s.toml", "runs", "--replay", "--force", "--no-progress"])
    assert _same(["report", "s.toml", "runs"])


@pytest.mark.parametrize("command", _read_plainly())
def test_every_option_alone_and_in_pairs_reads_as_argparse_reads_it(command: str) -> None:
    options = _spellings(command)
    lines = [[command, *positionals] for positionals in ([], ["s"], ["s", "e"], ["s", "e", "f"])]
    read = 0
    for line in lines:
        read += _same(line)
        for option in options:
            read += _same([*line, *option])
            read += _same([command, *option, *line[1:]])  # before the arguments
        for first, second in itertools.combinations(options[:: max(1, len(options) // 12)], 2):
            read += _same([*line, *first, *second])
            read += _same([*line, *first, *first])  # twice: the last, or both appended
    if command in ("validate", "report"):
        assert read > 50  # the plain reader does read most of these


def test_a_line_it_does_not_read_is_left_to_argparse() -> None:
    for argv in (
        [],
        ["--debug", "validate", "s", "e"],
        ["validate", "s", "e", "--repl"],
        ["validate", "s", "e", "--jobs=2"],
        ["validate", "s", "e", "--", "f"],
        ["validate", "--force", "s", "e"],  # an argument after an option
        ["validate", "s", "e", "--jobs", "0"],  # refused by its type
        ["validate", "s", "e", "--format", "yaml"],  # refused by its choices
        ["validate", "s"],  # too few
        ["report", "s", "e", "f"],  # too many
        ["validate", "s", "e", "--help"],
        ["check", "s"],  # an optional positional: argparse's own reading
        ["record", "r"],  # a required option missing
        ["form"],  # not a built-in command
    ):
        assert plain_arguments(argv) is None, argv


def test_the_arguments_read_like_argparses_namespace() -> None:
    import argparse

    plain = Arguments(a=1, b=[2])
    assert plain == Arguments(a=1, b=[2]) and plain != Arguments(a=1)
    assert "a" in plain and "c" not in plain
    assert repr(plain) == repr(argparse.Namespace(a=1, b=[2]))


def test_a_plain_validate_imports_no_argparse() -> None:
    code = (
        "import sys\n"
        "from trysquare.cli._plain_argv import plain_arguments\n"
        "assert plain_arguments(['validate', 's', 'e', '--replay']) is not None\n"
        "assert plain_arguments(['report', 's', 'e']) is not None\n"
        "print(sorted({'argparse', 'gettext'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "declare",
    [
        pytest.param(lambda c: (c.add_argument("--a", dest="x"), c.add_argument("--b", dest="x")),
                     id="two-options-one-attribute"),
        pytest.param(lambda c: (c.set_defaults(x="5"), c.add_argument("--x")),
                     id="a-default-before-its-argument"),
        pytest.param(lambda c: c.add_argument("--x", default="==SUPPRESS=="), id="suppressed"),
    ],
)  # fmt: skip
def test_declarations_argparse_reads_its_own_way_are_left_to_it(declare: Any) -> None:
    """argparse gives these a reading of its own (the later argument takes the earlier
    default, a suppressed attribute is left out, a required option shares its attribute):
    a command declaring one is not read plainly."""
    with pytest.raises(_plain_argv._Unsupported):
        declare(_plain_argv._Command())
