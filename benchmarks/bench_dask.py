#!/usr/bin/env python3
"""validate over N runs on Dask: a sleeping validator on a LocalCluster, and a CPU-bound one on a
cluster started from its command lines (`dask scheduler`, two single-thread `dask worker`).

The sleeping validator stands in for remote capacity (a suite on another
machine, a judge behind an API): on a two-core machine the cluster's 8 threads
can only win by running more tasks at once, which is what the ratio shows. The
dask time includes starting the LocalCluster. Prints:

    dask.200runs: 3.10x faster than local --jobs 2 (local 51.2 s, dask 16.5 s)
    dask.cluster.cpu.200runs: 1.08x local --jobs 2's time (goal <= 1.15x; local 40.1 s, cluster 43.3 s)

The second figure's validator burns ~0.2 s of CPU; on two cores, two single-thread
workers can at best match ``--jobs 2``: the ratio is the cluster's overhead (the
scheduler, task shipping, result polling). The cluster is started before timing. Beside
the wall time it prints the CPU seconds every process spent (the client and what it waited
for; the scheduler, the workers and their validators, read from ``/proc``), which a loaded
machine disturbs far less than the wall time:

    dask.cluster.cpu.200runs.cpu_seconds: 1.04x local --jobs 2's (local 44.0 s, cluster 45.8 s)

With ``--quiet-cluster`` the command-line cluster is started with the settings the executor
gives its own LocalCluster (``trysquare_dask.executor.QUIET_CLUSTER``, in the README for an
operator's cluster); without it, with Dask's defaults. ``--cpu-only`` skips the first figure.

Usage: python benchmarks/bench_dask.py [--quick] [--runs N] [--quiet-cluster] [--cpu-only]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _matrix import build_matrix

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the cluster launcher lives in tests/
from tests.dask.cli_cluster import CommandLineCluster, quiet_environment

BURNER = f"""#!{sys.executable}
import json, sys, time
context = json.load(open(sys.argv[1]))
end = time.process_time() + 0.2
while time.process_time() < end:
    pass
print(json.dumps({{"metrics": {{"changed": bool(context["touched"])}}}}))
"""

SLEEPER = f"""#!{sys.executable}
import json, sys, time
context = json.load(open(sys.argv[1]))
time.sleep(0.5)
print(json.dumps({{"metrics": {{"changed": bool(context["touched"])}}}}))
"""

# Eight threads in all, in two worker processes: the cluster the issue names.
CLUSTER = ["--executor", "dask", "--executor-option", "workers=2", "--executor-option", "threads=4"]


def build(root: Path, count: int) -> tuple[Path, Path]:
    return build_matrix(root, count, "sleeper.py", SLEEPER)


def validate(scenario: Path, experiment: Path, *extra: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "trysquare",
            "validate",
            str(scenario),
            str(experiment),
            "--no-progress",
            *extra,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def _cpu_of_children() -> float:
    """CPU seconds of every finished child of this process (and theirs)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _cpu_of(pids: list[int]) -> float:
    """CPU seconds of running processes and every live descendant (a nanny's worker), each
    with its finished children (a worker's validators), read from ``/proc``."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, int]] = {}  # pid: (parent, ticks)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile
            stats[int(entry.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))
    tree, grown = set(pids), True
    while grown:
        more = {pid for pid, (parent, _) in stats.items() if parent in tree} - tree
        tree |= more
        grown = bool(more)
    return sum(stats[pid][1] for pid in tree if pid in stats) / ticks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="40 runs instead of 200")
    parser.add_argument("--runs", type=int)
    parser.add_argument("--quiet-cluster", action="store_true", help="the executor's settings")
    parser.add_argument("--cpu-only", action="store_true", help="the cluster's figures only")
    args = parser.parse_args()
    count = args.runs or (40 if args.quick else 200)
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
    if not args.cpu_only:
        wall_on_local_cluster(count)
    cpu_on_command_line_cluster(count, quiet=args.quiet_cluster)
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")


def _cluster_env(quiet: bool) -> dict[str, str]:
    return {**os.environ, **(quiet_environment() if quiet else {})}


def wall_on_local_cluster(count: int) -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        os.environ["XDG_CACHE_HOME"] = str(root / "cache")
        scenario, experiment = build(root, count)
        on_cluster = root / "exp-dask"
        shutil.copytree(experiment, on_cluster, symlinks=True)
        local = validate(scenario, experiment, "--jobs", "2")
        dask = validate(scenario, on_cluster, *CLUSTER)
        done = len(list(on_cluster.glob("runs/*/validation/script.json")))
        assert done == count, f"the cluster recorded {done} of {count} results"
    print(
        f"dask.{count}runs: {local / dask:.2f}x faster than local --jobs 2 "
        f"(local {local:.1f} s, dask {dask:.1f} s)"
    )


def cpu_on_command_line_cluster(count: int, *, quiet: bool) -> None:
    name = "quiet" if quiet else "default"
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        os.environ["XDG_CACHE_HOME"] = str(root / "cache")
        scenario, experiment = build_matrix(root, count, "burner.py", BURNER)
        validate(scenario, experiment, "--jobs", "2")  # contexts built and archived: not timed
        with CommandLineCluster(
            root / "cluster", workers=2, threads=1, env=_cluster_env(quiet)
        ) as cluster:
            on_cluster = ["--executor", "dask", "--executor-option", f"address={cluster.address}"]
            replay = ("--replay", "--force")
            pids = [process.pid for process in cluster.processes]
            locals_, clusters, local_cpu, cluster_cpu = [], [], [], []
            for _ in range(2):  # interleaved: drifting load hits both alike
                before = _cpu_of_children()
                locals_.append(validate(scenario, experiment, *replay, "--jobs", "2"))
                local_cpu.append(_cpu_of_children() - before)
                before = _cpu_of_children() + _cpu_of(pids)
                clusters.append(validate(scenario, experiment, *replay, *on_cluster))
                cluster_cpu.append(_cpu_of_children() + _cpu_of(pids) - before)
    local, dask = min(locals_), min(clusters)
    print(
        f"dask.cluster.{name}.cpu.{count}runs: {dask / local:.2f}x local --jobs 2's time (goal <= 1.15x; "
        f"local {local:.1f} s, spread {max(locals_) - local:.1f} s; cluster {dask:.1f} s, "
        f"spread {max(clusters) - dask:.1f} s)"
    )
    print(
        f"dask.cluster.{name}.cpu.{count}runs.cpu_seconds: "
        f"{min(cluster_cpu) / min(local_cpu):.2f}x "
        f"local --jobs 2's (goal <= 1.15x; local {min(local_cpu):.1f} s, cluster "
        f"{min(cluster_cpu):.1f} s)"
    )


if __name__ == "__main__":
    main()
