"""The wrapper a plugin's ``trysquare_register_commands`` hook is handed.

Its own module (argparse alone) so the plugin manager can stage a plugin's
commands without importing the rest of the plugin API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

__all__ = ["Commands", "add_selection_options"]


class Commands:
    """What ``trysquare_register_commands(cli)`` receives: add subcommands to ``trysquare``.

    Each command is described on a parser of its own and joins the command line
    once the plugin's hook has returned, so a plugin that raises half-way adds
    nothing and ``--help`` keeps working.
    """

    def __init__(self, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
        if parser_class is None:  # argparse's own (imported here: add_selection_options needs none)
            import argparse

            parser_class = argparse.ArgumentParser
        self._parser_class = parser_class
        self._staged: list[tuple[str, dict[str, Any], argparse.ArgumentParser]] = []

    def add(
        self,
        name: str,
        handler: Callable[[argparse.Namespace], int],
        *,
        help: str,
        description: str | None = None,
    ) -> argparse.ArgumentParser:
        """Add ``trysquare NAME``; return its parser, for its arguments (and subcommands).

        ``handler`` receives the parsed arguments and returns the exit code.
        """
        parser = self._stage(name, {"help": help, "description": description})
        parser.set_defaults(handler=handler)
        return parser

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """``argparse``'s spelling of :meth:`add`, for plugins written against it;
        give the parser a handler with ``parser.set_defaults(handler=...)``."""
        return self._stage(name, kwargs)

    def _stage(self, name: str, options: dict[str, Any]) -> argparse.ArgumentParser:
        parser = self._parser_class(
            prog=f"trysquare {name}", add_help=False, description=options.get("description")
        )
        self._staged.append((name, options, parser))
        return parser

    def attach_to(self, subparsers: Any) -> None:
        """Add every staged command to ``subparsers`` (the core calls this)."""
        for name, options, parser in self._staged:
            # `parents=` copies the staged arguments and defaults (argparse's public way).
            subparsers.add_parser(name, parents=[parser], **options)


def add_selection_options(parser: argparse.ArgumentParser, *, files_note: bool = False) -> None:
    """Add ``--cell GLOB`` and ``--run GLOB`` to a command, as ``validate`` and ``report`` have them.

    Read them back with :class:`trysquare.api.Selection`; ``files_note`` says in the
    help that files covering every run (``measures.json``) are still written whole.
    """
    note = "; measures.json and synthesis.md still cover every run" if files_note else ""
    parser.add_argument(
        "--cell", action="append", default=[], metavar="GLOB",
        help="only runs whose cell matches this fnmatch glob (repeatable; a glob matching "
        f"nothing is an error){note}",
    )  # fmt: skip
    parser.add_argument(
        "--run", action="append", default=[], metavar="GLOB",
        help="only runs whose id matches this fnmatch glob (repeatable; a glob matching nothing is an error)",
    )  # fmt: skip
