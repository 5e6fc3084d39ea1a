#!/usr/bin/env python3
"""What sharing ``prepare`` saves: two consumers of one run, each preparing against one sharing.

Within ``validate``, ``run.tests()`` and the hidden tests of a run share one prepared tree
(:mod:`trysquare._prepared`): the second consumer copies it instead of running ``prepare``
again. Here two suites run on one clone whose ``prepare`` builds a ``node_modules``-like
folder of many small files (what ``npm ci`` leaves) after a fixed wait (what fetching and
unpacking cost), once each preparing (the baseline, as without the jail) and once
sharing, measured in the same run:

    prepare.shared.2000-files: RATIO (each preparing S, sharing S, 3 rounds; ...)

Sharing trades the second ``prepare`` for a copy of the tree it built (and its hand-over
to the jail's user): it pays where ``prepare`` does more than write its files (fetching,
unpacking, install scripts, compiling: raise ``--wait``), and costs where it only writes
them on a slow disk (``--wait 0``), since a copy writes the same files again.

Usage: python benchmarks/bench_prepare.py [--quick] [--files N] [--wait SECONDS]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from trysquare import _prepared, jail
from trysquare._suite import run_suite
from trysquare.testing.builders import build_run

PREPARE = """\
import os, sys, time
time.sleep(float(sys.argv[2]))
for number in range(int(sys.argv[1])):
    folder = os.path.join("node_modules", f"package-{number // 20}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"file-{number}.js"), "w") as out:
        out.write("module.exports = 1;\\n" * 20)
"""
SUITE = "import os; assert os.path.isdir('node_modules'); print('Ran 1 test in 0.0s')"


def two_consumers(repo: Path, prepare: str, suite: str, *, shared: bool) -> float:
    """Seconds for two suites on ``repo``, sharing its prepared tree or each preparing."""
    started = time.perf_counter()
    if shared:
        with _prepared.sharing():
            verdicts = [run_suite(repo, suite, [prepare], timeout=300) for _ in range(2)]
    else:
        verdicts = [run_suite(repo, suite, [prepare], timeout=300) for _ in range(2)]
    elapsed = time.perf_counter() - started
    for verdict in verdicts:
        if verdict.value is not True:
            raise SystemExit(f"the suite did not pass: {verdict.reason}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--wait", type=float, default=1.0, help="prepare's fixed wait (seconds)")
    args = parser.parse_args()
    rounds = 1 if args.quick else 3
    found = jail.availability()
    if not found.available:
        print(f"prepare.shared: skipped (no jail here, so nothing is shared: {found.reason})")
        return
    with tempfile.TemporaryDirectory(prefix="bench-prepare-") as folder:
        script = Path(folder) / "prepare.py"
        script.write_text(PREPARE)
        run = build_run(Path(folder) / "run", base={"README.md": "a project\n"})
        repo = run.repo.path
        prepare = f"{sys.executable} {script} {args.files} {args.wait}"
        suite = f'{sys.executable} -c "{SUITE}"'
        two_consumers(repo, prepare, suite, shared=True)  # warm the probe and the page cache
        each, sharing = [], []
        for _ in range(rounds):  # interleaved, so a busy moment weighs on both alike
            each.append(two_consumers(repo, prepare, suite, shared=False))
            sharing.append(two_consumers(repo, prepare, suite, shared=True))
    base, new = statistics.median(each), statistics.median(sharing)
    print(
        f"prepare.shared.{args.files}-files: {new / base:.2f}x (each preparing {base:.2f} s, "
        f"sharing {new:.2f} s, {rounds} round{'s' if rounds > 1 else ''}; prepare waits "
        f"{args.wait:g} s then writes {args.files} files)"
    )


if __name__ == "__main__":
    main()
