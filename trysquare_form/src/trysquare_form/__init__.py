"""trysquare's form mode: a blind, shuffled TOML file a human fills.

Python API (what ``trysquare form export`` / ``ingest`` call)::

    from trysquare_form import export_form, ingest_form

    exported = export_form(scenario, experiment, Path("FORM.toml"), seed=7)
    # ... a human edits FORM.toml: `note_clear = true` under a [run.<id>] table ...
    report = ingest_form(scenario, experiment, exported.form, by="alice")
    print(report.summary)   # "3 merged, 1 still pending, 0 refused"
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trysquare.api import Mode, hookimpl

from trysquare_form.mode import FormMode, FormValidation

if TYPE_CHECKING:
    from trysquare.api import Commands

    from trysquare_form.export import ExportedRun, ExportResult, export_form
    from trysquare_form.ingest import IngestReport, Refusal, ingest_form

# Loading the plugin (every trysquare command does) should not pay for export and
# ingest; their names are resolved on first use.
_LAZY = {
    "ExportResult": "trysquare_form.export",
    "ExportedRun": "trysquare_form.export",
    "export_form": "trysquare_form.export",
    "IngestReport": "trysquare_form.ingest",
    "Refusal": "trysquare_form.ingest",
    "ingest_form": "trysquare_form.ingest",
}

__all__ = [
    "ExportResult",
    "ExportedRun",
    "FormMode",
    "FormValidation",
    "IngestReport",
    "Refusal",
    "export_form",
    "ingest_form",
]


@hookimpl
def trysquare_register_modes(register: Callable[[Mode], None]) -> None:
    register(FormMode())


@hookimpl
def trysquare_register_commands(cli: Commands) -> None:
    from trysquare_form.commands import register

    register(cli)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trysquare_form' has no attribute {name!r}")
