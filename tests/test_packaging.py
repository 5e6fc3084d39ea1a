"""What every distribution declares, and the plugin author's kit on docs/plugins.md (no build here;
tests/test_install.py builds and installs them)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.test_install import kit_files

ROOT = Path(__file__).resolve().parents[1]
PYPROJECTS = sorted(
    [
        ROOT / "pyproject.toml",
        *ROOT.glob("*/pyproject.toml"),
        *ROOT.glob("plugins/*/pyproject.toml"),
    ]
)
SIBLING = re.compile(r"^(trysquare(?:-[a-z-]+)?)\s*(.*)$")


def project(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))["project"]


def test_every_distribution_folder_is_found() -> None:
    names = {project(path)["name"] for path in PYPROJECTS}
    assert {
        "trysquare",
        "trysquare-core",
        "trysquare-script",
        "trysquare-judge",
        "trysquare-form",
        "trysquare-view",
        "trysquare-dask",
        "trysquare-hidden-tests",
        "trysquare-anthropic",
    } <= names


@pytest.mark.parametrize(
    "pyproject", PYPROJECTS, ids=lambda p: str(p.parent.relative_to(ROOT)) or "root"
)
def test_a_distribution_says_what_it_is_where_it_runs_and_what_it_needs(pyproject: Path) -> None:
    meta, folder = project(pyproject), pyproject.parent
    assert (folder / meta["readme"]).is_file()
    assert meta["license"] == "MIT" and meta["license-files"] == ["LICENSE"]
    assert (folder / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    # The locks and process groups are POSIX: say so to pip's users.
    assert {
        "Operating System :: POSIX",
        "Operating System :: POSIX :: Linux",
        "Operating System :: MacOS",
    } <= set(meta["classifiers"])
    assert {"Homepage", "Source", "Issues"} <= set(meta["urls"])
    for requirement in meta.get("dependencies", []):
        found = SIBLING.match(requirement)
        if found:
            assert found.group(2).startswith(">="), f"{pyproject}: {requirement} has no lower bound"


def test_the_demo_material_ships_with_the_core() -> None:
    # hatch_build.py copies these from examples/ into the wheel and the sdist.
    hook = (ROOT / "trysquare_core" / "hatch_build.py").read_text(encoding="utf-8")
    assert 'SHIPPED = ("scenario.toml", "validator.py", "demo", "node")' in hook
    for name in ("scenario.toml", "validator.py", "demo/matrix.toml", "node/matrix.toml"):
        assert (ROOT / "examples" / name).is_file()


def test_the_plugins_page_opens_with_a_mode_and_a_provider_under_60_lines_a_file() -> None:
    files = kit_files()
    assert sorted(files) == [
        "trysquare-fewfiles/pyproject.toml",
        "trysquare-fewfiles/test_fewfiles.py",
        "trysquare-fewfiles/trysquare_fewfiles.py",
        "trysquare-local/pyproject.toml",
        "trysquare-local/test_local.py",
        "trysquare-local/trysquare_local.py",
    ]
    # Short enough to read whole; the provider shows typed hooks and its own options (issue 32).
    for path, text in files.items():
        assert len(text.splitlines()) < 60, path
    provider = tomllib.loads(files["trysquare-local/pyproject.toml"])["project"]
    assert "trysquare-judge>=0.1.0" in provider["dependencies"]
    page = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    assert "A provider depends on `trysquare-judge`" in page
    assert "(api.md)" in page and "(judge.md)" in page and (ROOT / "docs" / "api.md").is_file()
