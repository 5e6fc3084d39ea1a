"""Small helpers for tests: scenario files and validator scripts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any


def write_scenario(folder: Path, text: str, name: str = "scenario.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def write_script(folder: Path, name: str, body: str, *, executable: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body), encoding="utf-8")
    if executable:
        path.chmod(0o755)
    return path


def scored_run(make_run: Any, tmp_path: Path, extra_tables: str = "") -> Path:
    """One finished run (``make_run``'s ``r1``) and a scenario whose one script validator says
    ``ok = true``, plus ``extra_tables``: the smallest matrix a command can validate."""
    run = make_run("r1")
    run.base({"a.py": "a = 1\n"})
    run.finish()
    write_script(
        tmp_path / "s",
        "score.py",
        """
        import json
        print(json.dumps({"metrics": {"ok": True}}))
    """,
    )
    scenario = """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["ok"]
    """
    return write_scenario(tmp_path / "s", scenario + extra_tables)


def fake_distribution(
    site: Path,
    dist: str,
    module: str,
    source: str,
    *,
    version: str = "1.0",
    requires: tuple[str, ...] = (),
    provides: tuple[str, ...] = (),
) -> Path:
    """Install a plugin the way pip would leave it: a module and a dist-info with an entry point
    (and the ``Requires-Dist`` lines of ``requires``, the ``trysquare.provides`` entry points
    of ``provides``)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return dist_info(site, dist, module, version=version, requires=requires, provides=provides)


def dist_info(
    site: Path,
    dist: str,
    module: str,
    *,
    version: str = "1.0",
    requires: tuple[str, ...] = (),
    provides: tuple[str, ...] = (),
) -> Path:
    """The dist-info pip would leave for ``dist``, whose ``trysquare`` entry point is ``module``
    (importable from elsewhere: a plugin's source folder), declaring what it ``provides``."""
    site.mkdir(parents=True, exist_ok=True)
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {requirement}\n" for requirement in requires),
        encoding="utf-8",
    )
    declared = "".join(f"{name} = {module}\n" for name in provides)
    (info / "entry_points.txt").write_text(
        f"[trysquare]\n{dist} = {module}\n"
        + (f"\n[trysquare.provides]\n{declared}" if provides else ""),
        encoding="utf-8",
    )
    return site


def private_tmp(folder: Path) -> Path:
    """A temporary folder of its own for a nested pytest (its ``TMPDIR``).

    A pytest started in the shared temporary folder removes the oldest
    ``pytest-of-<user>/pytest-N`` folders it finds there, which on a machine that ran the
    suite before are hundreds of megabytes of git repositories: the nested run then took
    anything from 2 s to 43 s.
    """
    tmp = folder / "nested-tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp


def pytest_in(
    folder: Path, cache: Path, test_file: str = "test_validator.py"
) -> subprocess.CompletedProcess[str]:
    """Run ``pytest test_file`` in ``folder`` as a validator author would: a pytest of its own,
    trysquare's fixtures from the installed plugin (autoload on), this suite's settings and
    plugins' variables left out, the heavy unrelated plugins off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRYSQUARE_", "PYTEST_"))}
    env["XDG_CACHE_HOME"] = str(cache)
    env["TMPDIR"] = str(private_tmp(cache.parent))
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:hypothesispytest",
        "-p",
        "no:anyio",
        test_file,
    ]
    # A generous deadline: on a loaded CI machine the interpreter start alone takes seconds.
    return subprocess.run(
        argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def replay_experiment(root: Path, count: int) -> Path:
    """An experiment of ``count`` run folders with no clone, as ``--replay`` loads them: four
    cells, a repetition each, run ``r000000`` first."""
    experiment = root / f"exp{count}"
    for index in range(count):
        folder = experiment / "runs" / f"r{index:06d}"
        folder.mkdir(parents=True)
        (folder / "run.toml").write_text(
            f'cell = "c{index % 4}"\nrepetition = {index}\nrepo = "repo"\nprompt = "prompt.txt"\n'
        )
    return experiment


def replay_runs(root: Path, count: int) -> list[Any]:
    """The runs of :func:`replay_experiment`, loaded as ``--replay`` loads them."""
    from trysquare.runs import discover

    (found,) = discover([replay_experiment(root, count)], replay=True)
    return list(found.runs)


def record_run(folder: Path | str, run_id: str = "r1", cell: str = "c", repo: str = "repo") -> Any:
    """A :class:`trysquare.runs.Run` record of ``folder`` (nothing on disk), for tests of what
    is done with runs rather than of loading them."""
    from trysquare.runs import Run

    return Run(
        dir=folder,
        id=run_id,
        cell=cell,
        repetition=1,
        repo=Path(folder, repo),
        base="HEAD",
        base_commit=None,
        prompt=Path(folder, "prompt.txt"),
        session=None,
        session_format=None,
        trace=None,
        model=None,
        given=(),
        etalon=None,
    )


def threads_started(monkeypatch: Any) -> list[str]:
    """The names of the threads started from now on (``monkeypatch`` undoes the counting)."""
    import threading

    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    return started


def one_run_probes(scenario: Path, experiment: Path, env: dict[str, str], after: str) -> None:
    """Validate the one run under ``experiment`` (its context built), then run ``validate
    --replay --force`` and ``report`` on it, each in ``python -c`` with the code ``after``
    run once the command ended; that code's last printed line must be ``[]`` (what it found
    that should not be there). Each process is built by the same probe: its ``sys.path`` is
    the one the entry-point cache was kept for."""
    probe = f"import sys\nfrom trysquare.cli import main\ncode = main(sys.argv[1:])\n{after}"
    probe += "raise SystemExit(code)\n"
    commands = (
        ["validate", str(scenario), str(experiment), "--no-progress"],
        ["validate", str(scenario), str(experiment), "--no-progress", "--replay", "--force"],
        ["report", str(scenario), str(experiment)],
    )
    for index, command in enumerate(commands):
        done = subprocess.run(
            [sys.executable, "-c", probe, *command],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        if index:  # the first only built the context
            assert done.stdout.strip().splitlines()[-1] == "[]", command
