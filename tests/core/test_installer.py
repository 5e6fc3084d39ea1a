"""``trysquare install`` / ``uninstall``: plugins into trysquare's own interpreter, nothing else.

Each test makes a fresh environment that sees this checkout's packages (a ``.pth`` adding the
development site folder) and runs ``python -m trysquare`` there, so ``sys.executable`` — where
installs go — is the fresh one: once without pip (``uv venv``: the uv path, as in a ``uv
tool`` environment), once with it (``uv venv --seed``, pip inside: the pip path, as under pipx
or ``python -m venv``). The plugins are wheels written here (no build backend, no index needed).
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.venvs import uv, uv_env

pytestmark = pytest.mark.slow


def wheel(folder: Path, name: str, *, plugin: bool) -> Path:
    """A one-module wheel; with ``plugin``, a ``trysquare`` entry point naming the module."""
    module = name.replace("-", "_")
    dist_info = f"{module}-0.1.0.dist-info"
    files = {
        f"{module}/__init__.py": '"""A plugin made by a test."""\n',
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n",
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    if plugin:
        files[f"{dist_info}/entry_points.txt"] = f"[trysquare]\n{name} = {module}\n"
    record = f"{dist_info}/RECORD"
    files[record] = "".join(f"{path},,\n" for path in [*files, record])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{module}-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


class Env:
    def __init__(self, root: Path, *, with_pip: bool) -> None:
        self.path = root / ("pip-env" if with_pip else "uv-env")
        # `--seed` puts pip in, as `python -m venv` does, from uv's cache: ensurepip unpacks and
        # byte-compiles pip from its bundled wheel each time (tests/test_install.py has the
        # `python -m venv` environment itself).
        seed = ["--seed"] if with_pip else []
        subprocess.run([uv(), "venv", "--quiet", *seed, "--python", sys.executable, str(self.path)],
                       check=True, capture_output=True, env=uv_env())  # fmt: skip
        self.python = self.path / "bin" / "python"
        found = subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        self.site = Path(found.stdout.strip())
        # This checkout's packages (editable installs included), after the env's own.
        development = site.getsitepackages()[0]
        (self.site / "zz_development.pth").write_text(
            f"import site; site.addsitedir({development!r})\n", encoding="utf-8"
        )
        self.env = {k: v for k, v in uv_env().items() if not k.startswith(("TRYSQUARE_", "PYTHON"))}
        self.env["XDG_CACHE_HOME"] = str(root / "cache")
        self.env["PATH"] = os.pathsep.join([str(Path(uv()).parent), self.env.get("PATH", "")])

    def trysquare(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), "-m", "trysquare", *map(str, args)], env=self.env,
            cwd=self.path.parent, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    def has(self, module: str) -> bool:
        return (self.site / module).is_dir()


@pytest.mark.parametrize("with_pip", [False, True], ids=["uv", "pip"])
def test_install_lists_the_plugin_and_uninstall_removes_it(tmp_path: Path, with_pip: bool) -> None:
    env = Env(tmp_path, with_pip=with_pip)
    done = env.trysquare("install", wheel(tmp_path / "wheels", "trysquare-pebble", plugin=True))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"installed into {env.python}: trysquare-pebble" in done.stdout
    # This trysquare runs from the checkout: the next `uv sync` would undo the install.
    assert "the next `uv sync` undoes this install" in done.stderr
    assert env.has("trysquare_pebble")
    listed = env.trysquare("plugins")
    assert "trysquare-pebble 0.1.0" in listed.stdout, listed.stdout + listed.stderr

    done = env.trysquare("uninstall", "trysquare-pebble")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not env.has("trysquare_pebble")
    assert "trysquare-pebble" not in env.trysquare("plugins").stdout


def test_a_package_that_is_not_a_plugin_is_refused_and_nothing_installed(tmp_path: Path) -> None:
    env = Env(tmp_path, with_pip=False)
    done = env.trysquare("install", wheel(tmp_path / "wheels", "gravel-utils", plugin=False))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "gravel-utils is not a trysquare plugin" in done.stderr, done.stderr
    assert "nothing was installed" in done.stderr and "Traceback" not in done.stderr
    assert not env.has("gravel_utils")


def test_uninstall_refuses_what_is_not_a_plugin(tmp_path: Path) -> None:
    env = Env(tmp_path, with_pip=False)
    done = env.trysquare("uninstall", "attrs")
    assert done.returncode == 2
    assert "uninstall attrs: attrs is not a trysquare plugin" in done.stderr
    done = env.trysquare("uninstall", "trysquare-no-such-plugin")
    assert done.returncode == 2 and "no distribution named trysquare-no-such-plugin" in done.stderr
