"""The `>>>` examples in every distribution's docstrings run and print what they say.

Each module is imported (never `__main__`, which would run the CLI) and its doctests run with
`tmp`, a fresh empty folder, among their globals. A plugin that is not installed in this
environment is imported from its `src/` folder.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION_SOURCES = [
    ROOT / "trysquare_core" / "src",
    ROOT / "trysquare_script" / "src",
    ROOT / "trysquare_judge" / "src",
    ROOT / "trysquare_form" / "src",
    ROOT / "trysquare_view" / "src",
    *sorted(ROOT.glob("plugins/*/src")),
]


def source_modules() -> list[tuple[Path, str]]:
    """(source folder, dotted name) of every module under every distribution's src/ folder."""
    found = []
    for src in DISTRIBUTION_SOURCES:
        for path in sorted(src.rglob("*.py")):
            parts = path.relative_to(src).with_suffix("").parts
            if parts[-1] == "__main__":
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append((src, ".".join(parts)))
    return found


def modules_with_examples() -> list[tuple[Path, str]]:
    """The modules whose source holds a `>>>` line (found without importing anything)."""
    chosen = []
    for src, name in source_modules():
        path = src.joinpath(*name.split("."))
        file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if ">>> " in file.read_text(encoding="utf-8"):
            chosen.append((src, name))
    return chosen


def test_the_examples_are_found() -> None:
    # The walk itself must see the known examples, or the test below checks nothing.
    assert "trysquare._shown" in {name for _, name in modules_with_examples()}


@pytest.mark.parametrize(
    ("src", "name"), modules_with_examples(), ids=[name for _, name in modules_with_examples()]
)
def test_doctests_pass(
    src: Path, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = name.split(".")[0]
    from_source = importlib.util.find_spec(top) is None
    if from_source:
        monkeypatch.syspath_prepend(str(src))  # a plugin that is not installed here
    before = set(sys.modules)
    try:
        module = importlib.import_module(name)
        finder = doctest.DocTestFinder()
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        tests = [
            test for test in finder.find(module, extraglobs={"tmp": tmp_path}) if test.examples
        ]
        assert tests, f"{name} has a '>>> ' line but no doctest was found in it"
        report: list[str] = []
        for test in tests:
            runner.run(test, out=report.append)
        failed, attempted = runner.summarize(verbose=False)
        assert failed == 0, "".join(report)
        assert attempted > 0
    finally:
        if from_source:  # the tests that follow see the environment as installed
            for loaded in set(sys.modules) - before:
                if loaded == top or loaded.startswith(top + "."):
                    del sys.modules[loaded]
