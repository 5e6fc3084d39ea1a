"""No import circles among trysquare's core modules (imports under TYPE_CHECKING aside).

Read from the source with ``ast``: an edge is any import of another trysquare
module, at module level or inside a function. The one circle left is named here
with why; a new one fails this test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import trysquare

SOURCE = Path(trysquare.__file__).parent
# None left: _suite hands the assay a plain SuiteVerdict instead of building its Metric.
KNOWN: set[frozenset[str]] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for path in SOURCE.rglob("*.py"):
        parts = ["trysquare", *path.relative_to(SOURCE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        if "testing" not in parts:  # the test kit imports everything by design
            found[".".join(parts)] = path
    return found


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, modules: dict[str, Path]) -> tuple[set[str], set[str]]:
    """What ``name`` imports at module level, and what it imports anywhere."""

    def known(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    top: set[str] = set()
    anywhere: set[str] = set()

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _under_type_checking(child):
                for other in child.orelse:
                    walk_one(other, in_function)
                continue
            walk_one(child, in_function)

    def walk_one(node: ast.AST, in_function: bool) -> None:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name if path.name == "__init__.py" else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for target in targets:
            module = known(target)
            if module and module != name:
                anywhere.add(module)
                if not in_function:
                    top.add(module)
        walk(node, in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(path.read_text(encoding="utf-8")), False)
    return top, anywhere


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative enough)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules = _modules()
    top, anywhere = {}, {}
    for name, path in modules.items():
        top[name], anywhere[name] = _imports(name, path, modules)
    return top, anywhere


def test_no_module_level_import_circle() -> None:
    top, _ = _graphs()
    assert _circles(top) == []


def test_no_import_circle_but_the_known_one() -> None:
    _, anywhere = _graphs()
    assert set(_circles(anywhere)) <= KNOWN


def test_the_finder_finds_a_circle() -> None:
    # The check can fail: a planted pair is found.
    assert _circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [frozenset({"a", "b"})]
