"""Every distribution but the core imports only the public floor: ``trysquare.api``,
``trysquare.assay`` and ``trysquare.testing`` (and its own packages).

Every ``import`` counts: at module level, inside a function, and under ``if TYPE_CHECKING:``.
The rest of the core is internal and may move (DESIGN §9): a plugin standing on it breaks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from trysquare import api

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = ("trysquare.api", "trysquare.assay", "trysquare.testing")


def _distribution_sources() -> list[Path]:
    return sorted(
        path
        for folder in [*ROOT.glob("trysquare_*/src"), *ROOT.glob("plugins/*/src")]
        if folder.parent.name != "trysquare_core"
        for path in folder.rglob("*.py")
    )


def core_imports(source: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """Each import of the core in ``source``: its line, the module, and the names taken from it."""
    found: list[tuple[int, str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "trysquare" or alias.name.startswith("trysquare."):
                    found.append((node.lineno, alias.name, ()))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "trysquare":
                # ``from trysquare import api`` takes a module; anything else is the package's.
                for alias in node.names:
                    found.append((node.lineno, f"trysquare.{alias.name}", ()))
            elif node.module.startswith("trysquare."):
                found.append((node.lineno, node.module, tuple(alias.name for alias in node.names)))
    return found


def _allowed(module: str) -> bool:
    return any(module == floor or module.startswith(floor + ".") for floor in ALLOWED)


def test_the_finder_sees_every_spelling() -> None:
    source = (
        "import trysquare.runner\nfrom trysquare import plugins, api\n"
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trysquare.modes import Mode\n"
        "def f():\n    from trysquare.api import Outcome\n    import trysquare.assay\n"
        "from trysquare_judge import mode\n"
    )
    assert [module for _, module, _ in core_imports(source) if not _allowed(module)] == [
        "trysquare.runner",
        "trysquare.plugins",
        "trysquare.modes",
    ]


def test_no_distribution_imports_the_core_but_through_its_public_floor() -> None:
    sources = _distribution_sources()
    assert len(sources) > 20  # the walk found the distributions
    offenders = {
        f"{path.relative_to(ROOT)}:{line}": module
        for path in sources
        for line, module, _ in core_imports(path.read_text(encoding="utf-8"))
        if not _allowed(module)
    }
    assert offenders == {}


def test_every_name_a_distribution_takes_from_the_api_is_in_it() -> None:
    missing = {
        f"{path.relative_to(ROOT)}:{line}": name
        for path in _distribution_sources()
        for line, module, names in core_imports(path.read_text(encoding="utf-8"))
        if module == "trysquare.api"
        for name in names
        if name not in api.__all__
    }
    assert missing == {}


@pytest.mark.parametrize("name", api.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(api, name) is not None


def test_the_core_does_not_import_its_own_floor() -> None:
    # The floor re-exports the core; a core module importing it back would close a circle.
    core = ROOT / "trysquare_core" / "src" / "trysquare"
    users = [
        str(path.relative_to(ROOT))
        for path in core.rglob("*.py")
        if path.name != "api.py"
        and any(
            module == "trysquare.api"
            for _, module, _ in core_imports(path.read_text(encoding="utf-8"))
        )
    ]
    assert users == []


def test_the_core_names_no_hook_a_plugin_adds() -> None:
    # A plugin's own hookspecs (the judge's providers) are the plugin's: the core finds what
    # it lists through the spec's listed_as mark, never by the hook's name.
    added = {
        node.name
        for path in _distribution_sources()
        if path.name == "hookspecs.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and node.name.startswith("trysquare_")
    }
    assert "trysquare_register_judge_providers" in added  # the walk found the judge's
    core = ROOT / "trysquare_core" / "src" / "trysquare"
    naming = {
        f"{path.relative_to(ROOT)}: {hook}"
        for path in core.rglob("*.py")
        for hook in added
        if hook in path.read_text(encoding="utf-8")
    }
    assert naming == set()
