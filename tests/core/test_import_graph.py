"""The core's import graph, counting every import: module level, inside a function, and under
``if TYPE_CHECKING:`` (a type-only import ties two modules together for whoever moves one).

The graph is read by ``tools/import_graph.py`` (which also prints its figures); this test
asserts it holds no circle, and that no module is over 600 lines unless its first lines say
why.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
MOST_LINES = 600

# Modules being split by issue 31's item 2 (the repo package, one shell tokeniser, the session
# readers' shared skeleton) at the same time as this test was written: emptied at merge.
BEING_SPLIT: frozenset[str] = frozenset()


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "import_graph", ROOT / "tools" / "import_graph.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


def test_no_circle() -> None:
    graph = _tool()
    limit = sys.getrecursionlimit()
    assert [sorted(group) for group in graph.shape().circles] == []
    # The walk leaves the interpreter as it found it: the suite's other tests share it.
    assert sys.getrecursionlimit() == limit


# The ground floor: the records and protocols the hook specifications name, and the few
# plain helpers those records stand on. None reaches the engine (the plugin manager, the
# loaders, git, the runner), so a module anywhere in the core may name a hook's types.
GROUND_FLOOR = frozenset(
    {
        "trysquare._cache_folder",
        "trysquare._canonical",
        "trysquare._convert",
        "trysquare._digests",
        "trysquare._jail_limits",
        "trysquare._jail_records",
        "trysquare._jail_view",
        "trysquare._lazy_pattern",
        "trysquare._plain_structure",
        "trysquare._plain_toml",
        "trysquare._record",
        "trysquare._recorded_outcome",
        "trysquare.clone_picture",
        "trysquare.commands",
        "trysquare.errors",
        "trysquare.executor_protocol",
        "trysquare.jail",
        "trysquare.modes",
        "trysquare.report_source",
        "trysquare.run_records",
        "trysquare.sessions._json",
        "trysquare.sessions.reading",
        "trysquare.task_records",
    }
)


def test_hookspecs_stand_on_the_ground_floor() -> None:
    graph = _tool()
    imported: dict[str, set[str]] = {}
    for found in graph.all_imports():
        imported.setdefault(found.source, set()).add(found.target)
    reached: set[str] = set()
    todo = ["trysquare.hookspecs"]
    while todo:
        for target in imported.get(todo.pop(), set()) - reached:
            reached.add(target)
            todo.append(target)
    assert sorted(reached - GROUND_FLOOR) == []


def test_the_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    graph = _tool()
    package = tmp_path / "trysquare"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trysquare.b import X\n"
    )
    (package / "b.py").write_text("def f():\n    from trysquare import c\n")
    (package / "c.py").write_text("from .sub import d\n")
    (package / "sub" / "d.py").write_text("import trysquare.a\n")
    edges = {(i.source, i.target, i.eager) for i in graph.all_imports(package)}
    assert edges == {
        ("trysquare.a", "trysquare.b", False),
        ("trysquare.b", "trysquare.c", False),
        ("trysquare.c", "trysquare.sub.d", True),
        ("trysquare.sub.d", "trysquare.a", True),
    }
    assert graph.shape(package).circles == [
        ["trysquare.a", "trysquare.b", "trysquare.c", "trysquare.sub.d"]
    ]


def test_no_module_is_over_600_lines_unless_it_says_why() -> None:
    graph = _tool()
    unexplained = []
    for name, path in graph.module_files().items():
        lines = path.read_text(encoding="utf-8").splitlines()
        if name in BEING_SPLIT:
            continue
        if len(lines) > MOST_LINES and not any("lines because" in line for line in lines[:15]):
            unexplained.append(f"{name}: {len(lines)} lines")
    assert unexplained == []
