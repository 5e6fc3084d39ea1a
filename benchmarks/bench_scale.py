#!/usr/bin/env python3
"""``validate --replay --force`` and ``report`` per run at 1,000, 10,000 and 100,000 runs.

One small real git run is built and validated (its context archived). A block of 1,000
copies of it is made once, outside the experiment, and the experiment grows by whole
blocks: one ``cp -a --reflink=auto`` of that block (a real copy or a reflink, never a hard
link: trysquare refuses hard-linked files in a run), then each copy renamed to an id of its
own (a run's id is its folder's name) and given a repetition of its own (its cell is the
block's: ``c<index % 4>``).

A result is signed for the run it belongs to (its id, cell and repetition), so each copy's
result is signed again here, with trysquare's own signing (``results.sign_result``, written
as ``results.write_result`` writes it): the same bytes an untimed ``validate --replay``
would have written for that copy, without paying a validator per run to get them. The
signing key is the one in this benchmark's own cache (``XDG_CACHE_HOME``), which every
timed command uses. Copies are made from the pristine block, never from runs a timed
command has validated: their history lines are signed for the runs they came from.

Each copy's recorded work (``.trysquare/work.json``) is brought up to date as the first
``validate`` of a moved run does (its picture names the copy's own inodes), with trysquare's own
check, so that the timed commands measure re-scoring runs validated in place; the benchmark
stops if a timed ``validate`` recorded a run's work again.

At each size, each in a process of its own, ``validate --replay --force`` (every result
replaced) and ``report`` are timed, with the peak resident memory of the trysquare process
(its validators apart) and the CPU seconds (user + system) of it and its children. Goal:
time per run flat within 10% from the smallest size to the largest, memory <= 100 MiB at
100,000. Every size is measured alike: a first take reads the runs (printed as ``.first``,
with what it read from disk), then the timed take (a command taking under ten seconds is
timed five times, and its median take kept). Prints one line per command and size as it goes, then:

    scale.validate: 1.04x time per run from 1000 to 100000 runs (1.02x CPU; goal <= 1.10x); 61 MiB
    at 100000 (goal <= 100 MiB at 100000)

Usage: python benchmarks/bench_scale.py [--sizes 1000,10000,100000] [--jobs N] [--quick]
       [--keep FOLDER] [--drop-caches] [--pause-damon]
(``--quick``: 1,000 and 2,000 runs. Each run is about 200 KB on disk (17 GB at 100,000, more
than a small machine keeps in its page cache: there the commands read runs from disk, which
the ``.kernel`` lines show; a machine may also drop what it cached minutes ago with memory
free, which ``bench_page_cache.py`` shows); copies are built at about 10 ms a run; a ``validate --replay
--force`` costs what a validator start costs, about 6 ms a run at two jobs, so 100,000 runs
take about ten minutes per validate, twice.)

With ``--drop-caches`` the first take reads every run from disk: half an hour or more at
100,000 runs on a slow disk. ``--pause-damon`` (root only) turns every running DAMON kdamond
of the sysfs interface off while the sizes are measured and on again after: a DAMON scheme
that pages out memory left untouched for a while evicts runs between the first, untimed take
and the timed one, which then reads them from disk again, so only with it paused does the
figure measure trysquare alone. Without the flag, a run as root prints a ``scale.damon`` line
when such a scheme runs. The goal lines print before the runs are removed, which takes many
minutes at 100,000 runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from _matrix import MEASURE, build_matrix
from bench_page_cache import KDAMONDS, damon_pageout
from trysquare import _atomic, clone_guard, results, runs

BLOCK = 1000  # a multiple of 4: a copy's cell (c<index % 4>) is its block's
VALIDATOR = '#!/bin/sh\necho \'{"metrics": {"changed": true}}\'\n'
NAME = "script"  # the validator's name in build_matrix's scenario


# The kernel's memory-pressure counters read around each command (system-wide: the machine
# should be otherwise idle): pages scanned to reclaim memory, slab objects (inodes, dentries)
# scanned to shrink their caches, and file pages read again after being evicted.
PRESSURE = ("pgscan_kswapd", "pgscan_direct", "slabs_scanned", "workingset_refault_file")


def pressure() -> dict[str, int]:
    with open("/proc/vmstat", encoding="ascii") as vmstat:
        counters = dict(line.split() for line in vmstat)
    return {name: int(counters.get(name, 0)) for name in PRESSURE}


class Measured:
    """One trysquare command's wall seconds, CPU seconds (it and its children; user and
    system apart), peak MiB (the trysquare process), blocks read from disk, the kernel's
    memory-pressure counters over it and the last line it printed."""

    def __init__(
        self,
        took: float,
        user: float,
        system: float,
        peak: float,
        read_kib: float,
        kernel: dict[str, int],
        last: str,
    ) -> None:
        self.took, self.user, self.system, self.peak = took, user, system, peak
        self.cpu = user + system
        self.read_kib, self.kernel, self.last = read_kib, kernel, last


def measure(*args: str | Path) -> Measured:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    counted = pressure()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )
    kernel = {name: value - counted[name] for name, value in pressure().items()}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = [line for line in done.stderr.splitlines() if line.startswith("MEASURE ")]
    if not found:
        raise SystemExit(f"{args[0]} failed: {done.stderr.strip()[-500:]}")
    _, took, peak = found[-1].split()
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return Measured(
        float(took),
        after.ru_utime - before.ru_utime,
        after.ru_stime - before.ru_stime,
        float(peak),
        (after.ru_inblock - before.ru_inblock) / 2,  # 512-byte blocks
        kernel,
        last,
    )


# A command that takes less than this is timed again (SHORT_TAKES in all) and its median take
# kept: a take of a second or so is mostly the machine's noise, and it is the baseline the
# largest size is divided by.
SHORT_SECONDS = 10.0
SHORT_TAKES = 5


def drop_page_cache() -> None:
    """Write the dirty pages out and drop the machine's clean page cache, dentries and inodes
    (root only): what stays cached afterwards is what the commands themselves read."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as drop:
            drop.write("3\n")
    except OSError as error:
        raise SystemExit(f"--drop-caches: /proc/sys/vm/drop_caches: {error.strerror}") from None


DROP_CACHES = False  # set by --drop-caches


def say_damon() -> None:
    """A line when a DAMON scheme pages memory out (seen as root only: its files are root's).

    Between the takes at 100,000 runs such a scheme evicts runs the take before read, and the
    timed take reads them from disk again (its ``.kernel`` line shows how much)."""
    if (damon := damon_pageout()) is not None:
        print(f"scale.damon: a DAMON scheme runs that {damon} (--pause-damon)", flush=True)


@contextmanager
def damon_paused() -> Iterator[None]:
    """Every kdamond DAMON's sysfs interface shows running is turned off while the block runs,
    and on again after it, whatever ends it (root only; a kdamond of a kernel module such as
    ``damon_reclaim`` is not there, and stays as it is)."""
    paused: list[Path] = []
    # Set first: a SIGTERM while they are being turned off turns those off already on again.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for state in sorted(KDAMONDS.glob("*/state")):
            try:
                if state.read_text(encoding="ascii").strip() != "on":
                    continue
                state.write_text("off\n", encoding="ascii")
            except OSError as error:
                raise SystemExit(f"--pause-damon: {state}: {error.strerror} (root only)") from None
            paused.append(state)
        named = ", ".join(str(state) for state in paused) or "none was running"
        print(f"scale.damon: paused for the benchmark: {named}", flush=True)
        yield
    finally:
        # Each one tried, whatever the one before it did; SIGTERM ignored meanwhile, so that a
        # second one cannot stop this half-way.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        left_off = []
        for state in paused:
            try:
                state.write_text("on\n", encoding="ascii")
            except OSError as error:
                left_off.append(f"{state}: {error.strerror}")
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        if left_off:
            print(f"scale.damon: left off, turn on by hand: {'; '.join(left_off)}", flush=True)


def measure_steadily(*args: str | Path) -> tuple[Measured, Measured]:
    """A first take, untimed for the figure, then :func:`measure` again, or for a short command
    the median of :data:`SHORT_TAKES` more takes: (the first, the one kept).

    The first take finds the page cache as the copies left it: at a size the machine can keep
    in memory the runs are there, at one it cannot the first blocks written are gone. Each size
    is timed after a take has read its runs, so that every size is measured alike; the first
    take is printed too. With ``--drop-caches`` the first take starts from an empty page cache
    at every size, so that the timed ones find cached only what the command reads (a tree
    bigger than the machine's memory is otherwise read from disk again, in part, every take).
    """
    if DROP_CACHES:
        drop_page_cache()
    first = measure(*args)
    takes = [measure(*args)]
    if takes[0].took < SHORT_SECONDS:
        takes += [measure(*args) for _ in range(SHORT_TAKES - 1)]
    return first, sorted(takes, key=lambda take: take.took)[len(takes) // 2]


class _Identity:
    """Whose result a copy's is (what :func:`results.sign_result` binds)."""

    def __init__(self, id: str, cell: str, repetition: int) -> None:
        self.id, self.cell, self.repetition = id, cell, repetition


def make_own(run_dir: Path, index: int) -> None:
    """Give a copied run (already named ``run_dir``) the repetition ``index`` and its result
    signed for it."""
    run_toml = run_dir / "run.toml"
    text = run_toml.read_text(encoding="utf-8")
    text = re.sub(r'(?m)^cell = ".*"$', f'cell = "c{index % 4}"', text)
    text = re.sub(r"(?m)^repetition = \d+$", f"repetition = {index}", text)
    run_toml.write_text(text, encoding="utf-8")
    result = run_dir / "validation" / f"{NAME}.json"
    document = json.loads(result.read_bytes())
    signed = results.sign_result(_Identity(run_dir.name, f"c{index % 4}", index), NAME, document)
    result.write_bytes(_atomic.encode(_atomic.dump_json(signed)))
    # The copy's recorded work still pictures the template's clone (other inodes): the first
    # validate of a copy would hash its work again and record the new picture, as for any
    # moved run. Done here with trysquare's own check, so the timed commands see each copy
    # as a run already validated in place.
    picture = clone_guard.picture_clone(runs.load_run(run_toml, replay=True))
    if picture is None or picture.problem is not None:
        raise SystemExit(f"{run_dir}: its copied clone was not recognised as its recorded work")


def pristine_block(template: Path, where: Path) -> Path:
    """``BLOCK`` copies of ``template`` in ``where``/block, named ``p000000`` .. (renamed as
    each block is placed): the block doubled by one ``cp -a`` at a time."""
    block = where / "block"
    block.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(template), str(block / "p000000")], check=True)
    have = 1
    while have < BLOCK:
        double = where / "double"
        subprocess.run(["cp", "-a", "--reflink=auto", str(block), str(double)], check=True)
        for slot in range(have):
            if have + slot < BLOCK:
                (double / f"p{slot:06d}").rename(block / f"p{have + slot:06d}")
        shutil.rmtree(double)
        have = min(2 * have, BLOCK)
    return block


def grow(experiment: Path, block: Path, have: int, want: int) -> None:
    """Add runs ``have`` .. ``want - 1`` (both multiples of ``BLOCK``), a block at a time."""
    experiment.mkdir(exist_ok=True)
    for start in range(have, want, BLOCK):
        target = experiment / f"b{start // BLOCK:04d}"
        subprocess.run(["cp", "-a", "--reflink=auto", str(block), str(target)], check=True)
        for slot in range(BLOCK):
            index = start + slot
            run_dir = (target / f"p{slot:06d}").rename(target / f"r{index:06d}")
            make_own(run_dir, index)


def print_summary(figures: dict[int, dict[str, Measured]], sizes: list[int]) -> None:
    """The goal lines: time per run at the largest size against the smallest, and the peak."""
    small, big = sizes[0], sizes[-1]
    for name in ("validate", "report"):
        per_small = figures[small][name].took / small
        per_big = figures[big][name].took / big
        cpu_small = figures[small][name].cpu / small
        cpu_big = figures[big][name].cpu / big
        print(
            f"scale.{name}: {per_big / per_small:.2f}x time per run from {small} to {big} runs "
            f"({cpu_big / cpu_small:.2f}x CPU; goal <= 1.10x); {figures[big][name].peak:.0f} MiB "
            f"at {big} (goal <= 100 MiB at 100000)",
            flush=True,
        )
        if big > small and big < 100_000:
            # What each further run added to the peak; the line it draws to 100,000 runs is
            # an estimate (the peak is not quite linear in the runs), never a measurement.
            grown = figures[big][name].peak - figures[small][name].peak
            per_run = grown * 1024 / (big - small)
            at_100k = figures[big][name].peak + per_run * (100_000 - big) / 1024
            print(
                f"scale.{name}.memory: {per_run:.2f} KiB more peak a run from {small} to {big} "
                f"runs; drawn on, about {at_100k:.0f} MiB at 100000 (an estimate, not measured)",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma list, ascending")
    parser.add_argument("--quick", action="store_true", help="1,000 and 2,000 runs")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="build in this (new) folder and keep it")
    parser.add_argument(
        "--drop-caches",
        action="store_true",
        help="drop the machine's page cache before each command's first take (root only)",
    )
    parser.add_argument(
        "--pause-damon",
        action="store_true",
        help="turn running DAMON kdamonds off while it runs, on again after (root only)",
    )
    args = parser.parse_args()
    global DROP_CACHES
    DROP_CACHES = args.drop_caches
    sizes = sorted(int(size) for size in ("1000,2000" if args.quick else args.sizes).split(","))
    if any(size % BLOCK for size in sizes):
        raise SystemExit(f"--sizes: each size must be a multiple of {BLOCK}")
    with open("/proc/loadavg", encoding="ascii") as loadavg:
        print(f"scale: load average {loadavg.read().strip()}", flush=True)
    figures: dict[int, dict[str, Measured]] = {}
    if not args.pause_damon:
        say_damon()
    with tempfile.TemporaryDirectory() as temp:
        root = args.keep or Path(temp)
        root.mkdir(parents=True, exist_ok=True)
        os.environ["XDG_CACHE_HOME"] = str(root / "cache")
        scenario, seed = build_matrix(root, 1, "changed.sh", VALIDATOR)
        measure("validate", scenario, seed, "--no-progress")  # the context built and archived
        block = pristine_block(seed / "runs" / "r0000", root / "pristine")
        experiment = root / "scale"
        have = 0
        # Paused for the measuring only: DAMON is on again before the runs are removed,
        # which a kill during that long removal would otherwise leave it off.
        with damon_paused() if args.pause_damon else nullcontext():
            for size in sizes:
                started = time.perf_counter()
                grow(experiment, block, have, size)
                have = size
                built = time.perf_counter() - started
                sample = experiment / f"b{(size - 1) // BLOCK:04d}" / f"r{size - 1:06d}"
                recorded = (sample / clone_guard.WORK_FILE).read_bytes()
                first_validate, validate = measure_steadily("validate", scenario, experiment, "--replay",
                                   "--force", "--no-progress", "-q", "--jobs", str(args.jobs))  # fmt: skip
                for take in (first_validate, validate):
                    if not take.last.startswith(f"{size} runs: {size} valid"):
                        raise SystemExit(
                            f"validate at {size} runs did not validate them all: {take.last}"
                        )
                if (sample / clone_guard.WORK_FILE).read_bytes() != recorded:
                    raise SystemExit(f"validate at {size} runs recorded {sample}'s work again")
                first_report, report = measure_steadily(
                    "report", scenario, experiment, "--format", "json"
                )
                figures[size] = {"validate": validate, "report": report}
                for name, first in (("validate", first_validate), ("report", first_report)):
                    print(
                        f"scale.{name}.first at {size}: {first.took / size * 1000:.2f} ms per run "
                        f"({first.cpu / size * 1000:.2f} ms CPU), {first.read_kib / size:.1f} KiB read "
                        "from disk a run (the page cache as the copies left it; not the figure)",
                        flush=True,
                    )
                for name, got in figures[size].items():
                    print(
                        f"scale.{name} at {size}: {got.took / size * 1000:.2f} ms per run "
                        f"({got.cpu / size * 1000:.2f} ms CPU), {got.took:.1f} s, "
                        f"{got.peak:.0f} MiB peak (copies built in {built:.0f} s)",
                        flush=True,
                    )
                    scans = ", ".join(f"{k} {v / size:.1f}" for k, v in got.kernel.items())
                    print(
                        f"scale.{name}.kernel at {size}: user {got.user / size * 1000:.2f}, system "
                        f"{got.system / size * 1000:.2f} ms a run; {got.read_kib / size:.1f} KiB read "
                        f"from disk a run; a run: {scans}",
                        flush=True,
                    )
        # The figures first: removing 100,000 runs takes many minutes, and a benchmark
        # stopped meanwhile would lose the lines it was run for.
        print_summary(figures, sizes)
        if args.keep is None:
            print(f"scale: removing the {have} runs built", flush=True)
            shutil.rmtree(root / "scale", ignore_errors=True)


if __name__ == "__main__":
    main()
