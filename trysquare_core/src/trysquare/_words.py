"""Splitting shell text into words without a shell: the one place trysquare does it.

Two policies over the same quoting rules, for two kinds of command:

- :func:`split_command`, for a command trysquare *runs* (``test_command``,
  ``prepare``, ``run.tests()``): quotes, backslashes and line continuations work as
  in a POSIX shell, and anything that only means something to a shell is refused
  with the offending word named.
- :func:`shell_words`, :func:`simple_commands` and :func:`commands_with_bodies`, for a
  command an *agent* ran, read from its session log and never run: operators are kept
  as words (so a script splits into simple commands), nothing is refused, and an
  unbalanced quote is the only thing that stops a line.

On a command :func:`split_command` accepts, both give the same words except in three
places where the reading policy is deliberately plainer: any whitespace separates
words (``\r`` too), a backslash-newline is an unbalanced quote rather than a
continuation, and a backslash inside double quotes is kept
(``tests/core/test_words.py`` holds both to that).

This module is imported by ``trysquare.assay``, so it stays dependency-free.
"""

from __future__ import annotations

import re

__all__ = [
    "ASSIGNMENT",
    "ShellWordError",
    "commands_with_bodies",
    "shell_words",
    "simple_commands",
    "split_command",
]

# A leading NAME= (an environment assignment before a command).
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
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
        if ch == "=" and not words and unquoted_prefix == len(word) and ASSIGNMENT.fullmatch(
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


# --- commands an agent ran: read for what they name, never run -------------------------

_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})


_TOKEN = re.compile(
    r"""(?P<op>&&|\|\||;;|\|&|<<<|<<|>>|>&|<&|&>|[;&|()<>])"""
    r"""|(?P<word>(?:'[^']*'|"(?:[^"\\]|\\.)*"|\\.|[^\s;&|()<>'"\\])+)"""
    r"""|(?P<space>\s+)|(?P<bad>['"\\])"""
)


_UNQUOTE = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)""")


def _unquote(word: str) -> str:
    if "'" not in word and '"' not in word and "\\" not in word:
        return word
    return _UNQUOTE.sub(lambda m: m.group(1) or m.group(2) or m.group(3) or "", word)


def shell_words(line: str) -> list[str]:
    """Shell words and operators of one line, quotes removed; an unbalanced quote raises."""
    words: list[str] = []
    for match in _TOKEN.finditer(line):
        kind = match.lastgroup
        if kind == "op":
            words.append(match.group())
        elif kind == "word":
            words.append(_unquote(match.group()))
        elif kind == "bad":
            raise ValueError("unbalanced quote")
    return words


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
