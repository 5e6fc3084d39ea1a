"""The meta distribution's extras: `pip install "trysquare[all]"` pulls in every plugin here."""

from __future__ import annotations

import tomllib
import zipfile

import pytest

from tests.venvs import DISTRIBUTION_FOLDERS, ROOT, distribution_name, wheelhouse

EXTRAS = {
    "anthropic": "trysquare-anthropic",
    "dask": "trysquare-dask",
    "hidden-tests": "trysquare-hidden-tests",
}


def test_each_plugin_of_the_repository_is_an_extra_and_all_names_them_all() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    plugins = {
        distribution_name(folder)
        for folder in DISTRIBUTION_FOLDERS
        if folder.parent.name == "plugins"
    }
    assert {requirement.split(">")[0] for name in EXTRAS for requirement in extras[name]} == plugins
    assert extras["all"] == [f"trysquare[{','.join(sorted(EXTRAS))}]"]
    for name in plugins:  # each is a workspace member, so `uv sync --extra` takes it from here
        assert project["tool"]["uv"]["sources"][name] == {"workspace": True}


def test_the_built_wheel_declares_the_extras(tmp_path_factory: pytest.TempPathFactory) -> None:
    # The session's wheels (tests/venvs.py): `uv build` of the repository, built once for all.
    [wheel] = wheelhouse(tmp_path_factory).glob("trysquare-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(name).decode().splitlines()
    assert {line.split(": ", 1)[1] for line in lines if line.startswith("Provides-Extra:")} == {
        *EXTRAS,
        "all",
    }
    requires = [line.split(": ", 1)[1] for line in lines if line.startswith("Requires-Dist:")]
    for extra, distribution in EXTRAS.items():
        assert f"{distribution}>=0.1.0; extra == '{extra}'" in requires, requires
        # The build flattens `all`'s self-reference into the plugins themselves.
        assert f"{distribution}>=0.1.0; extra == 'all'" in requires, requires
