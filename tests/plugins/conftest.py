"""The hidden-tests plugin's source is importable in-process; the venv test installs it for real.

A workspace member that `uv run pytest` does not install (it is not a dependency of the root
project): the in-process tests import its source from here, installed or not.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HIDDEN_TESTS_SRC = ROOT / "plugins" / "trysquare-hidden-tests" / "src"

if str(HIDDEN_TESTS_SRC) not in sys.path:
    sys.path.insert(0, str(HIDDEN_TESTS_SRC))
