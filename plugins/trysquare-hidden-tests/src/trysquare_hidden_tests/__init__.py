"""trysquare's hidden-tests mode: hidden test files, fail-to-pass and pass-to-pass ids.

Installed as its own distribution (``pip install trysquare-hidden-tests``), found
through the ``trysquare`` entry point, listed by ``trysquare plugins``.
"""

from __future__ import annotations

from collections.abc import Callable

from trysquare.api import Mode, hookimpl

from trysquare_hidden_tests.mode import HiddenTestsMode, HiddenTestsValidation

__all__ = ["HiddenTestsMode", "HiddenTestsValidation"]


@hookimpl
def trysquare_register_modes(register: Callable[[Mode], None]) -> None:
    register(HiddenTestsMode())
