"""Benchmark: ``trysquare report`` over 10,000 runs x 10 metrics x 20 cells.

Prints ``report.10k: <seconds> s, <ratio>x reading the measures alone``.

"Reading the measures alone" is ``json.load`` of a ``measures.json`` of that
size: the least any report must do. "Report" is what ``trysquare report`` does
after rebuilding the rows: load that file, build every table (scores, exact
median intervals, 10,000-resample gaps for 6 criteria x 19 cells, agreement),
render Markdown and JSON. Rebuilding the rows from 10,000 run folders is disk
work the two share, so it is left out of both sides.

    uv run python benchmarks/bench_report.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from trysquare.report import Layout, build_report, render

BOOLEANS = ("delivered", "in_scope", "tests", "cites_paths", "note_usable", "note_usable_human")
NUMBERS = ("seconds", "tool_calls")
DIAGNOSTICS = ("touched", "summary")
METRICS = BOOLEANS + NUMBERS + DIAGNOSTICS  # 10 metrics
CELLS = 20


def synthesise(runs: int, seed: int = 1) -> list[dict[str, Any]]:
    """Rows shaped as ``results.build_measures`` writes them; each cell its own rates."""
    rng = random.Random(seed)
    rates = [[rng.random() for _ in BOOLEANS] for _ in range(CELLS)]
    rows = []
    for index in range(runs):
        cell = index % CELLS
        metrics: dict[str, Any] = {}
        for metric, rate in zip(BOOLEANS, rates[cell], strict=True):
            # One value in 20 unjudged: denominators differ per metric.
            metrics[metric] = None if rng.random() < 0.05 else rng.random() < rate
        metrics["seconds"] = round(rng.lognormvariate(4, 0.5), 3)
        metrics["tool_calls"] = rng.randint(3, 80)
        metrics["touched"] = sorted(rng.sample(["a.py", "b.py", "c.py", "d.py"], 2))
        metrics["summary"] = "done"
        rows.append(
            {
                "id": f"run-{index:05d}",
                "cell": f"cell {cell:02d}",
                "repetition": index // CELLS,
                "state": "valid",
                "metrics": metrics,
                "reasons": {},
                "errors": [],
                "pending": [],
            }
        )
    return rows


LAYOUT = Layout(
    name="bench",
    metrics=METRICS,
    reference="cell 00",
    criteria=None,  # every boolean metric: 6 criteria x 19 cells x 10,000 resamples
    validity=("delivered",),
    agreement=(("note_usable", "note_usable_human"),),
)


def best_of(repeat: int, action: Any) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 runs instead of 10,000")
    parser.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    args = parser.parse_args(argv)
    runs = 1_000 if args.quick else 10_000
    rows = synthesise(runs)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "measures.json"
        path.write_text(json.dumps(rows, indent=2, sort_keys=True), encoding="utf-8")

        def read() -> Any:
            with open(path, encoding="utf-8") as handle:
                return json.load(handle)

        def report() -> tuple[str, str]:
            built = build_report(LAYOUT, read())
            return render(built, "md"), render(built, "json")

        reading = best_of(max(args.repeat, 5), read)
        reporting = best_of(args.repeat, report)
        md, _ = report()
    label = f"{runs // 1000}k"
    print(
        f"report.{label}: {reporting:.3f} s, {reporting / reading:.1f}x reading the measures alone"
    )
    print(
        f"  (reading {reading * 1000:.1f} ms; {len(md.encode())} bytes of Markdown; "
        f"{CELLS} cells, {len(METRICS)} metrics)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
