"""Print the shape of the core's import graph: modules, levels, imports running back up, circles.

Every ``import`` of ``trysquare`` counts: at module level, inside a function, and under
``if TYPE_CHECKING:`` (a type-only import still ties two modules together for a reader and
for anyone moving one of them). Run it from the repository's root::

    uv run python tools/import_graph.py          # figures
    uv run python tools/import_graph.py --edges  # also every import running back up
    uv run python tools/import_graph.py --root /elsewhere/trysquare_core/src/trysquare

A *circle* is a strongly connected group of two or more modules, counting every import.
*Levels*: with each circle counted as one module, a module importing nothing of trysquare is
on level 0, any other one level above the highest module it imports. Outside a circle every
import goes down; an import *runs back up* when it joins two modules of one circle.
``tests/core/test_import_graph.py`` loads this file and asserts there is no circle.
``--root FOLDER`` reads another checkout's ``trysquare_core/src/trysquare``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

PACKAGE = "trysquare"
ROOT = Path(__file__).resolve().parent.parent / "trysquare_core" / "src" / PACKAGE


class Import(NamedTuple):
    """One import of a core module by another."""

    source: str
    target: str
    line: int
    eager: bool  # made when the source is loaded: at module level and not only for type checkers


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, *, eager: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, eager
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, eager=False)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for part in child.body:
                yield from _walk_one(part, eager=False)
            for part in child.orelse:
                yield from _walk_one(part, eager=eager)
        else:
            yield from _walk(child, eager=eager)


def _walk_one(node: ast.AST, *, eager: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, eager
    else:
        yield from _walk(node, eager=eager)


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    # The longest known module the dotted name starts with: ``trysquare.report.tables.X`` is
    # ``trysquare.report.tables``.
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> list[Import]:
    """Every import of a core module that ``name`` (at ``path``) makes."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for node, eager in _walk(tree, eager=True):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from trysquare import plugins`` names a module; ``from trysquare import hookimpl``
            # names something in the package.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for target in targets:
            if target != PACKAGE and not target.startswith(PACKAGE + "."):
                continue
            resolved = _resolve(target, modules)
            if resolved is not None and resolved != name:
                found.append(Import(name, resolved, node.lineno, eager))
    return found


def all_imports(root: Path = ROOT) -> list[Import]:
    modules = module_files(root)
    return [found for name, path in modules.items() for found in imports_of(name, path, modules)]


def circles(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {node: set() for node in nodes}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
        graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        # Iterative, so a deep graph never meets the recursion limit.
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups, key=lambda group: (-len(group), group))


def levels(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Each module's level: the longest chain of imports below it (a circle shares one level)."""
    names = sorted(set(nodes))
    edge_list = sorted(set(edges))
    group_of = {name: name for name in names}
    for group in circles(names, edge_list):
        for member in group:
            group_of[member] = group[0]
    below: dict[str, set[str]] = {group_of[name]: set() for name in names}
    for source, target in edge_list:
        if group_of[source] != group_of[target]:
            below[group_of[source]].add(group_of[target])
    found: dict[str, int] = {}

    def level(group: str) -> int:
        if group not in found:
            found[group] = 0  # a placeholder; the condensed graph has no circle
            found[group] = 1 + max((level(child) for child in below[group]), default=-1)
        return found[group]

    # Raised for this walk only: the suite runs it in a process its other tests share, and one
    # of them drives json's encoder down to RecursionError (far deeper, far slower, if raised).
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        return {name: level(group_of[name]) for name in names}
    finally:
        sys.setrecursionlimit(limit)


class Shape(NamedTuple):
    modules: int
    levels: int
    imports: int
    lazy_imports: int
    back_up: list[tuple[str, str]]
    circles: list[list[str]]


def shape(root: Path = ROOT) -> Shape:
    modules = module_files(root)
    found = all_imports(root)
    edges = sorted({(i.source, i.target) for i in found})
    groups = circles(modules, edges)
    group_of = {member: index for index, group in enumerate(groups) for member in group}
    all_levels = levels(modules, edges)
    # Outside a circle every import goes down a level; inside one, some import must go back up.
    back_up = [
        (source, target)
        for source, target in edges
        if source in group_of and group_of[source] == group_of.get(target)
    ]
    return Shape(
        modules=len(modules),
        levels=1 + max(all_levels.values(), default=-1),
        imports=len(edges),
        lazy_imports=len(
            {(i.source, i.target) for i in found if not i.eager}
            - {(i.source, i.target) for i in found if i.eager}
        ),
        back_up=back_up,
        circles=groups,
    )


def main(argv: list[str]) -> int:
    root = Path(argv[argv.index("--root") + 1]) if "--root" in argv else ROOT
    figures = shape(root)
    print(f"modules: {figures.modules}")
    print(f"levels (longest chain of imports, a circle counted as one module): {figures.levels}")
    print(
        f"module pairs joined by an import: {figures.imports} "
        f"({figures.lazy_imports} only by function-level or type-only imports)"
    )
    print(f"imports running back up (inside a circle): {len(figures.back_up)}")
    print(f"circles: {len(figures.circles)}")
    for group in figures.circles:
        print(f"  {len(group)} modules: {', '.join(group)}")
    if "--edges" in argv:
        for source, target in figures.back_up:
            print(f"  back up: {source} -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
