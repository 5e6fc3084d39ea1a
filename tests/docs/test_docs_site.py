"""The documentation site: every page is in the nav, and `mkdocs build --strict` passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def nav_pages(nav: object) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return set().union(*(nav_pages(value) for value in nav.values()))
    if isinstance(nav, list):
        return set().union(*(nav_pages(item) for item in nav))
    return set()


def test_every_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    missing = pages - nav_pages(config["nav"])
    assert not missing, f"mkdocs.yml's nav does not list {sorted(missing)}"


@attrs.frozen
class BuiltSite:
    folder: Path
    errors: str  # mkdocs's stderr when the build failed, else ""


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    """`mkdocs build --strict` once for the module's tests (each build costs seconds): what
    they read is the same site."""
    site = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return BuiltSite(site, "" if result.returncode == 0 else result.stderr or "(no output)")


@pytest.mark.slow
def test_the_site_builds_strictly(built_site: BuiltSite) -> None:
    site = built_site.folder
    assert not built_site.errors, f"mkdocs build --strict failed:\n{built_site.errors}"
    # The API reference was rendered from the docstrings, not left as a `:::` line.
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert ":::" not in api and "Validation" in api
    assert ":class:" not in api  # Sphinx roles render as plain code
    # A page's link to a plugin's README reaches a page of the site.
    assert (site / "repo" / "plugins" / "trysquare-dask" / "index.html").is_file()


# Every public record a plugin author reads or builds: each field must be on the API page.
RECORDS = {
    "trysquare.modes": ("TableSource", "Validation", "ValidationTask", "Outcome"),
    "trysquare_judge.providers": (
        "ProviderConfig",
        "ChatRequest",
        "Message",
        "ToolSpec",
        "ToolCall",
        "ChatReply",
        "Usage",
    ),
}
# Names the API page must document (functions, classes, methods), each by its anchor.
NAMES = (
    "trysquare.modes.TableSource.refuse",
    "trysquare.modes.TableSource.structure",
    "trysquare.modes.TableSource.resolve",
    "trysquare_judge.providers.api_key",
    "trysquare_judge.providers.token_count",
    "trysquare_judge.providers.ReplyTooLarge",
    "trysquare_judge.providers.http.HttpEndpoint",
    "trysquare_judge.providers.http.HttpEndpoint.post",
    "trysquare.hookspecs.trysquare_register_modes",
    "trysquare.hookspecs.trysquare_register_report_formats",
    "trysquare_judge.hookspecs.trysquare_register_judge_providers",
)


@pytest.mark.slow
def test_the_api_page_documents_every_field_of_every_public_record(built_site: BuiltSite) -> None:
    import importlib
    import re

    site = built_site.folder
    assert not built_site.errors, built_site.errors
    anchors = set(re.findall(r'id="([^"]+)"', (site / "api" / "index.html").read_text("utf-8")))
    missing = [name for name in NAMES if name not in anchors]
    for module_name, classes in RECORDS.items():
        module = importlib.import_module(module_name)
        for class_name in classes:
            for field in attrs.fields(getattr(module, class_name)):
                anchor = f"{module_name}.{class_name}.{field.name}"
                if anchor not in anchors:
                    missing.append(anchor)
    assert not missing, f"not on the API page: {missing}"
