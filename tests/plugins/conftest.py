"""The hidden-tests plugin's source is importable in-process; the venv test installs it for real.

It is not a workspace member on purpose: installed in the root environment it
would change what `trysquare plugins` lists for every other test.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HIDDEN_TESTS_SRC = ROOT / "plugins" / "trysquare-hidden-tests" / "src"

if str(HIDDEN_TESTS_SRC) not in sys.path:
    sys.path.insert(0, str(HIDDEN_TESTS_SRC))
