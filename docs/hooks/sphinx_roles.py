"""An mkdocs hook: Sphinx roles in docstrings (:class:`Job`) render as plain code.

The docstrings are written for Sphinx as well as for `help()`; mkdocstrings shows the role's
name before the code span. This drops it, leaving ``Job`` as code.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|data|exc|obj|const):(?=<code>)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """The page's HTML without the role names in front of code spans."""
    return _ROLE.sub("", html)
