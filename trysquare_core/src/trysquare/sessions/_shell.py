"""The files a shell command plainly reads, and the patches it applies.

Agents read files through their shell as often as through a read tool (Codex has no
read tool at all), so a skill opened with ``cat .../SKILL.md`` must count as read.
Only the plain readers are recognised — ``cat``, ``head``, ``tail``, ``sed -n``,
``nl``, ``less``, ``more``, ``bat`` and ``<`` redirections — never a guess about what
``grep`` or a script touched. The script is split into simple commands by
:mod:`trysquare._words`, the one place shell text becomes words; what it writes is
:mod:`trysquare.sessions._shell_writes`'s.
"""

from __future__ import annotations

import functools
import posixpath
import re
import shlex

from trysquare._words import ASSIGNMENT, simple_commands

_READERS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "sed"})


_VALUED = {"head": {"-n", "-c"}, "tail": {"-n", "-c"}, "sed": {"-e", "-f"}, "nl": {"-w", "-s"}}


_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})


def script_of(command: object) -> str | None:
    """The shell text of a command given as a string or an argv list (``bash -lc TEXT``)."""
    if isinstance(command, str):
        return command
    if isinstance(command, list) and command and all(isinstance(word, str) for word in command):
        if (
            posixpath.basename(command[0]) in _SHELLS
            and len(command) >= 3
            and command[-2]
            in {
                "-c",
                "-lc",
                "-ic",
            }
        ):
            return command[-1]
        return shlex.join(command)
    return None


_MAYBE_READS = re.compile(r"\b(?:cat|head|tail|nl|less|more|bat|sed)\b|<")


def shell_reads(command: object) -> list[str]:
    """Paths the command reads with a plain reader, as written (unresolved)."""
    script = script_of(command)
    if not script or len(script) > 20_000 or _MAYBE_READS.search(script) is None:
        return []
    return list(_script_reads(script))


@functools.lru_cache(maxsize=4096)
def _script_reads(script: str) -> tuple[str, ...]:
    """:func:`shell_reads` of one script (agents repeat their commands: kept)."""
    found: list[str] = []
    for words in simple_commands(script):
        while words and ASSIGNMENT.match(words[0]):
            words = words[1:]
        if not words:
            continue
        program = posixpath.basename(words[0])
        args = words[1:]
        reader = program in _READERS and (program != "sed" or "-n" in args or "--quiet" in args)
        valued = _VALUED.get(program, set())
        script_seen = program != "sed" or "-e" in args
        skip = False
        redirect: str | None = None
        for word in args:
            if skip:
                skip = False
                continue
            if word in {"<", ">", ">>", "<<", "<<<", ">&", "<&", "&>"}:
                redirect = word
                continue
            if redirect is not None:
                if redirect == "<":
                    found.append(word)
                redirect = None
                continue
            if not reader or word.startswith("-"):
                skip = word in valued
                continue
            if not script_seen:
                script_seen = True
                continue
            found.append(word)
    return tuple(found)


_PATCH = re.compile(r"\*\*\* Begin Patch\b.*?(?:\*\*\* End Patch|\Z)", re.DOTALL)


_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$")


def patch_files(text: object) -> list[str]:
    """The files an ``apply_patch`` envelope adds, updates, deletes or moves to, in order."""
    if not isinstance(text, str) or "*** Begin Patch" not in text:
        return []
    found: list[str] = []
    for patch in _PATCH.findall(text):
        for line in patch.splitlines():
            match = _PATCH_FILE.match(line)
            if match:
                found.append(match.group(2) or match.group(3))
    return found


def _join(cwd: str | None, path: str) -> str:
    if cwd is None or path.startswith(("/", "~")):
        return path
    return posixpath.join(cwd, path)
