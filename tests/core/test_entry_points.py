"""The entry-point scan is kept in trysquare's cache until the installed distributions change."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from trysquare import _entry_points, plugins

from tests.helpers import dist_info

pytestmark = pytest.mark.fast

PLUGIN = """
from trysquare import hookimpl
from trysquare.modes import Mode


class Echo(Mode):
    name = "echo-mode"


@hookimpl
def trysquare_register_modes(register):
    register(Echo())
"""


@pytest.fixture
def only_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site folder that is all the import path holds while scanning (imports done before)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site)])
    # What a fresh installation writes is trusted at once here: a change is seen by its
    # inode, size or time in nanoseconds, whatever the wait.
    monkeypatch.setattr(_entry_points, "_SETTLED_SECONDS", 0.0)
    return site


def _names(found: list[_entry_points.Found]) -> list[tuple[str, str, str | None]]:
    return sorted((item.group, item.name, item.dist) for item in found)


def _no_metadata_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> list[_entry_points.Found]:
        raise AssertionError("the installed distributions were read, not the cache")

    monkeypatch.setattr(_entry_points, "_scan_metadata", refuse)


def test_a_second_start_reads_the_cache_not_the_distributions(
    only_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist_info(only_site, "trysquare-echo", "echo_plugin", provides=("mode.echo-mode",))
    first = _entry_points.scan()
    assert _names(first) == [
        ("trysquare", "trysquare-echo", "trysquare-echo"),
        ("trysquare.provides", "mode.echo-mode", "trysquare-echo"),
    ]
    cache = Path(_entry_points.cache_file())
    assert cache.parent == Path(os.environ["XDG_CACHE_HOME"]) / "trysquare"
    assert cache.stat().st_mode & 0o777 == 0o600
    _no_metadata_scan(monkeypatch)
    again = _entry_points.scan()
    assert [item.as_list() for item in again] == [item.as_list() for item in first]


def test_a_plugin_installed_after_the_cache_was_written_is_found(
    only_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist_info(only_site, "trysquare-echo", "echo_plugin")
    _entry_points.scan()
    dist_info(only_site, "trysquare-other", "other_plugin")
    assert ("trysquare", "trysquare-other", "trysquare-other") in _names(_entry_points.scan())


def test_a_removed_plugin_is_gone_from_the_next_scan(only_site: Path) -> None:
    dist_info(only_site, "trysquare-echo", "echo_plugin")
    keep = dist_info(only_site, "trysquare-other", "other_plugin")
    assert len(_entry_points.scan()) == 2
    info = keep / "trysquare_echo-1.0.dist-info"
    for file in info.iterdir():
        file.unlink()
    info.rmdir()
    assert _names(_entry_points.scan()) == [("trysquare", "trysquare-other", "trysquare-other")]


def test_entry_points_rewritten_in_place_are_read_again(only_site: Path) -> None:
    dist_info(only_site, "trysquare-echo", "echo_plugin")
    _entry_points.scan()
    entry_points = only_site / "trysquare_echo-1.0.dist-info" / "entry_points.txt"
    with entry_points.open("a", encoding="utf-8") as handle:  # same file, same folder
        handle.write("\n[trysquare.provides]\nmode.echo-mode = echo_plugin\n")
    assert ("trysquare.provides", "mode.echo-mode", "trysquare-echo") in _names(
        _entry_points.scan()
    )


def test_an_eggs_requirements_rewritten_are_read_again(only_site: Path) -> None:
    egg = only_site / "trysquare_egg.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: trysquare-egg\nVersion: 1\n")
    (egg / "entry_points.txt").write_text("[trysquare]\ntrysquare-egg = egg_plugin\n")
    (egg / "requires.txt").write_text("trysquare-core\n")
    assert _entry_points.scan()[0].requires == ("trysquare-core",)
    with (egg / "requires.txt").open("a", encoding="utf-8") as handle:
        handle.write("trysquare-judge\n")
    assert _entry_points.scan()[0].requires == ("trysquare-core", "trysquare-judge")


def _other_distribution(site: Path, entry_points: str | None) -> Path:
    """A distribution that is no plugin of trysquare (with console scripts, say)."""
    info = site / "helper_tool-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: helper-tool\nVersion: 2.0\n")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)
    return info


def test_a_start_marks_only_the_entry_points_file_of_a_distribution_that_is_no_plugin(
    only_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist_info(only_site, "trysquare-echo", "echo_plugin")
    _other_distribution(only_site, "[console_scripts]\nhelper = helper_tool:main\n")
    _entry_points.scan()
    marked: list[str] = []
    mark = _entry_points._mark

    def recording(path: str) -> list[object] | None:
        marked.append(os.path.relpath(path, only_site))
        return mark(path)

    monkeypatch.setattr(_entry_points, "_mark", recording)
    _no_metadata_scan(monkeypatch)
    assert len(_entry_points.scan()) == 1
    assert sorted(marked) == [
        os.path.join("helper_tool-2.0.dist-info", "entry_points.txt"),
        "trysquare_echo-1.0.dist-info",
        os.path.join("trysquare_echo-1.0.dist-info", "METADATA"),
        os.path.join("trysquare_echo-1.0.dist-info", "entry_points.txt"),
    ]


@pytest.mark.parametrize("before", [None, "[console_scripts]\nhelper = helper_tool:main\n"])
def test_a_distribution_becoming_a_plugin_in_place_is_found(
    only_site: Path, before: str | None
) -> None:
    info = _other_distribution(only_site, before)
    assert _entry_points.scan() == []
    with (info / "entry_points.txt").open("a", encoding="utf-8") as handle:  # same folder
        handle.write("\n[trysquare]\nhelper-tool = helper_tool.plugin\n")
    assert _names(_entry_points.scan()) == [("trysquare", "helper-tool", "helper-tool")]


def test_a_plugins_metadata_rewritten_in_place_is_read_again(only_site: Path) -> None:
    dist_info(only_site, "trysquare-echo", "echo_plugin")
    assert _entry_points.scan()[0].version == "1.0"
    metadata = only_site / "trysquare_echo-1.0.dist-info" / "METADATA"
    with metadata.open("r+", encoding="utf-8") as handle:  # same file: only its time moves
        text = handle.read().replace("Version: 1.0", "Version: 1.1")
        handle.seek(0)
        handle.write(text)
    assert _entry_points.scan()[0].version == "1.1"


@pytest.mark.parametrize(
    "content",
    [
        b"\x00not json",
        b"{}",
        b'{"format": 1, "stamp": null, "entry_points": []}',
        b"[1, 2]",
    ],
)
def test_a_corrupt_cache_is_scanned_again_and_replaced(only_site: Path, content: bytes) -> None:
    dist_info(only_site, "trysquare-echo", "echo_plugin")
    _entry_points.scan()
    cache = Path(_entry_points.cache_file())
    cache.write_bytes(content)
    assert _names(_entry_points.scan()) == [("trysquare", "trysquare-echo", "trysquare-echo")]
    assert json.loads(cache.read_text())["format"] == _entry_points.FORMAT


def test_a_cache_naming_a_module_the_distributions_do_not_is_never_believed_when_stale(
    only_site: Path,
) -> None:
    """A forged entry (here: ``os`` as a plugin) with a stamp that no longer holds is dropped."""
    dist_info(only_site, "trysquare-echo", "echo_plugin")
    _entry_points.scan()
    cache = Path(_entry_points.cache_file())
    data = json.loads(cache.read_text())
    data["entry_points"].append(["trysquare", "forged", "os", "forged", "1", []])
    data["stamp"][0] = ["/elsewhere"]
    cache.write_text(json.dumps(data))
    os.chmod(cache, 0o600)
    assert "forged" not in {item.name for item in _entry_points.scan()}


@pytest.mark.parametrize("how", ["group-writable", "symlink", "hard-linked"])
def test_a_cache_file_others_could_have_written_is_not_believed(
    only_site: Path, tmp_path: Path, how: str
) -> None:
    dist_info(only_site, "trysquare-echo", "echo_plugin")
    _entry_points.scan()
    cache = Path(_entry_points.cache_file())
    data = json.loads(cache.read_text())
    data["entry_points"].append(["trysquare", "forged", "os", "forged", "1", []])
    forged = json.dumps(data)
    if how == "group-writable":
        cache.write_text(forged)
        os.chmod(cache, 0o620)
    elif how == "symlink":
        elsewhere = tmp_path / "planted.json"
        elsewhere.write_text(forged)
        os.chmod(elsewhere, 0o600)
        cache.unlink()
        cache.symlink_to(elsewhere)
    else:
        cache.write_text(forged)
        os.chmod(cache, 0o600)
        os.link(cache, tmp_path / "second-name.json")
    assert "forged" not in {item.name for item in _entry_points.scan()}


def test_a_stamp_too_recent_to_trust_writes_no_cache(
    only_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_entry_points, "_SETTLED_SECONDS", 3600.0)
    dist_info(only_site, "trysquare-echo", "echo_plugin")
    assert len(_entry_points.scan()) == 1
    assert not Path(_entry_points.cache_file()).exists()


def test_the_cache_lives_where_the_jail_hides_trysquares_cache() -> None:
    from trysquare import _jail_view

    cache = os.path.realpath(_entry_points.cache_file())
    assert any(cache.startswith(root + os.sep) for root in _jail_view.cache_roots())


def test_plugins_load_a_plugin_installed_after_the_last_start(
    site, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_entry_points, "_SETTLED_SECONDS", 0.0)
    site("trysquare-first", "first_plugin_cli", "")
    first = cli("plugins")  # reads the distributions and writes the cache
    assert first.returncode == 0, first.stderr
    assert Path(_entry_points.cache_file()).is_file()
    assert "trysquare-echo" not in first.stdout
    site("trysquare-echo", "echo_plugin_cli", PLUGIN, provides=("mode.echo-mode",))
    plugins.reset()
    assert "echo-mode" in plugins.modes(["echo-mode"])


def test_a_corrupt_cache_file_costs_no_traceback(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Path(cli.env["XDG_CACHE_HOME"]) / "trysquare"
    cache.mkdir(parents=True, exist_ok=True)
    with monkeypatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", cli.env["XDG_CACHE_HOME"])
        name = Path(_entry_points.cache_file()).name
    (cache / name).write_bytes(b"{\x00")
    os.chmod(cache / name, 0o600)
    done = cli("plugins")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "trysquare-script" in done.stdout


def test_each_import_path_keeps_its_own_file_and_old_ones_go(
    only_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist_info(only_site, "trysquare-echo", "echo_plugin")
    _entry_points.scan()
    first = Path(_entry_points.cache_file())
    monkeypatch.setattr(sys, "path", ["", str(only_site)])  # python -m: the current folder first
    _entry_points.scan()
    second = Path(_entry_points.cache_file())
    assert first != second and first.is_file() and second.is_file()
    scan_metadata = _entry_points._scan_metadata
    _no_metadata_scan(monkeypatch)
    monkeypatch.setattr(sys, "path", [str(only_site)])
    assert len(_entry_points.scan()) == 1  # the first file still holds, read again
    old = time.time() - 31 * 24 * 3600
    os.utime(second, (old, old))
    monkeypatch.setattr(_entry_points, "_scan_metadata", scan_metadata)
    monkeypatch.setattr(sys, "path", [str(only_site), str(only_site / "elsewhere")])
    _entry_points.scan()  # a third import path: its file is written, the month-old one goes
    assert first.is_file() and not second.exists()
