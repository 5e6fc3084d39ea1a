"""Splitting shell text into words without a shell: the one place trysquare does it.

One tokeniser, :func:`tokenise`, reads quotes, backslashes and operators; a
:class:`WordPolicy` names the four places where two kinds of command need it to differ:

- :data:`RUN`, behind :func:`split_command`, for a command trysquare *runs*
  (``test_command``, ``prepare``, ``run.tests()``): quotes, backslashes and line
  continuations work as in a POSIX shell, and anything that only means something to a
  shell is refused with the offending word named.
- :data:`READ`, behind :func:`shell_words`, :func:`simple_commands` and
  :func:`commands_with_bodies`, for a command an *agent* ran, read from its session log
  and never run: operators are kept as words (so a script splits into simple commands),
  nothing is refused, and an unbalanced quote is the only thing that stops a line.

On a command :func:`split_command` accepts, both give the same words except in the three
places where the reading policy is deliberately plainer: any whitespace separates
words (``\\r`` too), a backslash-newline is an unbalanced quote rather than a
continuation, and a backslash inside double quotes is kept
(``tests/core/test_words.py`` holds both to that).

This module is imported by ``trysquare.assay``, so it stays dependency-free.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from trysquare._lazy_pattern import LazyPattern

__all__ = [
    "ASSIGNMENT",
    "READ",
    "RUN",
    "ShellWordError",
    "WordPolicy",
    "commands_with_bodies",
    "shell_words",
    "simple_commands",
    "split_command",
    "tokenise",
]

# A leading NAME= (an environment assignment before a command).
ASSIGNMENT = LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*=")
# Unquoted characters that make a shell do something other than pass a word on.
_OPERATORS = {
    "|": "a pipe '|'",
    "&": "'&'",
    ";": "';'",
    "<": "a redirection '<'",
    ">": "a redirection '>'",
    "(": "a subshell '('",
    ")": "a subshell ')'",
    "`": "a command substitution '`'",
    "*": "an unquoted glob '*'",
    "?": "an unquoted glob '?'",
    "[": "an unquoted glob '['",
    "\n": "a newline",
}


class ShellWordError(ValueError):
    """A command holds something that only means something to a shell."""


def _refuse(what: str) -> ShellWordError:
    return ShellWordError(
        f"{what} only means something to a shell, and trysquare runs commands without "
        "one (put shell logic in a script and name the script)"
    )


def _name_operator(text: str, i: int) -> str:
    if text[i] in "<>":
        start = i
        while start > 0 and text[start - 1].isdigit():
            start -= 1
        end = i + 1
        while end < len(text) and text[end] in "&<>0123456789-":
            end += 1
        return f"a redirection '{text[start:end]}'"
    pair = text[i : i + 2]
    if pair in ("&&", "||", "&>", ";;"):
        return f"'{pair}'"
    return _OPERATORS[text[i]]


class WordPolicy(NamedTuple):
    """Where one reading of shell text differs from another; the quoting rules are shared."""

    only_blanks_separate: bool
    """Only a space or a tab ends a word, as in a shell; otherwise any whitespace does."""
    backslash_newline_continues: bool
    """A backslash-newline joins two lines; otherwise it stops the text like an open quote."""
    double_quotes_keep_backslashes: bool
    """Inside double quotes a backslash stays with the character after it; otherwise it
    escapes ``"``, ``\\``, ``$`` and a backtick (and only those) as in POSIX sh."""
    refuse_shell_syntax: bool
    """Operators, expansions, globs, comments, a leading ``~``, ``!`` or ``NAME=`` are refused
    with the word named; otherwise operators are words of their own and the rest is text."""


RUN = WordPolicy(
    only_blanks_separate=True,
    backslash_newline_continues=True,
    double_quotes_keep_backslashes=False,
    refuse_shell_syntax=True,
)
"""A command trysquare runs: a POSIX shell's words, with shell logic refused."""

READ = WordPolicy(
    only_blanks_separate=False,
    backslash_newline_continues=False,
    double_quotes_keep_backslashes=True,
    refuse_shell_syntax=False,
)
"""A command an agent ran, read for what it names: operators kept, nothing refused."""

# An operator as a word of its own, longest first where one is a prefix of another.
_OPERATOR_WORD = LazyPattern(r"&&|\|\||;;|\|&|<<<|<<|>>|>&|<&|&>|[;&|()<>]")


@functools.cache
def _plain_runs(policy: WordPolicy) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Runs of characters the policy passes on untouched, outside and inside double quotes.

    Taking such a run in one step rather than a character at a time is what keeps the
    tokeniser as quick as a single regular expression on long session scripts.
    """
    separators = " \t" if policy.only_blanks_separate else r"\s"
    if policy.refuse_shell_syntax:
        # Every character a refusal looks at, so each one passes through its check.
        special = re.escape("".join(_OPERATORS)) + re.escape("$#!~{}=")
        quoted_special = re.escape("$`")
    else:
        special = re.escape(";&|()<>")
        quoted_special = ""
    outside = re.compile(f"[^{separators}{special}'\"\\\\]+")
    inside = re.compile(f'[^"\\\\{quoted_special}]+')
    return outside, inside


def tokenise(text: str, policy: WordPolicy) -> list[str]:
    """The words of ``text`` under ``policy``, quotes removed; an open quote raises.

    Under a policy that keeps shell syntax, operators come back as words of their own.

    :raises ShellWordError: on an unclosed quote, a backslash with nothing to escape, or
        (when the policy refuses shell syntax) the first thing only a shell understands.
    """
    outside_plain, inside_plain = _plain_runs(policy)
    only_blanks = policy.only_blanks_separate
    refuse = policy.refuse_shell_syntax
    words: list[str] = []
    # The word being built, in pieces: a run of plain characters, a quoted part, an
    # escaped character.
    word: list[str] = []
    in_word = False
    # How many leading pieces of this word were unquoted characters (for NAME= and ~).
    unquoted_prefix = 0
    brace_open = False
    i = 0
    n = len(text)

    while i < n:
        ch = text[i]
        if (ch in " \t") if only_blanks else ch.isspace():
            if in_word:
                words.append("".join(word))
            word = []
            in_word = False
            unquoted_prefix = 0
            brace_open = False
            i += 1
            continue
        if ch == "\\":
            if i + 1 >= n:
                raise (
                    _refuse("a trailing backslash")
                    if refuse
                    else ShellWordError("a trailing backslash")
                )
            if text[i + 1] == "\n":
                if not policy.backslash_newline_continues:
                    raise ShellWordError("a backslash before a newline")
                i += 2
                continue
            word.append(text[i + 1])
            in_word = True
            i += 2
            continue
        if ch == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ShellWordError("an unclosed single quote")
            word.append(text[i + 1 : end])
            in_word = True
            i = end + 1
            continue
        if ch == '"':
            i = _double_quoted(text, i + 1, policy, inside_plain, word)
            in_word = True
            continue
        plain = outside_plain.match(text, i)
        if plain:
            if unquoted_prefix == len(word):
                unquoted_prefix += 1
            word.append(plain.group())
            in_word = True
            i = plain.end()
            continue
        if not refuse:
            operator = _OPERATOR_WORD.match(text, i)
            if operator:
                if in_word:
                    words.append("".join(word))
                word = []
                in_word = False
                words.append(operator.group())
                i = operator.end()
                continue
        else:
            _check_unquoted(text, i, in_word=in_word, first_word=not words)
            if ch == "{":
                brace_open = True
            if ch == "}" and brace_open:
                raise _refuse("a brace expansion '{...}'")
            if (
                ch == "="
                and not words
                and unquoted_prefix == len(word)
                and ASSIGNMENT.fullmatch("".join(word) + "=")
            ):
                raise _refuse(f"a leading assignment '{''.join(word)}=...'")
        if unquoted_prefix == len(word):
            unquoted_prefix += 1
        word.append(ch)
        in_word = True
        i += 1
    if in_word:
        words.append("".join(word))
    return words


def _double_quoted(
    text: str, i: int, policy: WordPolicy, plain_run: re.Pattern[str], word: list[str]
) -> int:
    """Append the double-quoted part starting at ``i`` to ``word``; where it ends."""
    n = len(text)
    while True:
        if i >= n:
            raise ShellWordError("an unclosed double quote")
        plain = plain_run.match(text, i)
        if plain:
            word.append(plain.group())
            i = plain.end()
            continue
        c = text[i]
        if c == '"':
            return i + 1
        if c == "\\":
            after = text[i + 1] if i + 1 < n else ""
            if after == "\n":
                if not policy.backslash_newline_continues:
                    raise ShellWordError("a backslash before a newline")
                i += 2
                continue
            if policy.double_quotes_keep_backslashes:
                if not after:
                    raise ShellWordError("an unclosed double quote")
                word.append(c + after)
                i += 2
                continue
            if after and after in '"\\$`':
                word.append(after)
                i += 2
                continue
        elif policy.refuse_shell_syntax:
            if (
                c == "$"
                and i + 1 < n
                and (text[i + 1] in "({_" or text[i + 1].isalnum() or text[i + 1] in "@*#?$!-")
            ):
                raise _refuse(_describe_dollar(text, i))
            if c == "`":
                raise _refuse("a command substitution '`'")
        word.append(c)
        i += 1


def _check_unquoted(text: str, i: int, *, in_word: bool, first_word: bool) -> None:
    """Refuse the unquoted character at ``i`` if it only means something to a shell."""
    ch = text[i]
    if ch == "$":
        raise _refuse(_describe_dollar(text, i))
    if ch in _OPERATORS:
        raise _refuse(_name_operator(text, i))
    if ch == "#" and not in_word:
        raise _refuse("a comment '#'")
    if ch == "!" and not in_word and first_word and (i + 1 == len(text) or text[i + 1] in " \t"):
        raise _refuse("a leading '!'")
    if ch == "~" and not in_word:
        raise _refuse("a leading '~'")


def split_command(command: str) -> list[str]:
    """Split ``command`` into words, honouring quotes, or refuse it.

    Single and double quotes and backslashes work as in a POSIX shell. Refused,
    with the offending word named: ``&&``, ``||``, ``|``, ``;``, ``&``, redirections,
    ``$VAR``, ``$(...)``, backticks (also inside double quotes), an unquoted glob
    (``*``, ``?``, ``[``) or brace expansion, a leading ``~``, a comment, and a
    leading ``NAME=value`` assignment. An unclosed quote is refused too.

    >>> split_command("node --test 'src/**/*.test.js'")
    ['node', '--test', 'src/**/*.test.js']
    """
    return tokenise(command, RUN)


def _describe_dollar(command: str, i: int) -> str:
    rest = command[i + 1 :]
    if rest.startswith("(("):
        return "an arithmetic expansion '$((...))'"
    if rest.startswith("("):
        return "a command substitution '$(...)'"
    if rest.startswith("{"):
        end = rest.find("}")
        return f"a variable '${rest[: end + 1] if end >= 0 else rest}'"
    match = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]", rest)
    if match:
        return f"a variable '${match.group(0)}'"
    return "a '$'"


# --- commands an agent ran: read for what they name, never run -------------------------

_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})


def shell_words(line: str) -> list[str]:
    """Shell words and operators of one line, quotes removed; an unbalanced quote raises."""
    return tokenise(line, READ)


def simple_commands(script: str) -> list[list[str]]:
    """The script's simple commands as word lists; heredoc bodies are not commands."""
    commands: list[list[str]] = []
    heredocs: list[str] = []
    for line in script.splitlines():
        if heredocs:
            if line.strip() == heredocs[0]:
                heredocs.pop(0)
            continue
        try:
            words = shell_words(line)
        except ValueError:  # an unbalanced quote: half a command
            continue
        for position, word in enumerate(words[:-1]):
            if word == "<<":
                heredocs.append(words[position + 1].lstrip("-"))
        current: list[str] = []
        for word in words:
            if word in _SEPARATORS:
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(word)
        if current:
            commands.append(current)
    return commands


def commands_with_bodies(script: str) -> list[tuple[list[str], str]] | None:
    """Simple commands as (words, heredoc body); ``None`` when a quote never closes.

    A quote may span lines (``python -c "..."`` over several): those lines are
    joined before they are split. Heredoc bodies are data, kept with the command
    that reads them, never split into commands.
    """
    commands: list[tuple[list[str], str]] = []
    heredocs: list[tuple[str, list[str], int]] = []
    pending = ""
    for line in script.splitlines():
        if heredocs and not pending:
            delimiter, body, owner = heredocs[0]
            if line.strip() == delimiter:
                heredocs.pop(0)
                commands[owner] = (commands[owner][0], "\n".join(body))
            else:
                body.append(line)
            continue
        text = pending + "\n" + line if pending else line
        try:
            words = shell_words(text)
        except ValueError:
            pending = text
            continue
        pending = ""
        current: list[str] = []
        for position, word in enumerate(words):
            if word.startswith("#") and not current:
                break  # a comment: the rest of the line is not a command
            if word in _SEPARATORS:
                if current:
                    commands.append((current, ""))
                current = []
                continue
            current.append(word)
            if word == "<<" and position + 1 < len(words):
                # The command being built gets the next index once it is appended.
                heredocs.append((words[position + 1].lstrip("-"), [], len(commands)))
        if current:
            commands.append((current, ""))
    if pending:
        return None
    for _, body, owner in heredocs:  # a body never closed runs to the end
        commands[owner] = (commands[owner][0], "\n".join(body))
    return commands
