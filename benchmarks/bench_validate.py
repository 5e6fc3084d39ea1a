#!/usr/bin/env python3
"""validate --replay --force over N runs with a trivial validator, against a shell loop.

The baseline spawns the same validator on the same archived contexts from a
plain shell loop; the ratio is what trysquare's runner adds on top. Prints:

    validate.fresh.jobs1: 1.30x (baseline shell loop 4.10 s over 200 runs; ...)
    validate.replay.jobs1: 1.05x (baseline shell loop 4.10 s over 200 runs)
    validate.replay.jobs2: 0.61x (...)
    validate.startup.confined: 1.04x (python -c pass started plainly ...)

Then the same over an assay validator (``@validator``, what ``trysquare init`` writes), the
loops calling it on the same contexts: warm (served by a warm server, one fork per run) and
cold (``warm = false``) at ``--jobs 1`` against a serial loop and at ``--jobs 2`` against an
``xargs -P2`` loop; rounds interleaved, medians printed:

    validate.assay.warm.jobs1: 0.45x (serial loop 7.10 s over 200 runs; trysquare 3.20 s)

``fresh`` is a first ``validate``: every context built from git, with a cache of its own
(no shadow repository or etalon checkout kept from before). The last figure is what
starting a validator confined (Landlock where the kernel offers it, strays ended) costs
against starting the same ``python -c pass`` with ``subprocess.run``.

``--fresh-only`` prints only the fresh figure: rounds interleaved with the loop, medians of
wall time and of CPU time (user + system of trysquare and everything it started).

Usage: python benchmarks/bench_validate.py [--quick] [--runs N] [--rounds N] [--fresh-only]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _matrix import build_matrix, cold_matrix

TRIVIAL = f"""#!{sys.executable}
import json, sys
context = json.load(open(sys.argv[1]))
print(json.dumps({{"metrics": {{"changed": bool(context["touched"])}}}}))
"""


ASSAY = f"""#!{sys.executable}
from trysquare.assay import Assay, validator


@validator
def evaluate(run: Assay) -> dict:
    return {{"changed": bool(run.touched)}}


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
"""


def build(root: Path, count: int) -> tuple[Path, Path]:
    return build_matrix(root, count, "trivial.py", TRIVIAL)


# An installed trysquare starts from bytecode; with PYTHONDONTWRITEBYTECODE set
# every start would compile every module again and the figure would measure the
# compiler. The untimed first validate writes the bytecode.
def trysquare(*args: str | Path) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "trysquare", *map(str, args)],
        check=True,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    return time.perf_counter() - started


def cpu_of_children() -> float:
    """User + system seconds of every waited-for child so far (theirs and their own children's)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def fresh_only(root: Path, count: int, rounds: int) -> None:
    """A first ``validate`` (a cache of its own each time) against the serial loop, interleaved."""
    import statistics

    scenario, experiment = build(root, count)
    os.environ["XDG_CACHE_HOME"] = str(root / "cache")
    trysquare("validate", scenario, experiment, "--no-progress")  # build and archive contexts
    script = scenario.parent / "trivial.py"
    figures: dict[str, list[tuple[float, float]]] = {"loop": [], "fresh": []}
    for attempt in range(rounds):
        cpu = cpu_of_children()
        wall = shell_loop(experiment, script)
        figures["loop"].append((wall, cpu_of_children() - cpu))
        os.environ["XDG_CACHE_HOME"] = str(root / f"fresh-cache-{attempt}")
        cpu = cpu_of_children()
        wall = trysquare(
            "validate", scenario, experiment, "--force", "--no-progress", "--jobs", "1"
        )
        figures["fresh"].append((wall, cpu_of_children() - cpu))
    wall = {name: statistics.median(w for w, _ in taken) for name, taken in figures.items()}
    cpu = {name: statistics.median(c for _, c in taken) for name, taken in figures.items()}
    print(
        f"validate.fresh.jobs1: {wall['fresh'] / wall['loop']:.2f}x "
        f"(baseline shell loop {wall['loop']:.2f} s over {count} runs; trysquare {wall['fresh']:.2f} s; "
        f"CPU {cpu['fresh']:.2f} s against the loop's {cpu['loop']:.2f} s, "
        f"{cpu['fresh'] / cpu['loop']:.2f}x; median of {rounds} interleaved rounds; "
        f"load average {Path('/proc/loadavg').read_text().split()[0]})"
    )


def shell_loop(experiment: Path, script: Path) -> float:
    contexts = sorted(experiment.glob("runs/*/validation/script/context.json"))
    listing = experiment / "contexts.txt"
    listing.write_text("".join(f"{c}\n" for c in contexts))
    loop = f'while read -r c; do "{script}" "$c" > /dev/null; done < "{listing}"'
    started = time.perf_counter()
    subprocess.run(["sh", "-c", loop], check=True)
    return time.perf_counter() - started


def xargs_loop(experiment: Path, script: Path, jobs: int) -> float:
    listing = experiment / "contexts.txt"
    if not listing.exists():
        contexts = sorted(experiment.glob("runs/*/validation/script/context.json"))
        listing.write_text("".join(f"{c}\n" for c in contexts))
    started = time.perf_counter()
    with listing.open() as given:
        subprocess.run(
            ["xargs", f"-P{jobs}", "-n1", str(script)],
            stdin=given,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return time.perf_counter() - started


def assay(root: Path, count: int, rounds: int) -> None:
    """Warm and cold against the two loops, over an assay validator; medians of interleaved rounds."""
    import statistics

    root.mkdir()
    cold, experiment, script = cold_matrix(root, count, ASSAY)
    scenario = cold.with_name("scenario.toml")
    trysquare("validate", scenario, experiment, "--no-progress")  # build and archive contexts
    figures: dict[str, list[float]] = {}
    # CPU seconds (user + sys of the measured process and its children) beside wall time: on
    # a shared, loaded machine wall time carries the neighbours' load, CPU time much less.
    cpu: dict[str, list[float]] = {}
    measures = {
        "loop.serial": lambda: shell_loop(experiment, script),
        "loop.xargs2": lambda: xargs_loop(experiment, script, 2),
        **{
            f"{kind}.jobs{jobs}": (
                lambda toml=toml, jobs=jobs: trysquare(
                    "validate",
                    toml,
                    experiment,
                    "--replay",
                    "--force",
                    "--no-progress",
                    "--jobs",
                    str(jobs),
                )
            )
            for kind, toml in (("warm", scenario), ("cold", cold))
            for jobs in (1, 2)
        },
    }
    for _ in range(rounds):
        for name, measure in measures.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            figures.setdefault(name, []).append(measure())
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.setdefault(name, []).append(
                after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            )
    median = {name: statistics.median(taken) for name, taken in figures.items()}
    median_cpu = {name: statistics.median(taken) for name, taken in cpu.items()}
    for kind in ("warm", "cold"):
        for jobs, loop, said in (
            (1, "loop.serial", "serial loop"),
            (2, "loop.xargs2", "xargs -P2 loop"),
        ):
            took = median[f"{kind}.jobs{jobs}"]
            print(
                f"validate.assay.{kind}.jobs{jobs}: {took / median[loop]:.2f}x ({said} "
                f"{median[loop]:.2f} s over {count} runs; trysquare {took:.2f} s; "
                f"median of {rounds} interleaved rounds)"
            )
            took_cpu = median_cpu[f"{kind}.jobs{jobs}"]
            print(
                f"validate.assay.{kind}.jobs{jobs}.cpu: {took_cpu / median_cpu[loop]:.2f}x "
                f"({said} {median_cpu[loop]:.2f} s CPU; trysquare {took_cpu:.2f} s CPU, "
                f"{(took_cpu - median_cpu[loop]) / count * 1000:+.1f} ms CPU a run)"
            )
    print(f"load average after: {Path('/proc/loadavg').read_text().strip()}")


def startup(count: int, scratch: Path) -> None:
    from trysquare._process import run_process
    from trysquare.sandbox import Sandbox, protection_line

    argv = [sys.executable, "-c", "pass"]

    def cpu() -> float:
        """User + system seconds of this process and its waited-for children so far."""
        mine = resource.getrusage(resource.RUSAGE_SELF)
        theirs = resource.getrusage(resource.RUSAGE_CHILDREN)
        return mine.ru_utime + mine.ru_stime + theirs.ru_utime + theirs.ru_stime

    def plain() -> None:
        for _ in range(count):
            subprocess.run(argv, check=True)

    def through_run_process(sandbox: Sandbox | None) -> None:
        for _ in range(count):
            run_process(argv, cwd=scratch, timeout=None, sandbox=sandbox)

    # Rounds interleaved, medians of wall and CPU time (a loaded machine's neighbours show in
    # the wall time much more than in the CPU time).
    import statistics

    kinds = {
        "plain": plain,
        "unconfined": lambda: through_run_process(None),
        "confined": lambda: through_run_process(Sandbox([scratch])),
    }
    wall: dict[str, list[float]] = {name: [] for name in kinds}
    used: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(3):
        for name, measure in kinds.items():
            before, started = cpu(), time.perf_counter()
            measure()
            wall[name].append((time.perf_counter() - started) / count * 1000)
            used[name].append((cpu() - before) / count * 1000)
    ms = {name: statistics.median(taken) for name, taken in wall.items()}
    cpu_ms = {name: statistics.median(taken) for name, taken in used.items()}
    print(
        f"validate.startup.confined: {ms['confined'] / ms['plain']:.2f}x (python -c pass by "
        f"subprocess.run {ms['plain']:.1f} ms each; run_process unconfined "
        f"{ms['unconfined']:.1f} ms, confined {ms['confined']:.1f} ms; "
        f"{protection_line().split(' —')[0]})"
    )
    print(
        f"validate.startup.confined.cpu: {cpu_ms['confined'] / cpu_ms['plain']:.2f}x (CPU: "
        f"subprocess.run {cpu_ms['plain']:.2f} ms each; run_process unconfined "
        f"{cpu_ms['unconfined']:.2f} ms, confined {cpu_ms['confined']:.2f} ms; median of 3 "
        f"interleaved rounds; load average {Path('/proc/loadavg').read_text().split()[0]})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument(
        "--assay-only", action="store_true", help="only the assay validator's figures"
    )
    parser.add_argument(
        "--fresh-only", action="store_true", help="only the fresh validate figure, with CPU time"
    )
    args = parser.parse_args()
    count = args.runs or (40 if args.quick else 200)
    with tempfile.TemporaryDirectory() as temp:
        if args.fresh_only:
            fresh_only(Path(temp), count, args.rounds or (2 if args.quick else 3))
            return
        os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
        if args.assay_only:
            assay(Path(temp) / "assay", count, args.rounds or (2 if args.quick else 4))
            startup(count // 4, Path(temp))
            return
        scenario, experiment = build(Path(temp), count)
        trysquare("validate", scenario, experiment, "--no-progress")  # build and archive contexts
        script = scenario.parent / "trivial.py"
        baseline = min(shell_loop(experiment, script) for _ in range(2))
        fresh = []
        for attempt in range(2):
            os.environ["XDG_CACHE_HOME"] = str(Path(temp) / f"fresh-cache-{attempt}")
            fresh.append(
                trysquare(
                    "validate", scenario, experiment, "--force", "--no-progress", "--jobs", "1"
                )
            )
        os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
        print(
            f"validate.fresh.jobs1: {min(fresh) / baseline:.2f}x "
            f"(baseline shell loop {baseline:.2f} s over {count} runs; trysquare {min(fresh):.2f} s)"
        )
        for jobs in (1, 2):
            took = min(
                trysquare(
                    "validate",
                    scenario,
                    experiment,
                    "--replay",
                    "--force",
                    "--no-progress",
                    "--jobs",
                    str(jobs),
                )
                for _ in range(2)
            )
            print(
                f"validate.replay.jobs{jobs}: {took / baseline:.2f}x "
                f"(baseline shell loop {baseline:.2f} s over {count} runs; trysquare {took:.2f} s)"
            )
        assay(Path(temp) / "assay", count, args.rounds or (2 if args.quick else 4))
        startup(count // 4, Path(temp))


if __name__ == "__main__":
    main()
