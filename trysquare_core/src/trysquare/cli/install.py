"""``trysquare plugins``, ``install`` and ``uninstall``: what is installed and what is in force."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trysquare._shown import shown


def _plugins(args: argparse.Namespace) -> int:
    import attrs

    from trysquare import plugins

    listed = plugins.infos(fresh=True)  # the installed metadata itself, never the cache
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
                ("modes", info.modes),
                ("providers", info.providers),
                ("session formats", info.session_formats),
                ("executors", info.executors),
                ("report formats", info.report_formats),
            )
            if values
        ]
        status = (
            f"FAILED: {info.error}"
            if info.error
            else "; ".join(provided) or "hooks: " + ", ".join(info.hooks)
        )
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


def _print_protection() -> None:
    """Which protection of the measured clone is in force on this machine (Landlock or
    detection), and where the agent's code runs (the jail or the fallback)."""
    from trysquare.jail import isolation_line
    from trysquare.sandbox import protection_line

    print(protection_line())
    print(isolation_line())
