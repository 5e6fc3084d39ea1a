"""How to install a missing trysquare distribution, said where a command needs one.

From a checkout of trysquare (an editable install inside its uv workspace), the
distributions are workspace members: ``uv sync --all-packages`` installs them all,
and a ``uv pip install ./plugins/...`` is undone by the next ``uv sync``. Elsewhere,
the distribution's name is what to install.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["install_hint"]


def install_hint(distribution: str) -> str:
    """``uv sync --all-packages`` (run in the checkout) when trysquare runs from one, else
    ``pip install DISTRIBUTION``."""
    root = checkout_root()
    if root is not None:
        return f"from the checkout {root}: uv sync --all-packages, which installs {distribution}"
    return f"pip install {distribution}"


def checkout_root() -> Path | None:
    """The uv workspace of the trysquare checkout this package is installed from, if any."""
    here = Path(__file__).resolve()
    # trysquare_core/src/trysquare/_install.py: the workspace is three folders up.
    for folder in here.parents[2:5]:
        try:
            text = (folder / "pyproject.toml").read_text(encoding="utf-8")
        except OSError:
            continue
        if "[tool.uv.workspace]" in text:
            return folder
    return None
