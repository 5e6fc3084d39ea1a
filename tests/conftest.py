"""Shared helpers: the CLI in this process or a subprocess, fake installed plugins, built runs."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType

import pytest

from tests import first_collection, scheduling, tmpfs

# First of all, before any temporary file is made: /tmp in memory where the kernel allows it.
TEMPORARY_FILES = tmpfs.enter()


def _cache_bytecode_in_the_environment() -> None:
    """Let this session and every Python it starts keep bytecode, under ``<venv>/pycache``.

    CI machines often set PYTHONDONTWRITEBYTECODE, and `uv sync` compiles nothing by default:
    every test subprocess (trysquare, a validator, a dask worker, a pytest of its own) then
    compiled pytest, hypothesis, dask and trysquare from source — a dask worker took 2.6 s to
    import instead of 1.0 s. A prefix folder keeps the bytecode out of source trees and out of
    the folders the tests compare byte for byte.
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    prefix = Path(sys.prefix, "pycache")
    try:
        prefix.mkdir(exist_ok=True)
    except OSError:
        return  # a read-only interpreter: compile from source as asked
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    sys.dont_write_bytecode = False
    sys.pycache_prefix = str(prefix)
    _compile_what_is_imported()


def _compile_what_is_imported(modules: Iterable[ModuleType] | None = None) -> None:
    """Write the bytecode of the modules imported before bytecode was let be written.

    pytest, its plugins and the standard modules they use were imported from source; every
    xdist worker and test subprocess imports them next. On a fresh environment the workers,
    started together, each compiled them all at once; compiled here first, they find them.
    """
    import importlib.util
    import py_compile

    for module in list(sys.modules.values()) if modules is None else modules:
        source = getattr(module, "__file__", None)
        if not isinstance(source, str) or not source.endswith(".py"):
            continue
        try:
            cached = importlib.util.cache_from_source(source)
        except ValueError:
            continue
        if not os.path.exists(cached):
            with contextlib.suppress(OSError, py_compile.PyCompileError):
                py_compile.compile(source, cfile=cached, doraise=True)


_cache_bytecode_in_the_environment()

from hypothesis import settings

# On CI, property tests explore the same examples every run: a failure there is
# reproducible, never a coin toss. Locally they keep exploring.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

from trysquare import plugins
from trysquare.testing import RunBuilder

# One signing key for the whole session, as a machine has one: each test's cache is its own
# (``XDG_CACHE_HOME`` per test) but holds this key, so that what a module-scoped fixture
# recorded still reads as signed here in the next test. Anything run outside a test (a
# module fixture's set-up) uses the session's own cache, never the user's.
# (This module is imported twice, as `conftest` and as `tests.conftest`, and by every xdist
# worker: the first import's cache is found again through the environment.)
_SESSION_VARIABLE = "TRYSQUARE_TESTS_SESSION_CACHE"
if os.environ.get(_SESSION_VARIABLE):
    _SESSION_CACHE = Path(os.environ[_SESSION_VARIABLE])
else:
    _SESSION_CACHE = Path(tempfile.mkdtemp(prefix="trysquare-test-cache."))
    os.environ[_SESSION_VARIABLE] = str(_SESSION_CACHE)
    atexit.register(shutil.rmtree, _SESSION_CACHE, True)
    _key = _SESSION_CACHE / "trysquare" / "suite.key"
    _key.parent.mkdir(parents=True)
    _key.write_bytes(secrets.token_hex(32).encode("ascii"))
    _key.chmod(0o600)
_SESSION_KEY = (_SESSION_CACHE / "trysquare" / "suite.key").read_bytes()


def share_signing_key(cache: Path) -> Path:
    """Put the session's signing key in the trysquare cache below ``cache`` (an
    ``XDG_CACHE_HOME``) unless one is there; return ``cache``."""
    key = cache / "trysquare" / "suite.key"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_bytes(_SESSION_KEY)
        key.chmod(0o600)
    return cache


# The user's own cache folder, before the line below hides it: where a test keeps what stays
# valid from one suite run to the next (pip's downloads), as uv keeps its own in ~/.cache/uv.
os.environ.setdefault(
    "TRYSQUARE_TESTS_USER_CACHE",
    os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"),
)
os.environ["XDG_CACHE_HOME"] = str(_SESSION_CACHE)

from tests.helpers import fake_distribution

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


class Result:
    """What a CLI call left: the shape of ``subprocess.CompletedProcess`` tests read."""

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str) -> None:
        self.args = args
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    def __repr__(self) -> str:
        return f"Result(args={self.args!r}, returncode={self.returncode!r})"


class CliProcess:
    """Run ``python -m trysquare`` as a user would, in a subprocess.

    For the tests where the process is the point: signals, the console script's exit
    code, ``--debug`` tracebacks, confinement of trysquare itself, interruption.
    """

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(
        self,
        *args: str | Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trysquare", *map(str, args)],
            cwd=cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


class Cli(CliProcess):
    """Run ``trysquare.cli.main(argv)`` in this process, as a subprocess would see it.

    Starting an interpreter per call was most of the suite's time. Each call gets
    the environment, working directory and ``PYTHONPATH`` entries (fake installed
    plugins) it asks for, a freshly loaded plugin manager and captured streams;
    everything it changed in this process is put back afterwards. ``timeout`` is
    accepted for the call shape and ignored: a hang shows as pytest's own timeout.
    """

    def __call__(  # type: ignore[override]
        self,
        *args: str | Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
    ) -> Result:
        return run_in_process([str(arg) for arg in args], cwd=cwd, env={**self.env, **(env or {})})


def run_in_process(argv: list[str], *, cwd: Path | None, env: Mapping[str, str]) -> Result:
    """``trysquare ARGV`` through :func:`trysquare.cli.main`, isolated as a process would be."""
    from trysquare.cli import main

    ours = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    roots = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in ours]
    extra = [p for p in roots if p not in sys.path]
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_signals = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    saved_modules = set(sys.modules)
    out, err = _stream(), _stream()
    sys.path[:0] = extra
    importlib.invalidate_caches()  # a plugin written just now must be found, by path and entry point
    os.environ.clear()
    os.environ.update(env)
    plugins.reset()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as stop:  # argparse's --help and --version
                code = _exit_code(stop.code, err)
            except BaseException:  # --debug lets it through: the interpreter would print it
                traceback.print_exc(file=err)
                code = 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
        for path in extra:
            sys.path.remove(path)
        # A fake plugin module of the same name may hold other code in the next test.
        for name in set(sys.modules) - saved_modules:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if any(origin.startswith(path) for path in roots):
                del sys.modules[name]
        plugins.reset()
    return Result(["trysquare", *argv], code, _text(out), _text(err))


def _stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(
        io.BytesIO(), encoding="utf-8", errors="surrogateescape", write_through=True
    )


def _text(stream: io.TextIOWrapper) -> str:
    # As subprocess.run(text=True) reads a pipe: the locale's codec, universal newlines.
    data = stream.buffer.getvalue()  # type: ignore[attr-defined]
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace").read()


def _exit_code(code: object, err: io.TextIOWrapper) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)
    return 1


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """The CLI, called in this process (see :class:`Cli`)."""
    return Cli(_cli_env(tmp_path))


@pytest.fixture
def cli_process(tmp_path: Path) -> CliProcess:
    """The CLI in a real subprocess, where the process itself is what a test shows."""
    return CliProcess(_cli_env(tmp_path))


def _cli_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(share_signing_key(tmp_path / "cache"))
    env.pop("TRYSQUARE_LOAD_PLUGINS", None)
    env.pop("TRYSQUARE_BLOCK_PLUGINS", None)
    return env


@pytest.fixture(autouse=True)
def _no_worker_left_counted() -> Iterator[None]:
    """A thread said to be a pool's worker is said to have ended: how many run decides whether
    background work waits for their starts (:mod:`trysquare._start_first`), in later tests too."""
    from trysquare import _start_first

    counted = _start_first._workers  # the count itself, whatever a test puts in its place
    before = counted[0]
    yield
    left = counted[0]
    counted[0] = before
    assert left == before, "worker_thread() was called without its worker_ended()"


@pytest.fixture(autouse=True)
def _no_cgroup_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests set the cores through the CPU affinity: the quota of the machine running the suite
    (a CI container's) must not cap them. ``tests/core/test_cpu_quota.py`` sets quotas itself."""
    from trysquare import _pool

    monkeypatch.setattr(_pool, "_cgroup_quota", lambda: None)


@pytest.fixture(autouse=True)
def _fresh_plugins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test loads plugins anew, and its etalon cache is its own."""
    cache = share_signing_key(tmp_path / "cache")
    share_entry_point_scan(cache)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    plugins.reset()


_SCANNED_FOR_SHARING: set[str] = set()


def share_entry_point_scan(cache: Path) -> None:
    """Put the session's scan of this process's installed entry points in the trysquare cache
    below ``cache``, as a second start finds the first one's.

    Each test's cache is its own, so each test's first in-process command read every installed
    distribution's metadata again, though the import path and the distributions were the same.
    The copy is the file trysquare wrote, checked by trysquare as any cache file (its stamp: the
    import path and each distribution's metadata files); a test adding a distribution or a
    folder to the path gets no copy that fits and scans, as before. Scanned once per session
    and import path, in the session's own cache.
    """
    from trysquare import _entry_points

    name = Path(_entry_points.cache_file()).name  # names the interpreter and the import path
    shared = _SESSION_CACHE / "trysquare" / name
    if not shared.is_file() and name not in _SCANNED_FOR_SHARING:
        _SCANNED_FOR_SHARING.add(name)  # once: a stamp too recent to write is not retried
        saved = os.environ.get("XDG_CACHE_HOME")
        os.environ["XDG_CACHE_HOME"] = str(_SESSION_CACHE)
        try:
            _entry_points.scan()  # writes the file, unless a distribution is too new to stamp
        finally:
            if saved is None:
                os.environ.pop("XDG_CACHE_HOME", None)
            else:
                os.environ["XDG_CACHE_HOME"] = saved
    if not shared.is_file():
        return
    target = cache / "trysquare" / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared, target)  # a copy: trysquare believes no file with two names
        target.chmod(0o600)


@pytest.fixture
def site(tmp_path: Path, cli: Cli, cli_process: CliProcess) -> Callable[..., Path]:
    """Add fake installed plugins to the CLI's path (in this process or a subprocess)."""
    folder = tmp_path / "site"

    def add(
        dist: str,
        module: str,
        source: str,
        *,
        requires: tuple[str, ...] = (),
        provides: tuple[str, ...] = (),
    ) -> Path:
        fake_distribution(folder, dist, module, source, requires=requires, provides=provides)
        for runner in (cli, cli_process):
            runner.env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(folder), runner.env.get("PYTHONPATH")])
            )
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        importlib.invalidate_caches()
        return folder

    yield add
    if str(folder) in sys.path:
        sys.path.remove(str(folder))
    # The next test's fake plugin may reuse a module name with other code.
    for name, module in list(sys.modules.items()):
        if (getattr(module, "__file__", None) or "").startswith(str(folder)):
            del sys.modules[name]


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., RunBuilder]:
    """A run builder under ``tmp_path/exp``: call ``.base(...)``, change ``.repo``, ``.finish()``."""

    def make(run_id: str = "r1", **kwargs: object) -> RunBuilder:
        return RunBuilder(tmp_path / "exp" / "runs" / run_id, **kwargs)  # type: ignore[arg-type]

    return make


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: half again as many workers as cores.

    A worker spends about a quarter of its time waiting (a process starting, git, the
    disk), so one worker per core leaves the cores idle that long: on two cores, three
    workers ran the suite in 158 s against 171 s (four: 161 s).
    """
    return max(1, (os.cpu_count() or 1) * 3 // 2)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> object:
    """On an xdist worker, collect after the first worker of a fresh checkout has compiled
    the bytecode everyone imports (tests/first_collection.py)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return (yield)
    with first_collection.collecting(first_collection.bytecode_home()):
        return (yield)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep the users of one expensive shared fixture on one xdist worker.

    Tests are spread one by one over the workers (``--dist loadgroup``), which
    balances a slow file across them; but a module- or session-scoped fixture of
    the suite (a browser, a built virtual environment) would then be built once
    per worker. Its users are grouped instead, so it is built once. The units are
    then handed out longest first.
    """
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name, definitions in info.name2fixturedefs.items():
            shared = [d for d in definitions if d.scope in ("module", "session") and d.baseid]
            if shared:
                scope = shared[-1].scope
                group = (
                    f"{shared[-1].baseid}::{name}"
                    if scope == "session"
                    else item.nodeid.split("::")[0]
                )
                item.add_marker(pytest.mark.xdist_group(group))
                break
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # The units longest first (tests/scheduling.py), in the order pytest-xdist reads them
        # (`--no-loadscope-reorder`): no worker left alone at the end with a long one. Without
        # workers, collection order: a module's tests stay together for the folder loops.
        items[:] = scheduling.longest_first(items, scheduling.load_durations())


def pytest_unconfigure(config: pytest.Config) -> None:
    """An xdist worker ends without running ``atexit`` handlers: run them while it still can.

    trysquare removes the scratch folders it keeps for reuse, and the run builders their
    template repositories, at exit; on a worker they stayed in the temp folder (two
    folders per worker per suite run, found accumulating in /tmp).
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import atexit

        atexit._run_exitfuncs()  # runs each once and clears them


def pytest_report_header(config: pytest.Config) -> str:
    """Where this session's temporary files are (tests/tmpfs.py): in memory or on the disk."""
    return TEMPORARY_FILES
