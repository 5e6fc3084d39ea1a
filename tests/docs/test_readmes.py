"""The READMEs a package index shows: links that work there, and each mode's keys and example."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.venvs import DISTRIBUTION_FOLDERS

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
MODES = {
    "trysquare_script": "script",
    "trysquare_judge": "judge",
    "trysquare_form": "form",
    "plugins/trysquare-hidden-tests": "hidden-tests",
}


def project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def site_url() -> str:
    return str(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["site_url"])


@pytest.mark.parametrize("folder", DISTRIBUTION_FOLDERS, ids=lambda f: f.name)
def test_a_package_readme_links_absolutely(folder: Path) -> None:
    readme = folder / project(folder)["readme"]
    text = FENCE.sub("", readme.read_text(encoding="utf-8"))
    absolute = ("https://", "http://", "#", "mailto:")
    relative = [target for target in LINK.findall(text) if not target.startswith(absolute)]
    where = readme.relative_to(ROOT)
    assert not relative, f"{where}: links that break on the package index: {relative}"


@pytest.mark.parametrize("folder", DISTRIBUTION_FOLDERS, ids=lambda f: f.name)
def test_the_documentation_url_is_the_built_site(folder: Path) -> None:
    assert site_url().startswith("https://") and site_url().endswith("/")
    assert project(folder)["urls"]["Documentation"].startswith(site_url())


@pytest.mark.parametrize(("folder", "mode"), sorted(MODES.items()))
def test_each_mode_readme_has_its_keys_as_an_example(folder: str, mode: str) -> None:
    text = (ROOT / folder / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```toml\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    tables = [tomllib.loads(block) for block in blocks if "[[validation]]" in block]
    assert any(t["validation"][0]["mode"] == mode and t["validation"][0]["metrics"] for t in tables)
