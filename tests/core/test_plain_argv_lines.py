"""Drawn command lines: the plain reader reads each as argparse does, or leaves it to argparse.

Apart from ``test_plain_argv.py`` because it takes seconds, too long for the fast loop.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_plain_argv import ODD, VALUES, _read_plainly, _same, _spellings


@pytest.mark.parametrize("command", _read_plainly())
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_line_is_read_as_argparse_reads_it_or_left_to_it(command: str, data: Any) -> None:
    pool = [word for spelled in _spellings(command) for word in spelled] + list(VALUES + ODD)
    words = data.draw(st.lists(st.sampled_from(pool) | st.text(max_size=4), max_size=8))
    _same([command, *words])
