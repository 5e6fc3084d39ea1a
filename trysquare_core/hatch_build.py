"""Build hook: the demo's material ships inside trysquare-core as package data.

``trysquare demo`` needs the repository's ``examples/scenario.toml``,
``examples/validator.py`` and ``examples/demo/`` (``--node``: ``examples/node/``). They stay where the repository
documents them; a build from the checkout copies them into the wheel (as
``trysquare/_examples/``) and into the sdist (as ``src/trysquare/_examples/``, so
a wheel built from the sdist finds them in the package like any other file).
An editable install reads them from the checkout and gets nothing copied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SHIPPED = ("scenario.toml", "validator.py", "demo", "node")


class ExamplesHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        examples = Path(self.root).parent / "examples"
        if not (examples / "demo" / "matrix.toml").is_file():
            return  # built from the sdist: the files are already in the package
        prefix = "trysquare/_examples" if self.target_name == "wheel" else "src/trysquare/_examples"
        for name in SHIPPED:
            build_data["force_include"][str(examples / name)] = f"{prefix}/{name}"
