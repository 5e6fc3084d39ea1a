"""Issue 15.1: report formats are a hook; md/json/csv and html are chosen the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from trysquare import plugins
from trysquare.cli import main

from tests.view.viewlab import build_lab


@pytest.fixture
def lab(tmp_path: Path):
    return build_lab(tmp_path)


def test_core_formats_and_html_register_through_the_hook() -> None:
    formats = plugins.report_formats()
    assert {"md", "json", "csv", "html"} <= set(formats)
    by_plugin = {info.name: info.report_formats for info in plugins.infos()}
    assert by_plugin["trysquare.report.formats"] == ("csv", "json", "md")
    assert by_plugin["trysquare-view"] == ("html",)


def test_unknown_format_is_refused_naming_the_registered_ones(lab, capsys) -> None:
    code = main(["report", str(lab.scenario), str(lab.root), "--format", "pdf"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--format pdf: no such report format (registered: csv, html, json, md)" in err
    assert "Traceback" not in err


def test_report_format_html_output_file(lab, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out" / "report.html"
    code = main(["report", str(lab.scenario), str(lab.root), "--format", "html", "-o", str(out)])
    assert code == 1  # a cell holds an invalid run: not publishable
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert (lab.root / "synthesis.md").is_file()  # report still rebuilds its files


def test_report_runs_only_refuses_html(lab, capsys) -> None:
    assert main(["report", str(lab.scenario), str(lab.root), "--runs", "--format", "html"]) == 2
    assert "report --runs prints md, json or csv, not 'html'" in capsys.readouterr().err


def test_json_through_the_hook_is_unchanged(lab, capsys) -> None:
    from trysquare.report.render import render_json

    assert main(["report", str(lab.scenario), str(lab.root), "--format", "json"]) == 1
    import json

    printed = json.loads(capsys.readouterr().out)
    assert printed["scenario"] == "view-lab"
    assert (
        render_json(printed)
        == json.dumps(printed, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    )


def test_a_plugin_registers_its_own_format(lab, site, capsys) -> None:
    site(
        "trysquare-txt",
        "trysquare_txt",
        """
        from trysquare import hookimpl

        class Txt:
            name = "txt"
            description = "one line per cell"
            suffix = ".txt"

            def render(self, source):
                return "".join(f"{c['cell']}: {c['runs']}\\n" for c in source.report["cells"])

        @hookimpl
        def trysquare_register_report_formats(register):
            register(Txt())
    """,
    )
    plugins.reset()
    main(["report", str(lab.scenario), str(lab.root), "--format", "txt"])
    assert capsys.readouterr().out.startswith("base: 2\n")


def test_a_second_html_is_refused_naming_both(lab, site, capsys) -> None:
    site(
        "trysquare-html2",
        "trysquare_html2",
        """
        from trysquare import hookimpl

        class Html:
            name = "html"
            description = "another"
            suffix = ".html"

            def render(self, source):
                return "other"

        @hookimpl
        def trysquare_register_report_formats(register):
            register(Html())
    """,
    )
    plugins.reset()
    formats = plugins.report_formats()
    # The built-in keeps its name: the newcomer's registration is refused, naming both.
    assert formats["html"].__class__.__name__ == "HtmlFormat"
    err = capsys.readouterr().err
    assert "report format 'html' of 'trysquare-html2' refused" in err and "'trysquare-view'" in err


def test_the_core_never_imports_the_view() -> None:
    core = Path(__file__).resolve().parents[2] / "trysquare_core" / "src"
    for path in core.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "import trysquare_view" not in text and "from trysquare_view" not in text, path


def test_html_without_the_view_says_where_it_comes_from(lab, capsys, monkeypatch) -> None:
    monkeypatch.setenv("TRYSQUARE_BLOCK_PLUGINS", "trysquare-view")
    plugins.reset()
    assert main(["report", str(lab.scenario), str(lab.root), "--format", "html"]) == 2
    root = Path(__file__).resolve().parents[2]
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            f"(registered: csv, json, md); html comes with trysquare-view: from the checkout {root}: "
            "uv sync --all-packages, which installs trysquare-view"
        )
    )
