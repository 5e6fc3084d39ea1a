"""Benchmark matrices: a script validator, and runs from ``trysquare.testing.build_matrix``."""

from __future__ import annotations

from pathlib import Path

from trysquare import testing

# A command in a process of its own, reporting its wall time and its own peak resident
# memory (children apart) on stderr as `MEASURE <seconds> <MiB>`.
MEASURE = """
import resource, sys, time
from trysquare.cli import main
started = time.perf_counter()
try:
    main(sys.argv[1:])
except SystemExit:
    pass
took = time.perf_counter() - started
print("MEASURE", took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, file=sys.stderr)
"""


def build_matrix(
    root: Path, count: int, validator_name: str, validator_source: str
) -> tuple[Path, Path]:
    """``root/scenario/scenario.toml`` with one script validator, and ``count`` runs under ``root/exp``.

    The runs are copies of one real git run (only cell and repetition differ), so
    building 200 of them costs one ``git init``.
    """
    scenario_dir = root / "scenario"
    scenario_dir.mkdir()
    script = scenario_dir / validator_name
    script.write_text(validator_source)
    script.chmod(0o755)
    scenario = scenario_dir / "scenario.toml"
    scenario.write_text(
        f'[[validation]]\nmode = "script"\ncommand = "{validator_name}"\nmetrics = ["changed"]\n'
    )
    experiment = root / "exp"
    testing.build_matrix(
        experiment,
        [(f"r{index:04d}", f"c{index % 4}", index) for index in range(count)],
        base={"a.py": "a = 1\n", "b.py": "b = 1\n"},
        changes={"a.py": "a = 2\n"},
        response="done\n",
    )
    return scenario, experiment


def cold_matrix(root: Path, count: int, validator_source: str) -> tuple[Path, Path, Path]:
    """:func:`build_matrix` with ``validator_source`` as ``assay_validator.py``, and beside
    ``scenario.toml`` a ``cold.toml`` starting it cold (``warm = false``): the cold scenario,
    the experiment and the validator's file."""
    scenario, experiment = build_matrix(root, count, "assay_validator.py", validator_source)
    cold = scenario.with_name("cold.toml")
    cold.write_text(scenario.read_text() + "warm = false\n")
    return cold, experiment, scenario.parent / "assay_validator.py"
