"""A tiny measured project for the hidden-tests mode: a bug, its fix, a hidden test.

`average([])` raises in the etalon; the hidden test wants 0. The repository
already holds a stale `tests/test_hidden.py`, which the hidden file replaces.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

BASE = {
    "basket.py": textwrap.dedent("""\
        def total(items):
            return sum(items)


        def average(items):
            return total(items) / len(items)
        """),
    "tests/test_basket.py": textwrap.dedent("""\
        from basket import average, total


        def test_total():
            assert total([1, 2, 3]) == 6


        class TestAverage:
            def test_average(self):
                assert average([2, 4]) == 3
        """),
    # What the agent sees: a placeholder the hidden file replaces.
    "tests/test_hidden.py": "def test_placeholder():\n    pass\n",
}

FIX = {
    "basket.py": textwrap.dedent("""\
        def total(items):
            return sum(items)


        def average(items):
            return total(items) / len(items) if items else 0
        """),
}

# The unfixed agent touched something harmless.
NO_FIX = {"README.md": "I looked at it.\n"}

HIDDEN_TEST = textwrap.dedent("""\
    from basket import average


    def test_empty_basket():
        assert average([]) == 0
    """)

FAIL_TO_PASS = ["tests.test_hidden.test_empty_basket"]
PASS_TO_PASS = ["tests.test_basket.test_total", "tests.test_basket.TestAverage.test_average"]


def write_hidden_scenario(
    folder: Path, command: str, *, extra: str = "", task: str = "", timeout: float = 120
) -> Path:
    """A scenario with one hidden-tests validator over the basket project."""
    (folder / "hidden").mkdir(parents=True, exist_ok=True)
    (folder / "hidden" / "test_hidden.py").write_text(HIDDEN_TEST, encoding="utf-8")
    path = folder / "scenario.toml"
    path.write_text(
        f"{task}\n"
        "[[validation]]\n"
        'mode = "hidden-tests"\n'
        'files = { "tests/test_hidden.py" = "hidden/test_hidden.py" }\n'
        f"command = {toml_string(command)}\n"
        f"fail_to_pass = {list_literal(FAIL_TO_PASS)}\n"
        f"pass_to_pass = {list_literal(PASS_TO_PASS)}\n"
        f"timeout = {timeout}\n"
        f"{extra}",
        encoding="utf-8",
    )
    return path


def toml_string(text: str) -> str:
    return "'" + text + "'"  # literal string: no escapes, the tests' commands hold no quote


def list_literal(items: list[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"
