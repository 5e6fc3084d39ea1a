"""A plain command line read without argparse: the same arguments, for a start that pays less.

argparse, with the gettext it imports, and the parser it builds (each parser asks gettext
for its words) weigh on every start of a one-run ``validate`` or ``report``. A *plain*
command line is read here from the same declarations (:mod:`trysquare.cli.arguments`): a
built-in command's word first, then its positional arguments, then options each spelt in
full (``--jobs 2``, ``-x``), every value a word of its own that does not start with ``-``,
every value accepted by its type and choices. The answer is the attributes argparse would
give, in its order, with its defaults, conversions and handler.

Anything else goes to argparse, whose reading and refusals are the command line's: help, a
version, an abbreviation (``--repl``), ``--opt=value``, ``--``, a word starting with ``-``
where a value goes, arguments after an option, a missing or extra argument, a value a
type or choice refuses, a required option left out, and any declaration this reader does
not know (an action or ``nargs`` other than those below). ``tests/core/test_plain_argv.py``
holds the two readers to the same attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Arguments", "plain_arguments"]


class Arguments:
    """The parsed arguments: read like ``argparse.Namespace`` (attributes, ``==`` between two of
    them, ``in``, ``vars``). A built-in handler is handed one of these or a ``Namespace``, so it
    asks neither ``isinstance(args, argparse.Namespace)`` nor ``args == Namespace(...)``. Shown
    as a ``Namespace`` is: a ``--debug`` trace reads the same whichever reader read the line."""

    def __init__(self, **values: Any) -> None:
        for name, value in values.items():
            setattr(self, name, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Arguments):
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # compared by value, as argparse's Namespace

    def __contains__(self, name: str) -> bool:
        return name in self.__dict__

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in vars(self).items())
        return f"Namespace({shown})"


class _Unsupported(Exception):
    """A declaration the plain reader does not know: the command is argparse's alone."""


_NOT_GIVEN = object()
# What a declaration may say beside its names and leave the reading the same.
_WORDING = frozenset({"help", "metavar"})
_COMMAND_WORDING = frozenset({"help", "description", "epilog", "formatter_class"})


class _Declared:
    """One ``add_argument``, as argparse would read it (the subset this reader knows)."""

    def __init__(self, names: tuple[str, ...], options: dict[str, Any]) -> None:
        unknown = options.keys() - _WORDING - {"action", "type", "default", "choices", "dest"}
        unknown -= {"nargs", "required"}
        if unknown or not names:
            raise _Unsupported(sorted(unknown))
        self.action = options.get("action", "store")
        if self.action not in ("store", "store_true", "append"):
            raise _Unsupported(self.action)
        self.positional = not names[0].startswith("-")
        nargs = options.get("nargs")
        if self.positional:
            if len(names) != 1 or self.action != "store" or nargs not in (None, "+"):
                raise _Unsupported(names)
            if "dest" in options or "required" in options:
                raise _Unsupported(names)
            self.dest = names[0]
        else:
            if nargs is not None or any(not name.startswith("-") for name in names):
                raise _Unsupported(names)
            self.dest = options.get("dest") or _option_dest(names)
        if self.action == "store_true" and options.keys() & {"type", "choices"}:
            raise _Unsupported(names)
        self.names = names
        self.nargs = nargs
        self.required = bool(options.get("required", self.positional))
        self.convert: Callable[[str], Any] | None = options.get("type")
        self.choices = options.get("choices")
        self.default = options.get("default", False if self.action == "store_true" else None)
        if self.default == "==SUPPRESS==":  # argparse.SUPPRESS: the attribute left out
            raise _Unsupported(names)


def _option_dest(names: tuple[str, ...]) -> str:
    """argparse's name for an option: its first long spelling's, else its first spelling's."""
    spelling = next((name for name in names if name.startswith("--")), names[0])
    return spelling.lstrip("-").replace("-", "_")


class _Command:
    """What one command's declaration said: its arguments in order, and its defaults."""

    def __init__(self) -> None:
        self.arguments: list[_Declared] = []
        self.defaults: dict[str, Any] = {}

    def add_argument(self, *names: str, **options: Any) -> None:
        declared = _Declared(names, options)
        # Two arguments for one attribute (a required one beside another), or a default set
        # for it before it was declared: argparse's reading of these is its own.
        if declared.dest in self.defaults or any(a.dest == declared.dest for a in self.arguments):
            raise _Unsupported(names)
        self.arguments.append(declared)

    def set_defaults(self, **defaults: Any) -> None:
        # argparse: a default named after an argument is that argument's default
        for argument in self.arguments:
            if argument.dest in defaults:
                argument.default = defaults[argument.dest]
        self.defaults.update(defaults)


class _Recorder:
    """Stands for argparse's subparsers while the declarations run: keeps each command."""

    def __init__(self) -> None:
        self.commands: dict[str, _Command] = {}

    def add_parser(self, name: str, **options: Any) -> _Command:
        if options.keys() - _COMMAND_WORDING:
            raise _Unsupported(sorted(options.keys() - _COMMAND_WORDING))
        command = self.commands[name] = _Command()
        return command


def _declared(word: str) -> _Command | None:
    """The built-in command ``word`` as its declaration says, or ``None`` (not one this
    reader reads)."""
    from trysquare.cli.arguments import BUILTIN_COMMANDS, declare_commands

    if word not in BUILTIN_COMMANDS:
        return None
    recorder = _Recorder()
    try:
        declare_commands(recorder, lambda name: name == word)
    except (_Unsupported, AttributeError, TypeError):
        return None
    command = recorder.commands.get(word)
    if command is None or len(recorder.commands) != 1:
        return None
    positionals = [argument for argument in command.arguments if argument.positional]
    if any(argument.nargs == "+" for argument in positionals[:-1]):
        return None  # only the last may take several words
    spellings = [name for argument in command.arguments for name in argument.names]
    if len(spellings) != len(set(spellings)) or {"-h", "--help"} & set(spellings):
        return None
    return command


def plain_arguments(argv: Sequence[str]) -> Arguments | None:
    """``argv``'s arguments as argparse would give them, when ``argv`` is a plain command line
    of a built-in command; else ``None`` (argparse reads it, and refuses what it refuses)."""
    if not argv or argv[0].startswith("-"):
        return None
    command = _declared(argv[0])
    if command is None:
        return None
    words = list(argv[1:])
    first_option = next((at for at, word in enumerate(words) if word.startswith("-")), len(words))
    given = _positionals(command, words[:first_option])
    if given is None:
        return None
    options = _options(command, words[first_option:])
    if options is None:
        return None
    given.update(options)
    values: dict[str, Any] = {"debug": False, "command": argv[0]}
    for argument in command.arguments:
        if argument.dest in given:
            values[argument.dest] = given[argument.dest]
        elif argument.required:
            return None
        elif isinstance(argument.default, str) and argument.convert is not None:
            # argparse converts a default given as text when the option is left out
            try:
                values[argument.dest] = argument.convert(argument.default)
            except Exception:  # noqa: BLE001 -- whatever it raises, argparse reads the line
                return None
        else:
            values.setdefault(argument.dest, argument.default)
    for name, value in command.defaults.items():
        values.setdefault(name, value)
    return Arguments(**values)


def _positionals(command: _Command, words: list[str]) -> dict[str, Any] | None:
    positionals = [argument for argument in command.arguments if argument.positional]
    takes_more = bool(positionals) and positionals[-1].nargs == "+"
    if len(words) < len(positionals) or (len(words) > len(positionals) and not takes_more):
        return None
    given: dict[str, Any] = {}
    for at, argument in enumerate(positionals):
        if argument.nargs == "+":
            taken = [_value(argument, word) for word in words[at:]]
            if any(value is _NOT_GIVEN for value in taken):
                return None
            given[argument.dest] = taken
        else:
            value = _value(argument, words[at])
            if value is _NOT_GIVEN:
                return None
            given[argument.dest] = value
    return given


def _options(command: _Command, words: list[str]) -> dict[str, Any] | None:
    by_spelling = {name: argument for argument in command.arguments for name in argument.names}
    given: dict[str, Any] = {}
    at = 0
    while at < len(words):
        argument = by_spelling.get(words[at])
        if argument is None or argument.positional:
            return None
        if argument.action == "store_true":
            given[argument.dest] = True
            at += 1
            continue
        if at + 1 >= len(words) or words[at + 1].startswith("-"):
            return None
        value = _value(argument, words[at + 1])
        if value is _NOT_GIVEN:
            return None
        if argument.action == "append":
            # argparse appends to a copy of what is there (the default list stays as it was)
            earlier = given.get(argument.dest, argument.default)
            given[argument.dest] = [*(earlier or ()), value]
        else:
            given[argument.dest] = value
        at += 2
    return given


def _value(argument: _Declared, word: str) -> Any:
    """``word`` converted by the argument's type and held to its choices; ``_NOT_GIVEN`` for
    a word argparse would refuse (argparse then says why)."""
    try:
        value = word if argument.convert is None else argument.convert(word)
    except Exception:  # noqa: BLE001 -- argparse refuses it (or raises it) in its own words
        return _NOT_GIVEN
    if argument.choices is not None and value not in argument.choices:
        return _NOT_GIVEN
    return value
