"""What a Python validator pays before it measures anything.

Two ratios, each the best of N fresh interpreters (start-up noise only ever adds):

- ``assay.import``: ``import trysquare.assay`` against ``import json``, timed
  inside the interpreter around the import statement alone. Target: under 3x.
- ``validator.startup``: ``examples/validator.py`` on the context of a real run of
  ``tests/fixtures/tiny`` against ``python -c pass``, wall time of the whole
  process. The suite is not run: the benchmark executes a copy of the example whose
  ``tests`` metric is replaced by an unjudged one (checked to be the only change),
  since what is measured is the validator's own start-up, not the project's tests.
  Target: under 4x.

    uv run python benchmarks/bench_assay.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "validator.py"
TINY = ROOT / "tests" / "fixtures" / "tiny"
PYTHON = sys.executable
# Measured as installed code runs: with its bytecode cached. (An environment with
# PYTHONDONTWRITEBYTECODE would recompile trysquare on every start, while the
# standard library it is compared with ships compiled.)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

_IMPORT_PROBE = (
    "import time\nstart = time.perf_counter()\nimport {module}\n"
    "print(time.perf_counter() - start)\n"
)


def import_time(module: str, repeat: int) -> float:
    """Best seconds to import ``module`` in a fresh interpreter."""
    best = float("inf")
    for _ in range(repeat):
        done = subprocess.run(
            [PYTHON, "-c", _IMPORT_PROBE.format(module=module)],
            capture_output=True,
            text=True,
            check=True,
            env=ENV,
        )
        best = min(best, float(done.stdout))
    return best


def process_time(argv: list[str], repeat: int, cwd: Path) -> float:
    """Best wall seconds for ``argv`` to run to completion (it must succeed)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, capture_output=True, check=True, env=ENV)
        best = min(best, time.perf_counter() - start)
    return best


def tiny_context(folder: Path) -> Path:
    """A real git run of the tiny fixture, and the context ``trysquare context`` prints."""
    from trysquare.testing.builders import run_from_folders

    run = run_from_folders(
        folder / "runs" / "a1",
        TINY / "base",
        TINY / "change",
        commands=[[PYTHON, "-m", "unittest", "-q"]],
    )
    scenario = folder / "scenario.toml"
    scenario.write_text(
        "[task]\n"
        f"test_command = {json.dumps(f'{PYTHON} -m unittest')}\n"
        'artefacts = ["__pycache__"]\n'
        "[[validation]]\n"
        'mode = "script"\n'
        f"command = {json.dumps(str(EXAMPLE))}\n"
        'metrics = ["delivered", "in_scope", "tests"]\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [PYTHON, "-m", "trysquare", "context", str(scenario), str(run.path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench_assay: trysquare context failed:\n{done.stderr}")
    printed = done.stdout
    context = folder / "context.json"
    context.write_text(printed, encoding="utf-8")
    return context


def without_suite(folder: Path) -> Path:
    """The shipped example with only its ``tests`` metric swapped for an unjudged one."""
    source = EXAMPLE.read_text(encoding="utf-8")
    if source.count("run.tests") != 1:
        raise SystemExit("bench_assay: examples/validator.py changed shape; update the benchmark")
    variant = folder / "validator_without_suite.py"
    variant.write_text(
        source.replace("run.tests", 'lambda: Metric.unjudged("not run by the benchmark")'),
        encoding="utf-8",
    )
    return variant


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeat = 5 if args.quick else 20
    # Warm-up: writes the bytecode caches the timed runs then use.
    import_time("trysquare.assay", 1)

    json_s = import_time("json", repeat)
    assay_s = import_time("trysquare.assay", repeat)
    print(
        f"assay.import: {assay_s / json_s:.1f}x (import trysquare.assay {assay_s * 1000:.1f} ms; "
        f"baseline import json {json_s * 1000:.1f} ms; target < 3x)"
    )

    with tempfile.TemporaryDirectory(prefix="trysquare-bench-") as scratch:
        folder = Path(scratch)
        context = tiny_context(folder)
        variant = without_suite(folder)
        cwd = folder / "cwd"
        cwd.mkdir()
        # Sanity first: the variant must produce a verdict, not a crash, on this context.
        done = subprocess.run(
            [PYTHON, str(variant), str(context)],
            capture_output=True,
            text=True,
            cwd=cwd,
            check=False,
            env=ENV,
        )
        if done.returncode != 0:
            raise SystemExit(f"bench_assay: the validator failed:\n{done.stderr}")
        metrics = json.loads(done.stdout)["metrics"]
        if metrics.get("in_scope") is not True or metrics.get("delivered") is not True:
            raise SystemExit(f"bench_assay: unexpected verdict {metrics}")
        bare_s = process_time([PYTHON, "-c", "pass"], repeat, cwd)
        start_s = process_time([PYTHON, str(variant), str(context)], repeat, cwd)
    print(
        f"validator.startup: {start_s / bare_s:.1f}x (examples/validator.py without the suite "
        f"{start_s * 1000:.1f} ms; baseline python -c pass {bare_s * 1000:.1f} ms; target < 4x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
