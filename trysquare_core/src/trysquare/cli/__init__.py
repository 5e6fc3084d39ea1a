"""The ``trysquare`` command line (also ``python -m trysquare``).

Exit codes: 0 all well; 1 the work ran and something fell short; 2 nothing ran
(usage, a scenario or config that does not load, no run found); 130/143
interrupted. A refusal is one sentence on stderr; ``--debug`` shows a traceback.

:func:`main` is the entry point; each command group lives in its own module:
:mod:`~trysquare.cli.arguments` (every built-in command's arguments, declared once),
:mod:`~trysquare.cli.parser` (argparse's parser of them),
:mod:`~trysquare.cli._plain_argv` (a plain command line read without argparse),
:mod:`~trysquare.cli.validate` (``validate``, ``check``, ``demo``),
:mod:`~trysquare.cli.runs` (``record``, ``context``, ``session``),
:mod:`~trysquare.cli.reports` (``report``, ``trust``, ``plan``, ``schema``),
:mod:`~trysquare.cli.install` (``plugins``, ``install``, ``uninstall``),
with :mod:`~trysquare.cli.common` (loading experiments, machine-readable output) and
:mod:`~trysquare.cli.signals` (SIGINT/SIGTERM) beneath them.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from trysquare import _collector
from trysquare._shown import shown
from trysquare._version import __version__
from trysquare.cli._plain_argv import plain_arguments
from trysquare.cli.arguments import _ArgumentsError
from trysquare.cli.signals import _interrupt, _Interrupted
from trysquare.errors import TrysquareError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the console script, ``python -m trysquare``: the process ends after
        _collector.pause()  # when not already paused by the console script
        try:
            code = _command(sys.argv[1:])
        finally:
            _skip_the_last_collection()
        _end_now(code)
        return code  # the process ends the ordinary way
    return _command(argv)


def _end_now(code: int) -> None:
    """End the process with ``code`` at once, once what an exit must do is done, when nothing
    else can need the interpreter's own way out (taking apart every module and object).

    Done: the standard streams flushed, ``atexit`` run (temporary folders' finalizers among
    it). Returns, for the ordinary exit, when the process is not trysquare's own command line
    (a program that called :func:`main`: a profiler, a wrapper, ``python -i``; its own
    objects may hold what only their finalizers write), another thread that is not a daemon
    is still running (the exit waits for it), a flush fails (the interpreter says so, as
    always), or a plugin not trysquare's own was imported (a file it left open) or is being
    loaded.
    """
    import threading

    if not _started_as_trysquare():
        return
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    loaded = sys.modules.get("trysquare.plugins")
    # Held from here on: a plugin that help left loading in the background loads no more.
    if loaded is not None and not (loaded.stop_loading() and loaded.only_builtin_code()):
        return
    if not _flushed():
        return
    import atexit

    atexit._run_exitfuncs()  # what the interpreter's exit runs first (private, but stable)
    if _flushed():  # what the exit functions printed
        os._exit(code)


# Options of the interpreter that take the next word as their value.
_INTERPRETER_VALUES = frozenset({"-X", "-W", "--check-hash-based-pycs"})


def _started_as_trysquare() -> bool:
    """Whether this process was started as trysquare's command line: ``trysquare ...`` (the
    console script) or ``python -m trysquare ...``, with no interactive prompt, development
    mode or warning filters to honour on the way out."""
    if sys.flags.inspect or sys.flags.dev_mode or sys.warnoptions:
        return False
    words = getattr(sys, "orig_argv", [])[1:]
    index = 0
    while index < len(words):
        word = words[index]
        if word == "-m":
            return words[index + 1 : index + 2] == ["trysquare"]
        if word.startswith("-m"):
            return word == "-mtrysquare"
        if word in _INTERPRETER_VALUES:
            index += 2
        elif word.startswith(("-c", "--")) or word == "-":
            return False  # code given on the command line or stdin, or an option unknown here
        elif word.startswith("-"):
            index += 1
        else:  # the script the interpreter runs: the console script's own file
            return os.path.basename(word) == "trysquare"
    return False


def _flushed() -> bool:
    """Whether the standard streams took everything written to them."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True


def _skip_the_last_collection() -> None:
    """Freeze what the command built, so the interpreter's last cyclic collection, on its
    way out, does not walk all of it to free memory the exit frees anyway.

    Nothing is left to that collection: results are written and closed by then, and what
    cleans up at exit (threads joined, temporary folders' finalizers, ``atexit``) runs
    whatever is frozen. Only for a process's own command line: a caller of ``main(argv)``
    goes on, and keeps its collector as it was.
    """
    import gc

    gc.freeze()


def _command(arguments: Sequence[str]) -> int:
    argv = list(arguments)
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
        # A plain command line is read without argparse (the same arguments); any other,
        # and every refusal, is argparse's.
        args: Any = plain_arguments(argv)
        if args is None:
            from trysquare.cli.parser import build_parser

            parser = build_parser(
                with_plugins=_plugins_within_help_wait(argv), word=_command_word(argv)
            )
            args = parser.parse_args(argv)
            if getattr(args, "handler", None) is None:
                parser.print_help()
                return 2
        if not getattr(args, "resumes_collector_at_load", False):
            _collector.resume()  # a command that loads no experiment (a plugin's, `view`)
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
        shown(
            f"trysquare: warning: plugin '{slow}' is still loading after {HELP_PLUGIN_WAIT:g} s; "
            "this help leaves out the commands of every plugin"
        ),
        file=sys.stderr,
    )
    return False


def _command_word(argv: Sequence[str]) -> str | None:
    """The command a line names, when it asks for no help (help lists every command)."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    if {"-h", "--help"} & set(words):
        return None
    return next((word for word in words if not word.startswith("-")), None)


def _asks_version(argv: Sequence[str]) -> bool:
    """Whether ``--version`` comes before any command (where argparse would honour it)."""
    for word in argv:
        if word == "--version":
            return True
        if not word.startswith("-") or word == "--":
            return False
    return False
