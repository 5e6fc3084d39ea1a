"""Showing text the measured agent may have written: on a terminal, in Markdown, in CSV.

Cell names, run ids, file names, reasons and suite output all come, in the end,
from a run folder — the agent's. Printed raw, a file name holding
``ESC ] 0 ; ... BEL`` retitles the terminal, ``ESC [ 2 J`` clears it and leaves a
forged "every cell publishable" behind; in a Markdown report a ``|`` breaks the
table and ``<img src=...>`` fetches; in a spreadsheet ``=HYPERLINK(...)`` runs.
Every printer goes through one of three functions here:

- :func:`shown` for a terminal line (and inside the two others): every control
  character — C0, DEL, C1, bidirectional overrides, line separators, a lone
  surrogate — becomes a visible escape (``\\x1b``, ``\\u202e``). Text without
  them comes back unchanged, so ordinary output reads as before.
- :func:`md` for Markdown: :func:`shown`, then the characters Markdown or HTML
  would read as markup are escaped, so the text renders as the same characters.
- :func:`csv_cell` for a CSV cell: :func:`shown`, then a leading ``= + - @``
  (or tab/CR) gets a ``'`` in front, as OWASP's CSV-injection guidance says: a
  spreadsheet shows the text instead of evaluating a formula.

Stdlib only and cheap: the CLI imports it for every message.
"""

from __future__ import annotations

import re

from trysquare._lazy_pattern import LazyPattern

__all__ = ["csv_cell", "json_text", "md", "md_code", "shown"]

# C0 controls, DEL, C1 controls (NEL included), line/paragraph separators, the
# bidirectional embeddings, overrides and isolates (the "Trojan Source" set),
# zero-width and BOM characters that hide text, and lone surrogates (which no
# encoder writes and which stand for undecodable bytes in a file name). Every one of them
# is outside what ``str.isprintable`` accepts (tests/security/test_escape_shown.py checks every code point),
# so text that is printable holds none and is never matched against these: most printed
# text is, and the patterns (a large class, slow to compile) wait for the first that is not.
_UNSAFE = LazyPattern(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)
_UNSAFE_BUT_NEWLINE = LazyPattern(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object, *, newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``).

    Newlines are escaped too (one printed item stays on one line, so a name
    cannot forge the next line), unless ``newlines`` keeps them for a message
    that is meant to span lines.

    >>> shown("caf\\u00e9\\x1b[2J\\x07 done")
    'café\\\\x1b[2J\\\\x07 done'
    """
    value = text if isinstance(text, str) else str(text)
    if value.isprintable():
        return value
    pattern = _UNSAFE_BUT_NEWLINE if newlines else _UNSAFE
    return pattern.sub(_escape, value)


# What Markdown (CommonMark, GitHub's tables) reads as markup anywhere in a line.
_MD_INLINE = LazyPattern(r"([\\`*_\[\]|~!])")
# What it reads as markup at the start of a line (heading, quote, list, rule...).
_MD_LEADING = LazyPattern(r"^(\s*)(\d*)([#+\-=.)])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def md(text: object) -> str:
    """``text`` for a Markdown report: one line, nothing read as markup or HTML.

    Newlines become a visible ``⏎`` (a table cell or list item stays one line).
    Backslash escapes for Markdown's own punctuation (``|`` cannot break a
    table, a backtick cannot open code, ``[`` cannot start a link), entities for
    ``& < >`` (no tag, no entity of the agent's), a leading ``#``, ``>``, ``-``,
    ``+``, ``=`` or ``1.`` escaped so no heading or list begins.

    >>> md("# a|b <img>")
    '\\\\# a\\\\|b &lt;img&gt;'
    """
    # A multi-line reason (a suite's tail) stays readable on its one line.
    value = shown(str(text).replace("\r\n", "\n").replace("\n", " \u23ce "))
    value = _MD_INLINE.sub(r"\\\1", value)
    value = "".join(_HTML.get(char, char) for char in value)
    # After the entities: "&gt;" no longer starts a quote, but "#", "-", "1." still would.
    leading = _MD_LEADING.match(value)
    if leading and (leading.group(2) == "") == (leading.group(3) in "#+-="):
        # "# x", "- x", "= x" or "1. x", "2) x": the punctuation gets the backslash.
        value = value[: leading.start(3)] + "\\" + value[leading.start(3) :]
    return value


def md_code(text: object, *, in_table: bool = False) -> str:
    """``text`` as a Markdown code span (a run id, a path): literal whatever it holds.

    Nothing is markup inside a code span, but a backtick would close it: the
    fence is one backtick longer than the longest run of them inside. In a table
    a ``|`` still ends the cell (GitHub reads ``\\|`` there), hence ``in_table``.

    >>> md_code("a`b")
    '``a`b``'
    """
    value = shown(str(text).replace("\r\n", "\n").replace("\n", " \u23ce "))
    if in_table:
        value = value.replace("|", "\\|")
    longest = max((len(run) for run in re.findall("`+", value)), default=0)
    fence = "`" * (longest + 1)
    # A span beginning or ending with a backtick needs a space to keep its fence apart.
    pad = " " if value.startswith("`") or value.endswith("`") or not value.strip() else ""
    return f"{fence}{pad}{value}{pad}{fence}"


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A value for a CSV cell: numbers as they are, text shown and never a formula."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = shown(value)
    if text.startswith(_FORMULA_START):
        # OWASP: a leading quote makes a spreadsheet show the text, not evaluate it.
        text = "'" + text
    return text


def json_text(text: str) -> str:
    """JSON text with every character :func:`shown` would escape written as ``\\uXXXX``.

    ``json.dumps(..., ensure_ascii=False)`` escapes C0 controls but leaves C1,
    bidirectional overrides and lone surrogates raw (the last cannot even be
    encoded to a UTF-8 terminal). Outside strings JSON holds none of these, so
    the substitution keeps the document valid and its values unchanged.
    """
    # Raw newlines are the indentation's (json.dumps escapes those inside strings).
    return _UNSAFE_BUT_NEWLINE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
