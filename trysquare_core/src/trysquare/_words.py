"""Splitting a command into words the way a POSIX shell would, without a shell.

This module is imported by ``trysquare.assay``, so it stays dependency-free.
``split_command`` is the one rule: the scenario loader vets ``test_command`` and
``prepare`` with it, and ``run.tests()`` runs what it returns.
"""

from __future__ import annotations

import re

__all__ = ["ShellWordError", "split_command"]

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
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
    words: list[str] = []
    word: list[str] = []
    in_word = False
    # Whether every character so far in this word was unquoted (for NAME= and ~).
    unquoted_prefix = 0
    brace_open = False
    i = 0
    n = len(command)

    def finish() -> None:
        nonlocal word, in_word, unquoted_prefix, brace_open
        if in_word:
            words.append("".join(word))
        word = []
        in_word = False
        unquoted_prefix = 0
        brace_open = False

    while i < n:
        ch = command[i]
        if ch in " \t":
            finish()
            i += 1
            continue
        if ch == "\\":
            if i + 1 >= n:
                raise _refuse("a trailing backslash")
            if command[i + 1] == "\n":  # line continuation
                i += 2
                continue
            word.append(command[i + 1])
            in_word = True
            i += 2
            continue
        if ch == "'":
            end = command.find("'", i + 1)
            if end < 0:
                raise ShellWordError("an unclosed single quote")
            word.append(command[i + 1 : end])
            in_word = True
            i = end + 1
            continue
        if ch == '"':
            i += 1
            while True:
                if i >= n:
                    raise ShellWordError("an unclosed double quote")
                c = command[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and command[i + 1] in '"\\$`\n':
                    if command[i + 1] != "\n":
                        word.append(command[i + 1])
                    i += 2
                    continue
                if c == "$" and i + 1 < n and (
                    command[i + 1] in "({_" or command[i + 1].isalnum()
                    or command[i + 1] in "@*#?$!-"
                ):
                    raise _refuse(_describe_dollar(command, i))
                if c == "`":
                    raise _refuse("a command substitution '`'")
                word.append(c)
                i += 1
            in_word = True
            continue
        # Unquoted from here on.
        if ch == "$":
            raise _refuse(_describe_dollar(command, i))
        if ch in _OPERATORS:
            raise _refuse(_name_operator(command, i))
        if ch == "#" and not in_word:
            raise _refuse("a comment '#'")
        if ch == "!" and not in_word and not words and (i + 1 == n or command[i + 1] in " \t"):
            raise _refuse("a leading '!'")
        if ch == "~" and not in_word:
            raise _refuse("a leading '~'")
        if ch == "{":
            brace_open = True
        if ch == "}" and brace_open:
            raise _refuse("a brace expansion '{...}'")
        if ch == "=" and not words and unquoted_prefix == len(word) and _ASSIGNMENT.fullmatch(
            "".join(word) + "="
        ):
            raise _refuse(f"a leading assignment '{''.join(word)}=...'")
        if unquoted_prefix == len(word):
            unquoted_prefix += 1
        word.append(ch)
        in_word = True
        i += 1
    finish()
    return words


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
