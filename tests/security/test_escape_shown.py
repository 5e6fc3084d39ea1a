"""trysquare._shown, the one module every printer uses: properties over any text."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trysquare import _shown
from trysquare._shown import csv_cell, json_text, md, md_code, shown

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._shown",)


pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`

ANY_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=60)


def _no_control(text: str, *, newlines: bool = False) -> bool:
    for char in text:
        if char == "\n" and newlines:
            continue
        category = unicodedata.category(char)
        if (
            category in ("Cc", "Cs")
            or char in "\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
        ):
            return False
    return True


@given(ANY_TEXT)
def test_escape_shown_leaves_no_control_character(text: str) -> None:
    assert _no_control(shown(text))
    assert _no_control(shown(text, newlines=True), newlines=True)


@given(
    st.text(alphabet=st.characters(whitelist_categories=("L", "N", "Zs", "P", "S")), max_size=40)
)
def test_escape_shown_keeps_ordinary_text_as_it_is(text: str) -> None:
    if _no_control(text) and not any(
        "\u200b" <= c <= "\u200f" or "\u2060" <= c <= "\u2064" or c in "\u061c\ufeff" for c in text
    ):
        assert shown(text) == text


@given(ANY_TEXT)
def test_escape_md_is_one_line_and_never_starts_markup(text: str) -> None:
    out = md(text)
    assert "\n" not in out and "\r" not in out and _no_control(out)
    assert "<" not in out and "|" not in out.replace("\\|", "")
    assert not out.lstrip().startswith(("#", "- ", "+ ", "> ", "="))


@given(ANY_TEXT)
def test_escape_md_code_cannot_be_closed_from_inside(text: str) -> None:
    out = md_code(text)
    fence = len(out) - len(out.lstrip("`"))
    inner = out[fence:-fence]
    assert "`" * fence not in inner


@given(ANY_TEXT)
def test_escape_csv_cell_is_never_a_formula(text: str) -> None:
    out = csv_cell(text)
    assert isinstance(out, str) and _no_control(out)
    assert not out.startswith(("=", "+", "-", "@", "\t", "\r"))


def test_escape_csv_cell_leaves_numbers_alone() -> None:
    assert csv_cell(-0.5) == -0.5 and csv_cell(3) == 3 and csv_cell(None) is None


@given(st.dictionaries(ANY_TEXT, ANY_TEXT, max_size=4))
def test_escape_json_text_stays_the_same_json(value: dict[str, str]) -> None:
    import json

    text = json_text(json.dumps(value, ensure_ascii=False, indent=2))
    assert json.loads(text) == value
    assert _no_control(text, newlines=True)


def test_escape_shown_passes_printable_text_as_it_is_and_nothing_it_escapes_is_printable() -> None:
    # shown() returns printable text without matching it: sound only while no character the
    # patterns escape is printable, which every code point is checked for here.
    for pattern in (_shown._UNSAFE, _shown._UNSAFE_BUT_NEWLINE):
        escaped_yet_printable = [
            hex(code)
            for code in range(sys.maxunicode + 1)
            if chr(code).isprintable() and pattern.match(chr(code))
        ]
        assert escaped_yet_printable == []
    text = "caf\u00e9 r0000 (c0 #0) script: valid"
    assert shown(text) is text
