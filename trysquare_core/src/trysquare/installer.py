"""``trysquare install`` / ``trysquare uninstall``: plugins into trysquare's own environment.

A trysquare installed as a tool (``pipx``, ``uv tool``) lives in an environment of its
own, which the user's ``pip`` does not reach. These commands install into the
interpreter running trysquare (``sys.executable``): with its ``pip`` when it has one
(``pipx``, ``python -m venv``), else with ``uv pip --python sys.executable`` (``uv tool``
environments hold no pip).

Only trysquare plugins are installed. Core metadata does not carry entry points, so a
dry resolution (``pip install --dry-run --report``) cannot tell a plugin; each
requirement is first installed alone (``--no-deps``) into a scratch folder, and the
``entry_points.txt`` of what arrived must declare the ``trysquare`` group. Only then is
the requirement installed for real, with its dependencies. ``uninstall`` removes only a
distribution that is installed and declares that group (never the core, never a
dependency another tool needs).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from trysquare.errors import TrysquareError, UsageError

__all__ = ["ENTRY_POINT_GROUP", "InstallError", "install", "installer", "uninstall"]

ENTRY_POINT_GROUP = "trysquare"


class InstallError(TrysquareError):
    """pip (or uv) ran and failed: its own output said why (exit 1)."""

    exit_code = 1


def installer() -> list[str]:
    """The command that installs into this interpreter: its pip, else uv's (exit 2 without)."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    uv = shutil.which("uv")
    if uv is not None:
        return [uv, "pip"]
    raise UsageError(
        f"neither pip nor uv can install into {sys.executable}: it has no pip module and no uv "
        "is on PATH (python -m ensurepip, or install uv)"
    )


def _run(command: Sequence[str], *, quiet: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command), check=False, text=True, capture_output=quiet, stdin=subprocess.DEVNULL
    )


def _install_args(tool: list[str], *rest: str) -> list[str]:
    args = [*tool, "install"]
    if tool[1:] == ["pip"]:  # uv pip: name the interpreter, never a project's environment
        args += ["--python", sys.executable]
    else:
        args += ["--disable-pip-version-check"]
    return [*args, *rest]


def _argument(requirement: str) -> str:
    """A local folder or file as an absolute path (what pip and uv read the same way)."""
    path = Path(requirement)
    if requirement.startswith((".", "/", "~")) or (path.exists() and ("/" in requirement)):
        return str(path.expanduser().absolute())
    return requirement


def plugin_entry_points(folder: Path) -> dict[str, list[str]]:
    """``{distribution: [trysquare entry point names]}`` of the distributions in ``folder``."""
    found: dict[str, list[str]] = {}
    for info in sorted(folder.glob("*.dist-info")):
        distribution = metadata.PathDistribution(info)
        name = distribution.metadata["Name"] or info.name[: -len(".dist-info")].rsplit("-", 1)[0]
        points = distribution.entry_points.select(group=ENTRY_POINT_GROUP)
        found[name] = sorted(point.name for point in points)
    return found


def check_plugin(tool: list[str], requirement: str) -> str:
    """Install ``requirement`` alone into a scratch folder; return its distribution's name if
    it declares a ``trysquare`` entry point, else refuse (nothing is installed)."""
    with tempfile.TemporaryDirectory(prefix="trysquare-install-") as scratch:
        done = _run(
            _install_args(tool, "--no-deps", "--target", scratch, "--quiet", requirement),
            quiet=True,
        )
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise InstallError(f"install {requirement}: could not be fetched or built: {last[0]}")
        found = plugin_entry_points(Path(scratch))
    if not found:
        raise InstallError(f"install {requirement}: nothing was installed from it")
    plugins = [name for name, points in found.items() if points]
    if not plugins:
        names = ", ".join(sorted(found))
        raise UsageError(
            f"install {requirement}: {names} is not a trysquare plugin (it declares no entry point "
            f"in the '{ENTRY_POINT_GROUP}' group); nothing was installed"
        )
    return plugins[0]


def install(requirements: Sequence[str], *, upgrade: bool = False) -> list[str]:
    """Install each plugin requirement into this interpreter; every one is checked first."""
    tool = installer()
    arguments = [_argument(requirement) for requirement in requirements]
    names = [check_plugin(tool, argument) for argument in arguments]
    extra = ["--upgrade"] if upgrade else []
    done = _run(_install_args(tool, *extra, *arguments), quiet=False)
    if done.returncode != 0:
        raise InstallError(
            f"install {' '.join(requirements)}: {tool[0]} failed (its output is above)"
        )
    return names


def uninstall(names: Sequence[str]) -> list[str]:
    """Remove installed plugins from this interpreter; refuse anything that is not one."""
    for name in names:
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise UsageError(
                f"uninstall {name}: no distribution named {name} is installed"
            ) from None
        if not distribution.entry_points.select(group=ENTRY_POINT_GROUP):
            raise UsageError(
                f"uninstall {name}: {name} is not a trysquare plugin (it declares no entry "
                f"point in the '{ENTRY_POINT_GROUP}' group); nothing was removed"
            )
    tool = installer()
    if tool[1:] == ["pip"]:
        command = [*tool, "uninstall", "--python", sys.executable, *names]
    else:
        command = [*tool, "uninstall", "--yes", "--disable-pip-version-check", *names]
    done = _run(command, quiet=False)
    if done.returncode != 0:
        raise InstallError(f"uninstall {' '.join(names)}: {tool[0]} failed (its output is above)")
    return list(names)
