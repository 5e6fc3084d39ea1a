"""trysquare-view: the ``html`` report format and ``trysquare view``.

Registered through the ``trysquare`` entry point; the core never imports it.
The page and the server are imported only when used, so loading the plugin
costs nothing to a command that does not need them.
"""

from __future__ import annotations

from typing import Any

from trysquare.api import hookimpl

__all__ = ["HtmlFormat"]


class HtmlFormat:
    """``report --format html``: one self-contained page (see :mod:`trysquare_view.page`)."""

    name = "html"
    description = "one self-contained HTML page: charts, runs matrix, per-run panels"
    suffix = ".html"

    def render(self, source: Any) -> str:
        from trysquare_view.page import build_page

        return build_page(source)


@hookimpl
def trysquare_register_report_formats(register: Any) -> None:
    register(HtmlFormat())


@hookimpl
def trysquare_register_commands(cli: Any) -> None:
    from trysquare_view.server import add_view_command

    add_view_command(cli)
