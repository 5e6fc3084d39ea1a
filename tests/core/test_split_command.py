"""split_command: shell word splitting without a shell, refusing what only a shell means."""

from __future__ import annotations

import re
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trysquare.scenario import ShellWordError, split_command

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`


def test_double_quotes_unescape_backtick_and_dollar_as_a_shell_does() -> None:
    assert split_command('echo "\\`" "\\$HOME"') == ["echo", "`", "$HOME"]


def test_backslash_newline_continues_the_line() -> None:
    assert split_command("pytest \\\n  -q") == ["pytest", "-q"]
    assert split_command("echo 'a\\\nb'") == ["echo", "a\\\nb"]


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("node --test 'src/**/*.test.js'", ["node", "--test", "src/**/*.test.js"]),
        ('pytest -k "not slow" tests', ["pytest", "-k", "not slow", "tests"]),
        ("a\\ b c", ["a b", "c"]),
        ("make FOO=1", ["make", "FOO=1"]),
        ("'CI=1' npm test", ["CI=1", "npm", "test"]),
        ("echo '$HOME' \"a'b\"", ["echo", "$HOME", "a'b"]),
        ("  spaced   out  ", ["spaced", "out"]),
        ("", []),
    ],
)
def test_splits_like_a_shell(command: str, words: list[str]) -> None:
    assert split_command(command) == words
    if words:
        assert shlex.split(command) == words  # the same rule a POSIX shell applies


@pytest.mark.parametrize("command", ["echo 'open", 'echo "open', "echo \\"])
def test_unclosed_quotes_are_refused(command: str) -> None:
    with pytest.raises(ShellWordError):
        split_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "a && b",
        "a || b",
        "a | b",
        "a; b",
        "a &",
        "a > f",
        "a >> f",
        "a < f",
        "a 2>&1",
        "echo $X",
        "echo ${X}",
        "echo $(x)",
        "echo `x`",
        "ls *.py",
        "ls ?.py",
        "ls [a].py",
        "~/x",
        "X=1 y",
        "! make",
        'echo "$X"',
        'echo "`x`"',
        "echo {a,b}",
        "a # comment",
    ],
)
def test_shell_only_words_are_refused(command: str) -> None:
    with pytest.raises(ShellWordError, match="only means something to a shell"):
        split_command(command)


words = st.lists(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\0"), min_size=1),
    min_size=1,
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(words)
def test_quoted_words_round_trip(items: list[str]) -> None:
    """Whatever the words, once quoted they come back as they were (unless shell-only at the head)."""
    if items[0].startswith("~") or re.match(r"[A-Za-z_][A-Za-z0-9_]*=", items[0]):
        return  # shlex.join leaves these bare, and a shell would read them as ~ or NAME=
    joined = shlex.join(items)
    assert split_command(joined) == items


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab $&|;<>()`*?[]{},~#='\"\\ \n\t", max_size=30))
def test_accepted_words_carry_no_unquoted_shell_syntax(command: str) -> None:
    """Anything accepted splits the same way a POSIX shell would split it."""
    try:
        result = split_command(command)
    except ShellWordError:
        return
    if "\\\n" in command:
        return  # a shell drops backslash-newline (a line continuation); shlex keeps it
    if "\\`" in command or "\\$" in command:
        return  # inside double quotes a shell unescapes \` and \$; shlex does not
    assert result == shlex.split(command, comments=False, posix=True)
