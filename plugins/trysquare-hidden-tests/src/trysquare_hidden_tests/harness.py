"""The test runner's settings as they are at base: what the run changed in them is set aside.

The hidden tests measure the agent's source, not its test harness. A ``conftest.py`` the
agent added can rewrite every failed report into a pass; a plugin named in its own
``addopts`` can end pytest before the report is written. So the copy the hidden tests run
on gets, before the hidden files are placed:

- every ``conftest.py``, ``pytest.ini``, ``.pytest.ini``, ``pytest.toml`` and
  ``.pytest.toml`` (at any depth) exactly as at base: one the run added is removed, one it changed or deleted is written back;
- the test runner's sections of the files that also hold the project's own metadata
  restored alone: ``pyproject.toml``'s ``[tool.pytest]`` table (``ini_options`` and
  pytest 9's native table), ``setup.cfg``'s ``[tool:pytest]`` (and ``[pytest]``, which
  pytest refuses there), ``tox.ini``'s ``[pytest]``. The rest of those files is the
  agent's work (a dependency a fix needs, an entry point) and stays; a ``pyproject.toml``
  that is not TOML cannot be separated and is restored whole;
- ``sitecustomize.py``, ``usercustomize.py`` and ``*.pth`` files (Python runs them at
  start-up once their folder is on the path, an editable install puts it there) as at
  base;
- no ``__pycache__`` or ``.pytest_cache`` folder: bytecode or a pytest cache the run left
  could stand in for a restored file;
- no link to a folder out of the tree that base does not have: pytest collects through it,
  and the ``conftest.py`` it reaches cannot be compared with base.

:func:`set_aside` returns what it changed, named (``conftest.py (added)``,
``pyproject.toml [tool.pytest.ini_options] (changed)``), for the reasons.
"""

from __future__ import annotations

import os
import shutil
import stat
import tomllib
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import tomli_w

__all__ = ["SetAsideError", "copy_base", "set_aside"]

# Files that are the test runner's settings (or run at start-up) and nothing else: whole.
WHOLE = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",  # pytest 9
        ".pytest.toml",
        "sitecustomize.py",
        "usercustomize.py",
    }
)
# INI files that also hold the project's metadata: only these sections are the runner's.
INI_SECTIONS: Mapping[str, tuple[bytes, ...]] = {
    "setup.cfg": (b"tool:pytest", b"pytest"),
    "tox.ini": (b"pytest",),
}
PYPROJECT = "pyproject.toml"
CACHES = frozenset({"__pycache__", ".pytest_cache"})
MAX_SETTINGS_BYTES = 16 * 1024 * 1024


class SetAsideError(Exception):
    """The copy cannot be given base's settings (a folder on the way is a link out of it)."""


def _relevant(name: str) -> bool:
    return name in WHOLE or name in INI_SECTIONS or name == PYPROJECT or name.endswith(".pth")


def _walk(
    root: Path, *, drop_caches: bool, within: Collection[str] | None = None
) -> tuple[set[str], int, set[str]]:
    """Relative paths of the settings files below ``root`` (links are not followed), how many
    cache folders were removed (with ``drop_caches``), and the links to folders met.

    ``within``: the folders the tree held before ``prepare``; a folder ``prepare`` built
    (``node_modules``, ``.venv``) is its output, left as it made it (its ``.pth`` files are
    what makes an editable install work) and not walked."""
    found: set[str] = set()
    links: set[str] = set()
    dropped = 0
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        for name in list(dirs):
            relative = (here / name).relative_to(root).as_posix()
            if (here / name).is_symlink():  # never in the listing; checked wherever it is
                links.add(relative)
            if within is not None and relative not in within and name not in CACHES:
                dirs.remove(name)
                continue
            if name in CACHES:
                dirs.remove(name)
                if drop_caches:
                    _remove(here / name)
                    dropped += 1
            elif _relevant(name):  # a folder (or a link) named like a settings file
                found.add((here / name).relative_to(root).as_posix())
        found.update((here / n).relative_to(root).as_posix() for n in files if _relevant(n))
    return found, dropped, links


_BASE_LISTINGS: dict[Path, frozenset[str]] = {}


def _base_listing(base: Path) -> frozenset[str]:
    # A materialised base tree is content-addressed and never changes: list it once.
    listing = _BASE_LISTINGS.get(base)
    if listing is None:
        listing = frozenset(_walk(base, drop_caches=False)[0])
        _BASE_LISTINGS[base] = listing
    return listing


def set_aside(
    copy: Path, base: Path, keep: Collection[str] = (), within: Collection[str] | None = None
) -> list[str]:
    """Give ``copy`` the test runner's settings of the ``base`` tree; name what was changed.

    ``keep`` are paths the scenario's hidden files will take (theirs win). ``within``: the
    folders ``copy`` held before ``prepare`` ran in it (``None``: every folder); folders
    ``prepare`` built are left as it made them. Raises :class:`SetAsideError` when a base
    file cannot be written back inside the copy.
    """
    ours, dropped, links = _walk(copy, drop_caches=True, within=within)
    named: list[str] = []
    # pytest collects through a link to a folder: one the run made to a folder out of the tree
    # would bring that folder's conftest.py along, which nothing here can compare with base.
    root = copy.resolve()
    for relative in sorted(links - set(keep)):
        target = (copy / relative).resolve()
        if target == root or root in target.parents:
            continue
        if _entry(copy / relative) != _entry(base / relative):
            _remove(copy / relative)
            named.append(f"{relative} (a link out of the tree)")
    for relative in sorted((ours | _base_listing(base)) - set(keep)):
        name = relative.rpartition("/")[2]
        theirs = base / relative
        _parents_inside(copy, relative)
        if name == PYPROJECT:
            said = _pyproject(copy, relative, theirs)
        elif name in INI_SECTIONS:
            said = _ini(copy, relative, theirs, INI_SECTIONS[name])
        else:
            said = _whole(copy, relative, theirs)
        if said is not None:
            named.append(f"{relative}{said}")
    if dropped:
        named.append(
            f"{dropped} cache folder{'s' if dropped > 1 else ''} (__pycache__, .pytest_cache)"
        )
    return named


# --- one file --------------------------------------------------------------------------------


def _entry(path: Path) -> tuple[str, bytes] | None:
    """What a path holds, comparably: ("file", bytes), ("link", target), ("other", b"")."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "link", os.fsencode(os.readlink(path))
    if stat.S_ISREG(info.st_mode):
        if info.st_size > MAX_SETTINGS_BYTES:  # no settings file is this big: never base's
            return "other", str(info.st_size).encode()
        return "file", path.read_bytes()
    return "other", b""


def _status(mine: object, theirs: object) -> str:
    return " (added)" if theirs is None else " (deleted)" if mine is None else " (changed)"


def _whole(copy: Path, relative: str, theirs: Path) -> str | None:
    mine_entry, base_entry = _entry(copy / relative), _entry(theirs)
    if mine_entry == base_entry:
        return None
    _remove(copy / relative)
    if base_entry is not None:
        _restore(copy, relative, theirs)
    return _status(mine_entry, base_entry)


def _restore(copy: Path, relative: str, theirs: Path) -> None:
    target = _inside(copy, relative)
    if theirs.is_symlink():
        os.symlink(os.readlink(theirs), target)
        return
    shutil.copyfile(theirs, target)
    os.chmod(target, stat.S_IMODE(theirs.stat().st_mode) | stat.S_IWUSR)


def _write(copy: Path, relative: str, data: bytes) -> None:
    target = _inside(copy, relative)
    _remove(target)
    target.write_bytes(data)


def _parents_inside(copy: Path, relative: str) -> None:
    """Refuse a path whose folders in the copy are links (or files): nothing is read, removed
    or written through them, since they may lead out of the copy."""
    folder = copy
    for part in relative.split("/")[:-1]:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise SetAsideError(
                f"the run's tree makes {folder.relative_to(copy).as_posix()} a link or a file, so "
                f"base's {relative} cannot be put back for the hidden tests"
            )


def _inside(copy: Path, relative: str) -> Path:
    """``copy / relative``, its folders made (checked by :func:`_parents_inside` first)."""
    (copy / relative).parent.mkdir(parents=True, exist_ok=True)
    return copy / relative


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


# --- pyproject.toml: [tool.pytest] alone -----------------------------------------------------


def _pytest_table(document: Mapping[str, Any]) -> Any:
    tool = document.get("tool")
    return tool.get("pytest") if isinstance(tool, dict) else None


def _table_name(table: Any) -> str:
    if isinstance(table, dict) and list(table) == ["ini_options"]:
        return "[tool.pytest.ini_options]"
    return "[tool.pytest]"


def _toml(entry: tuple[str, bytes] | None) -> dict[str, Any] | None:
    if entry is None or entry[0] != "file":
        return None
    try:
        return tomllib.loads(entry[1].decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None


def _pyproject(copy: Path, relative: str, theirs: Path) -> str | None:
    mine_entry, base_entry = _entry(copy / relative), _entry(theirs)
    if mine_entry == base_entry:
        return None
    base_doc = _toml(base_entry)
    base_table = None if base_doc is None else _pytest_table(base_doc)
    if mine_entry is None:  # deleted: only base's test-runner table comes back
        if base_table is None:
            return None
        _write(copy, relative, tomli_w.dumps({"tool": {"pytest": base_table}}).encode())
        return f" {_table_name(base_table)} (deleted)"
    mine_doc = _toml(mine_entry)
    if mine_doc is None:  # not TOML (or not a file): nothing can be separated from it
        _remove(copy / relative)
        if base_entry is not None:
            _restore(copy, relative, theirs)
        return " (not readable as TOML: restored whole)" if base_entry else " (added, not TOML)"
    mine_table = _pytest_table(mine_doc)
    if mine_table == base_table:
        return None
    tool = dict(mine_doc.get("tool") or {}) if isinstance(mine_doc.get("tool"), dict) else {}
    tool.pop("pytest", None)
    if base_table is not None:
        tool["pytest"] = base_table
    document = {key: value for key, value in mine_doc.items() if key != "tool"}
    if tool:
        document["tool"] = tool
    try:
        text = tomli_w.dumps(document)
    except (TypeError, ValueError):  # nothing tomllib reads should fail here; if it does, whole
        _remove(copy / relative)
        if base_entry is not None:
            _restore(copy, relative, theirs)
        return " (not separable: restored whole)"
    _write(copy, relative, text.encode())
    shown = _table_name(mine_table if base_table is None else base_table)
    return f" {shown}{_status(mine_table, base_table)}"


# --- setup.cfg and tox.ini: the runner's sections alone --------------------------------------


def _sections(data: bytes, names: tuple[bytes, ...]) -> tuple[bytes, bytes]:
    """``data`` split into (everything else, the named sections), as pytest's ini reader cuts
    sections: a line starting with ``[`` and ending with ``]`` once comments are cut."""
    rest: list[bytes] = []
    runner: list[bytes] = []
    into = rest
    for line in data.splitlines(keepends=True):
        if line.startswith(b"["):
            header = line.split(b"#")[0].split(b";")[0].rstrip()
            if header.endswith(b"]"):
                into = runner if header[1:-1] in names else rest
        into.append(line)
    return b"".join(rest), b"".join(runner)


def _ini(copy: Path, relative: str, theirs: Path, names: tuple[bytes, ...]) -> str | None:
    mine_entry, base_entry = _entry(copy / relative), _entry(theirs)
    if mine_entry == base_entry:
        return None
    if (mine_entry is not None and mine_entry[0] != "file") or (
        base_entry is not None and base_entry[0] != "file"
    ):
        return _whole(copy, relative, theirs)
    mine_rest, mine_runner = _sections(mine_entry[1], names) if mine_entry else (b"", b"")
    base_runner = _sections(base_entry[1], names)[1] if base_entry else b""
    if mine_runner == base_runner:
        return None
    if mine_rest and not mine_rest.endswith(b"\n"):
        mine_rest += b"\n"
    _write(copy, relative, mine_rest + (b"\n" if mine_rest and base_runner else b"") + base_runner)
    shown = " ".join(f"[{n.decode()}]" for n in _names_in(mine_runner or base_runner, names))
    return f" {shown}{_status(mine_runner or None, base_runner or None)}"


def _names_in(runner: bytes, names: tuple[bytes, ...]) -> Iterator[bytes]:
    seen: list[bytes] = []
    for line in runner.splitlines():
        header = line.split(b"#")[0].split(b";")[0].rstrip()
        name = header[1:-1]
        if line.startswith(b"[") and header.endswith(b"]") and name in names and name not in seen:
            seen.append(name)
    return iter(seen or [names[0]])


# --- the base tree as a working copy (the control run) ---------------------------------------


def copy_base(base: Path, dest: Path) -> Path:
    """Copy a materialised base tree (read-only files, shared) into ``dest``, writable."""

    def copy(source: str, target: str) -> None:
        shutil.copyfile(source, target)
        os.chmod(target, stat.S_IMODE(os.stat(source).st_mode) | stat.S_IWUSR)

    shutil.copytree(base, dest, symlinks=True, copy_function=copy)
    return dest
