"""Each attack test names the module whose guarantee it tests, and that module exists.

An attack test is laid out by attack, not by module (``tests/security/`` is the threat
model's index); ``EXERCISES`` ties it back to the package's layout, so a change to a module
finds the attacks it must still stop: ``grep -l trysquare.git.etalon tests/security``.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ATTACKS = sorted(path for path in HERE.glob("test_*.py") if path.name != Path(__file__).name)


def _exercises(path: Path) -> tuple[str, ...] | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [
            getattr(target, "id", None) for target in node.targets
        ] == ["EXERCISES"]:
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple) and all(isinstance(name, str) for name in value), (
                path.name
            )
            return value
    return None


@pytest.mark.parametrize("path", ATTACKS, ids=[path.stem for path in ATTACKS])
def test_every_attack_names_the_modules_it_exercises(path: Path) -> None:
    names = _exercises(path)
    assert names, f"{path.name}: no EXERCISES = (...) naming the modules whose guarantee it tests"
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    assert missing == [], f"{path.name}: EXERCISES names modules that do not exist: {missing}"
