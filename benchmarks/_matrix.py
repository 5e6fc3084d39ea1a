"""Building benchmark matrices: one real git run, copied N times, and a script validator."""

from __future__ import annotations

import shutil
from pathlib import Path

from trysquare.testing import RunBuilder


def build_matrix(root: Path, count: int, validator_name: str, validator_source: str) -> tuple[Path, Path]:
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
    first = RunBuilder(experiment / "runs" / "r0000", cell="c0", repetition=0)
    first.base({"a.py": "a = 1\n", "b.py": "b = 1\n"})
    first.repo.write("a.py", "a = 2\n")
    first.finish(response="done\n")
    for index in range(1, count):
        target = experiment / "runs" / f"r{index:04d}"
        shutil.copytree(first.path, target, symlinks=True)
        toml = (target / "run.toml").read_text().replace('cell = "c0"', f'cell = "c{index % 4}"')
        (target / "run.toml").write_text(toml.replace("repetition = 0", f"repetition = {index}"))
    return scenario, experiment
