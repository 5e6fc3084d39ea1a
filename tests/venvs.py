"""Fresh virtual environments holding only what a test installs, as a user would.

trysquare's own distributions come from wheels built once per test session (every xdist
worker shares them); third-party dependencies from uv's cache, or the index when the cache
lacks one — never a trysquare distribution from the index.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Every distribution in the repository, by the folder holding its pyproject.toml.
DISTRIBUTION_FOLDERS = sorted(
    folder
    for folder in [ROOT, *ROOT.glob("trysquare_*/"), *ROOT.glob("plugins/*/")]
    if (folder / "pyproject.toml").is_file()
)


def distribution_name(folder: Path) -> str:
    """The name a repository folder's pyproject declares."""
    return tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]


def uv_env() -> dict[str, str]:
    """This environment without the variables that would point uv at the development venv."""
    return {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")
    }


def uv() -> str:
    """uv's path (the test skips, saying why, without it).

    Under ``uv run``, ``UV`` names the uv binary itself: ``uv`` on ``PATH`` may be a shim
    (pyenv's is a shell script costing a dozen processes per call).
    """
    uv: str | None = os.environ.get("UV", "")
    if not os.path.isfile(uv):
        uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (.ci/run installs it)")
    return uv


def build_wheels(folders: Iterable[Path], into: Path) -> None:
    """``uv build --wheel`` of each folder into ``into``, two at a time (two cores), each checked."""
    pending = list(folders)
    running: list[tuple[Path, subprocess.Popen[str]]] = []
    while pending or running:
        while pending and len(running) < 2:
            folder = pending.pop(0)
            running.append((folder, subprocess.Popen(
                [uv(), "build", "--quiet", "--wheel", "-o", str(into), str(folder)], cwd=ROOT,
                env=uv_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )))  # fmt: skip
        folder, process = running.pop(0)
        output, _ = process.communicate(timeout=600)
        assert process.returncode == 0, f"uv build {folder} failed:\n{output}"


def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every distribution of the repository as a wheel (`uv build --all-packages`, as a release
    would build them), built by the first worker that asks.

    The folder sits beside the workers' own temporary folders, under a lock, so a session
    builds each wheel once however many workers install from it.
    """
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "wheelhouse"
    with open(shared / "wheelhouse.lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".complete").exists():
            shutil.rmtree(folder, ignore_errors=True)
            done = subprocess.run(
                [uv(), "build", "--quiet", "--all-packages", "--wheel", "-o", str(folder)],
                cwd=ROOT, env=uv_env(), capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
            assert done.returncode == 0, f"uv build --all-packages failed:\n{done.stderr}"
            (folder / ".complete").touch()
    return folder


def _requirements(wheels: Path) -> dict[str, list[str]]:
    """Each wheel's requirements (extras aside), by distribution name."""
    found: dict[str, list[str]] = {}
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            found[wheel.name.split("-")[0].replace("_", "-")] = [
                line.split(":", 1)[1].strip()
                for line in archive.read(metadata).decode().splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line
            ]
    return found


def third_party_requirements(wheels: Path, names: Iterable[str]) -> list[str]:
    """What the named wheels and the trysquare wheels they require need from elsewhere."""
    requirements = _requirements(wheels)
    pending, seen, found = list(names), set(), set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for requirement in requirements[name]:
            if requirement.startswith("trysquare"):
                pending.append(requirement.split(">")[0].split("=")[0].split("<")[0].strip())
            else:
                found.add(requirement)
    return sorted(found)


def install(venv: Path, wheels: Path, names: Sequence[str], extra: Sequence[str] = ()) -> None:
    """Install the trysquare distributions ``names`` from ``wheels`` (with their trysquare
    dependencies, resolved there alone) and ``extra`` into the environment at ``venv``."""
    python = str(venv / "bin" / "python")

    def uv_run(*args: str, check: bool = True) -> int:
        done = subprocess.run(
            [uv(), *args], cwd=venv.parent, env=uv_env(), capture_output=True, text=True,
            timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0 or not check, f"uv {' '.join(args)} failed:\n{done.stderr}"
        return done.returncode

    third_party = [*third_party_requirements(wheels, names), *extra]
    # Offline from uv's cache when it holds them all; the index otherwise.
    if uv_run(
        "pip", "install", "--quiet", "--offline", "--python", python, *third_party, check=False
    ):
        uv_run("pip", "install", "--quiet", "--python", python, *third_party)
    uv_run(
        "pip",
        "install",
        "--quiet",
        "--no-index",
        "--find-links",
        str(wheels),
        "--python",
        python,
        *names,
    )


class Venv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.bin = path / "bin"

    def env(self, **extra: str) -> dict[str, str]:
        # An activated environment: `python` in a scenario's command is this one.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRYSQUARE_", "PYTEST_"))}
        env.update(VIRTUAL_ENV=str(self.path), PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}")
        env.pop("PYTHONPATH", None)
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # a measured suite needs no plugin
        env.update(extra)
        return env

    def trysquare(
        self, *args: str | Path, cwd: Path, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "trysquare"), *map(str, args)],
            cwd=cwd,
            check=False,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=300,
        )

    def python(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "python"), *args],
            cwd=cwd,
            check=False,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=300,
        )


def build_venv(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    folders: Sequence[str],
    extra: Sequence[str] = (),
) -> Venv:
    """A fresh venv holding the distributions of these repository folders (from the session's
    wheels, with the trysquare distributions they require) and the third-party ``extra``."""
    path = tmp_path_factory.mktemp(name) / "env"
    wheels = wheelhouse(tmp_path_factory)
    subprocess.run(
        [uv(), "venv", "--quiet", "--python", sys.executable, str(path)], env=uv_env(),
        check=True, capture_output=True,
    )  # fmt: skip
    install(path, wheels, [distribution_name(ROOT / folder) for folder in folders], extra)
    return Venv(path)
