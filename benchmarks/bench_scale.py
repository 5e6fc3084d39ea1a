#!/usr/bin/env python3
"""10,000 runs x 3 validators: ``validate --replay --force`` and ``report`` at N and 10N.

One small real git run, copied (building 10,000 repositories would dwarf what is
measured), three script validators (one-line ``sh`` scripts), contexts built and
archived by a first, untimed ``validate``. Then, at 1,000 and at 10,000 runs, the
wall time and the peak resident memory of the trysquare process (its validators
apart) for each command. Goal: time <= 11x and memory <= 1.5x from 1,000 to 10,000
(streamed, not held). Prints:

    scale.validate: 10.2x time, 1.31x peak memory from 1000 to 10000 runs x 3 validators (...)
    scale.report: 9.8x time, 1.12x peak memory from 1000 to 10000 runs (...)

Usage: python benchmarks/bench_scale.py [--quick] [--runs N]   (N and 10N; --quick: 100 and 1000)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _matrix import MEASURE, build_matrix

VALIDATORS = ("changed", "kept", "named")



def build(root: Path, count: int) -> tuple[Path, Path]:
    scenario, experiment = build_matrix(root, count, "changed.sh", "#!/bin/sh\n")
    tables = []
    for metric in VALIDATORS:
        script = scenario.parent / f"{metric}.sh"
        script.write_text(f"#!/bin/sh\necho '{{\"metrics\": {{\"{metric}\": true}}}}'\n")
        script.chmod(0o755)
        tables.append(f'[[validation]]\nname = "{metric}"\nmode = "script"\ncommand = "{metric}.sh"\n'
                      f'metrics = ["{metric}"]\n')
    scenario.write_text("\n".join(tables))
    return scenario, experiment


def measure(*args: str | Path) -> tuple[float, float]:
    done = subprocess.run([sys.executable, "-c", MEASURE, *map(str, args)],
                          capture_output=True, text=True, check=False)
    found = [line for line in done.stderr.splitlines() if line.startswith("MEASURE ")]
    if not found:
        raise SystemExit(f"{args[0]} failed: {done.stderr.strip()[-500:]}")
    _, took, peak = found[-1].split()
    return float(took), float(peak)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    args = parser.parse_args()
    small = args.runs or (100 if args.quick else 1000)
    figures: dict[int, dict[str, tuple[float, float]]] = {}
    for count in (small, 10 * small):
        with tempfile.TemporaryDirectory() as temp:
            os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
            scenario, experiment = build(Path(temp), count)
            measure("validate", scenario, experiment, "--no-progress")  # contexts built and archived
            figures[count] = {
                "validate": measure("validate", scenario, experiment, "--replay", "--force",
                                    "--no-progress"),
                "report": measure("report", scenario, experiment, "--format", "json"),
            }
    big = 10 * small
    for name in ("validate", "report"):
        (t1, m1), (t2, m2) = figures[small][name], figures[big][name]
        what = f"runs x {len(VALIDATORS)} validators" if name == "validate" else "runs"
        print(f"scale.{name}: {t2 / t1:.2f}x time, {m2 / m1:.2f}x peak memory from {small} to {big} "
              f"{what} (goal <= 11x, <= 1.5x; {t1:.1f} s / {m1:.0f} MB, {t2:.1f} s / {m2:.0f} MB)")


if __name__ == "__main__":
    main()
