"""A ``run.toml`` (or scenario) written every near-plain way: the plain reader never decides alone.

``trysquare._plain_toml`` reads a plain TOML text with string methods, without importing
``tomllib``. Every text it reads must come out exactly as ``tomllib`` reads it (compared by
``repr`` too, so ``True`` is not ``1`` and the keys keep their order), and every text
``tomllib`` refuses must be left to it (so its refusal, word for word, is what the user
sees). A plain reader accepting what ``tomllib`` refuses, or reading it otherwise, would
let a hostile value through under another meaning.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import example, given, settings
from hypothesis import strategies as st
from trysquare import _convert, _plain_toml
from trysquare.errors import RunError

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._plain_toml", "trysquare._convert")

# Pieces of lines, plain and not: whitespace, quotes, escapes, signs, comments, headers.
PIECES = [
    "a", "b", "key", "_x-1", "1", "0", "00", "-", "-0", "-7", "+1", "1_0", "1.5", "1e3",
    "12345678901234567890", "true", "false", "True", "nan", "inf", " ", "  ", "\t", "=",
    " = ", '"', '""', '"x"', '"a b"', '"é"', '"#"', '","', '"]"', "'x'", '"""', "\\", "\\n",
    "[", "]", "[[", "]]", ",", ", ", "#", "# c", ".", "a.b", '"q"', "{", "}", "{ }",
    "\r", "\x00", "\x7f", "\u2028", "\u00a0", "\ufeff", "\u0661", "1979-05-27",
]  # fmt: skip
LINE = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)
TEXT = st.lists(LINE, max_size=8).map("\n".join)
# Whole lines, most of them plain: keys, spacings, values and headers, each near a border.
KEYS = ["a", "b", "k_1", "x-y", "1", "true", "a.b", '"q"', "", " a", "a b", "é"]
SPACINGS = [" = ", "=", "  =  ", " ", " == "]
VALUES = [
    "1", "0", "-3", "42", "00", "-0", "+1", "1_000", "true", "false", "tru", '"x"', '""',
    '"a,b"', '"é"', '"a # b"', '"[x]"', "[]", "[ ]", '["x"]', '["x", "y",]', '[ "x" , ]',
    '["x" "y"]', '["x",,]', "[,]", "[", "]", '"x" # c', "1 # c", "1.5", "'x'", '"\\n"',
    '[\n"x",\n]', '[\n  "x"\n  ,"y"]', "[\n\n]", '["x",\n# c\n]', '["x"\n"y"]', '[["x"]]',
    "{}", '{ a = "x" }', '"x" "y"', '"x', '[\n"x', "1979-05-27",
]  # fmt: skip
HEADERS = ["[t]", "[[t]]", "[u]", "[[u]]", "# c", "", "   ", "[t.u]", "[ t ]", "[]", "[[t]"]
NEAR_LINE = st.one_of(
    st.builds("".join, st.tuples(*map(st.sampled_from, (KEYS, SPACINGS, VALUES)))),
    st.sampled_from(HEADERS),
)
NEAR_PLAIN = st.lists(NEAR_LINE, max_size=5).map("\n".join)
# Documents as tomli_w writes them (what `trysquare record` and the test builders write).
WORD = st.text(alphabet="ab_-1é .#,[]\"'\\{}=", max_size=5)
VALUE = st.one_of(
    st.booleans(),
    st.integers(),
    WORD,
    st.lists(WORD, max_size=3),
    st.floats(allow_nan=False),
)
BARE = st.text(alphabet="ab_-1", min_size=1, max_size=3)
TABLE = st.dictionaries(st.one_of(BARE, WORD), VALUE, max_size=4)
DOCUMENT = st.dictionaries(
    st.one_of(BARE, WORD),
    st.one_of(VALUE, TABLE, st.lists(TABLE, min_size=1, max_size=2)),
    max_size=5,
).map(tomli_w.dumps)


def assert_read_as_tomllib_reads(text: str) -> bool:
    """Whether ``text`` was plain; if it was, ``tomllib`` read it, to the same values."""
    try:
        plain = _plain_toml.loads(text)
    except _plain_toml.NotPlain:
        return False
    # A text the plain reader takes, tomllib must take too, and read the same.
    expected = tomllib.loads(text)
    assert plain == expected and repr(plain) == repr(expected), text
    return True


@settings(max_examples=600)
@given(st.one_of(NEAR_PLAIN, DOCUMENT, TEXT, st.text()))
@example("a = 1\na = 2")
@example('[t]\nk = "v"\n[t]\n')
@example("[[t]]\n[t]\n")
@example("[t]\n[[t]]\n")
@example("t = []\n[[t]]\n")
@example("t = 1\n[t]\n")
@example('a = [\n  "x",\n  "y"\n]\n')
@example('a = [\n"x\n"]\n')
@example("a = [\n")
@example('a = ["x",]\n')
@example("a = [,]\n")
@example('a = [\n# c\n"x"]\n')
@example('a = "x" # c\n')
@example("a = -0\n")
@example("a = 01\n")
@example("a = 999999999999999999\n")
@example("a = 9999999999999999999\n")
@example('a = "\\u0041"\n')
@example("\ufeffa = 1\n")
@example("a = 1\r\n")
def test_a_text_the_plain_reader_takes_reads_as_tomllib_reads_it(text: str) -> None:
    assert_read_as_tomllib_reads(text)


def test_every_near_plain_line_under_every_header_reads_as_tomllib_reads_it() -> None:
    lines = [f"{key}{spacing}{value}" for key in KEYS for spacing in SPACINGS for value in VALUES]
    plain = 0
    for header in HEADERS:
        for line in lines:
            plain += assert_read_as_tomllib_reads(f"{header}\n{line}\n")
            plain += assert_read_as_tomllib_reads(f"{line}\n{header}\n{line}")
    assert plain > 1000  # the plain path was taken, not only given up


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# only a comment\n",
        '[[validation]]\nmode = "script"\ncommand = "changed.sh"\nmetrics = ["changed"]\n',
        'cell = "c0"\nrepetition = 0\ngiven = []\n\n[etalon]\ntag = "etalon-v1"\n',
        tomli_w.dumps({"given": ["a.py", "b c.py"], "etalon": {"tag": "v1"}, "n": -3}),
        tomli_w.dumps({"validation": [{"mode": "script"}, {"mode": "judge", "x": ["é"]}]}),
    ],
)
def test_what_trysquare_and_its_examples_write_is_plain(text: str) -> None:
    assert assert_read_as_tomllib_reads(text)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'a = "x\\q"\n', "not valid TOML (Unescaped '\\' in a string"),
        (b"a = 1\na = 2\n", "not valid TOML (Cannot overwrite a value"),
        (b'[t]\nk = "v"\n[t]\n', "not valid TOML (Cannot declare ('t',) twice"),
        (b"a = [\n", "not valid TOML ("),
        (b'a = "\xff"\n', "not valid TOML (not UTF-8: byte 5)"),
    ],
)
def test_a_text_that_is_not_plain_is_refused_in_tomllibs_words(
    tmp_path: Path, content: bytes, says: str
) -> None:
    path = tmp_path / "run.toml"
    path.write_bytes(content)
    with pytest.raises(RunError) as refused:
        _convert.read_toml(path, error=RunError)
    assert refused.value.message.startswith(f"{path}: {says}")


def test_a_plain_text_is_read_without_tomllib(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "run.toml"
    path.write_text('cell = "c0"\ngiven = [\n    "a.py",\n]\n', encoding="utf-8")

    def no_tomllib(text: str) -> Any:
        raise AssertionError("tomllib read a plain text")

    monkeypatch.setattr(tomllib, "loads", no_tomllib)
    assert _convert.read_toml(path, error=RunError) == {"cell": "c0", "given": ["a.py"]}
