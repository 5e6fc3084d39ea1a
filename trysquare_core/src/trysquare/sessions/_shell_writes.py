"""What a shell command writes, one simple command at a time.

``first_write`` must not read "cannot tell" as "did not write". A shell command is
classified one simple command at a time: a redirection onto a file, ``tee``,
``sed -i``, ``perl -i``, ``cp``/``mv``/``install``/``ln`` onto it, ``touch``,
``truncate``, ``dd of=``, ``chmod`` and the deletions (``rm``, ``unlink``,
``git rm``, the source of ``mv``) write the files they name. A program known to
write nothing (a reader, ``grep``, ``ls``, ``git diff``...) writes nothing. Any
other program (an interpreter, a build tool, a script) may write whatever it
names: its words are kept as *mentions*. A command that rewrites files without
naming them (``git stash``, ``git checkout BRANCH``, ``patch``, ``find -delete``)
is *unclear* about every file. Package managers are
:mod:`trysquare.sessions._package_managers`'s.
"""

from __future__ import annotations

import functools
import posixpath
import re

import attrs

from trysquare._words import ASSIGNMENT, commands_with_bodies
from trysquare.sessions._package_managers import _manager_effects
from trysquare.sessions._shell import _SHELLS, _join, patch_files, script_of


@attrs.frozen
class ShellEffects:
    """What one shell script plainly writes, and what it may write without saying."""

    writes: tuple[str, ...] = ()
    """Paths written, created, deleted or moved, as written (joined to a ``cd`` before them)."""
    unclear: str | None = None
    """Why the script may have rewritten files it does not name, if it may."""
    mentions: frozenset[str] = frozenset()
    """File names (last path components) an unclassified program was given: it may have written them."""


_NEVER_WRITE = frozenset(
    {
        "cat",
        "head",
        "tail",
        "nl",
        "less",
        "more",
        "bat",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ls",
        "stat",
        "wc",
        "file",
        "diff",
        "cmp",
        "echo",
        "printf",
        "pwd",
        "test",
        "[",
        "[[",
        "true",
        "false",
        "which",
        "type",
        "realpath",
        "readlink",
        "dirname",
        "basename",
        "du",
        "df",
        "tree",
        "cut",
        "tr",
        "xxd",
        "od",
        "hexdump",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "sha512sum",
        "date",
        "sleep",
        "export",
        "set",
        "unset",
        "exit",
        "return",
        "read",
        "whoami",
        "id",
        "uname",
        "env",
        "printenv",
        "column",
        "fold",
        "rev",
        "seq",
        "yes",
        "jq",
        "ps",
        "kill",
        "wait",
        "history",
        "alias",
        "local",
        "declare",
        "shopt",
        "clear",
        "hash",
        "command",
        "sort",
        "uniq",
    }
)


_PREFIXES = frozenset({"sudo", "time", "nohup", "exec", "builtin", "nice", "stdbuf", "doas"})


_GIT_QUIET = frozenset(
    {
        "status",
        "diff",
        "log",
        "show",
        "add",
        "commit",
        "branch",
        "tag",
        "fetch",
        "remote",
        "rev-parse",
        "ls-files",
        "blame",
        "grep",
        "config",
        "init",
        "describe",
        "shortlog",
        "reflog",
        "cat-file",
        "ls-tree",
        "help",
        "version",
        "diff-tree",
        "diff-index",
        "merge-base",
        "rev-list",
        "name-rev",
        "check-ignore",
        "show-ref",
        "for-each-ref",
        "count-objects",
        "fsck",
        "--version",
        "--help",
        "notes",
        "format-patch",
    }
)


_GIT_REWRITES = frozenset(
    {
        "checkout",
        "restore",
        "reset",
        "stash",
        "apply",
        "am",
        "merge",
        "rebase",
        "cherry-pick",
        "pull",
        "revert",
        "switch",
        "clean",
        "read-tree",
        "checkout-index",
        "worktree",
        "clone",
        "submodule",
        "bisect",
        "filter-branch",
    }
)


_REDIRECT_WRITES = frozenset({">", ">>", "&>", ">&"})


_REDIRECTS = frozenset({"<", ">", ">>", "<<", "<<<", ">&", "<&", "&>"})


_TOKENS = re.compile(r"[\w@~+.,=:/-]+")


_MENTIONS_CAP = 4096


def _basename(token: str) -> str:
    return token.rstrip("/").rsplit("/", 1)[-1]


def shell_effects(command: object) -> ShellEffects:
    """What the shell command writes (see :class:`ShellEffects`); paths as written."""
    script = script_of(command)
    if not script or not script.strip():
        return ShellEffects()
    if len(script) > 100_000:
        return ShellEffects(unclear="a shell script too long to read")
    return _script_effects(script, 0)


@functools.lru_cache(maxsize=4096)
def _script_effects(script: str, depth: int) -> ShellEffects:
    commands = commands_with_bodies(script)
    if commands is None:
        # Quotes that never balance: what it runs cannot be told, but what it names can.
        return ShellEffects(
            unclear=None,
            mentions=frozenset(_basename(t) for t in _TOKENS.findall(script)[:_MENTIONS_CAP]),
        )
    writes: list[str] = []
    unclear: str | None = None
    mentions: set[str] = set()
    cwd: str | None = None
    for words, body in commands:
        words, command_writes = _strip_redirections(words)
        while words and (ASSIGNMENT.match(words[0]) or posixpath.basename(words[0]) in _PREFIXES):
            words = words[1:]
        writes.extend(_join(cwd, path) for path in command_writes)
        if not words:
            continue
        program = posixpath.basename(words[0])
        args = words[1:]
        if program == "cd":
            target = next((a for a in args if not a.startswith("-")), "~")
            cwd = (
                target
                if target.startswith(("/", "~")) or cwd is None
                else posixpath.join(cwd, target)
            )
            continue
        if program in _SHELLS and len(args) >= 2 and args[-2] in {"-c", "-lc", "-ic"} and depth < 3:
            inner = _script_effects(args[-1], depth + 1)
            writes.extend(_join(cwd, path) for path in inner.writes)
            unclear = unclear or inner.unclear
            mentions |= inner.mentions
            continue
        managed = _manager_effects(program, args)
        if managed is not None:
            writes.extend(_join(cwd, path) for path in managed[0])
            mentions |= managed[1]
            continue
        found, why, unknown = _program_effects(program, args, body)
        writes.extend(_join(cwd, path) for path in found)
        if why and unclear is None:
            unclear = why
        if unknown:
            for word in (*_named_by(program, args), body):
                mentions.update(_basename(t) for t in _TOKENS.findall(word))
                if len(mentions) > _MENTIONS_CAP:
                    return ShellEffects(
                        writes=tuple(dict.fromkeys(writes)),
                        unclear=f"`{program}` is given more names than can be kept",
                    )
    mentions.discard("")
    return ShellEffects(tuple(dict.fromkeys(writes)), unclear, frozenset(mentions))


_INTERPRETERS = frozenset(
    {
        "python",
        "python3",
        "node",
        "deno",
        "bun",
        "ruby",
        "perl",
        "php",
        "tsx",
        "ts-node",
        "bash",
        "sh",
        "zsh",
    }
)


_TEST_RUNNERS = frozenset({"pytest", "py.test", "jest", "vitest", "mocha", "ava", "tap"})


def _named_by(program: str, args: list[str]) -> list[str]:
    """The words of an unknown program that may name a file it writes.

    The script an interpreter runs, and the tests a runner runs, are what it
    executes, not what it writes: ``node a.test.js`` and ``pytest tests/x.py``
    name no file they may write. Code given inline (``python -c CODE``) and every
    other operand may.
    """
    if program in {"npx", "bunx", "pnpx"} and args:
        return _named_by(posixpath.basename(args[0]), args[1:])
    if (
        program in {"uv", "poetry", "pipenv", "pdm", "hatch"}
        and args[:1] == ["run"]
        and len(args) > 1
    ):
        return _named_by(posixpath.basename(args[1]), args[2:])
    if "-m" in args[:-1] and args[args.index("-m") + 1] in _TEST_RUNNERS:
        return []
    if program in _TEST_RUNNERS or (program in {"node", "deno", "bun"} and "--test" in args):
        return [word for word in args if word.startswith("-") and "=" in word]
    if program.rstrip("0123456789.") in _INTERPRETERS:
        kept: list[str] = []
        script_seen = False
        skip = False
        for word in args:
            if skip:
                skip = False
                if kept and kept[-1] == "-m":
                    kept.pop()
                    script_seen = True  # a module is the program: what follows are its operands
                    continue
                kept.append(word)
                continue
            if word in {"-c", "-e", "--eval", "-m", "-p", "--print"}:
                kept.append(word)
                skip = True
                continue
            if not script_seen and not word.startswith("-"):
                script_seen = True
                continue
            kept.append(word)
        return kept
    return args


def _strip_redirections(words: list[str]) -> tuple[list[str], list[str]]:
    """(the words without their redirections, the files redirected onto)."""
    kept: list[str] = []
    written: list[str] = []
    redirect: str | None = None
    for word in words:
        if redirect is not None:
            if redirect in _REDIRECT_WRITES and not word.isdigit() and word != "-":
                if not word.startswith("/dev/"):
                    written.append(word)
            redirect = None
            continue
        if word in _REDIRECTS:
            redirect = word
            continue
        kept.append(word)
    # "2>" leaves its "2" behind as an argument: harmless for what is written.
    return kept, written


def _operands(args: list[str], valued: frozenset[str] = frozenset()) -> list[str]:
    """Arguments that are not options (nor an option's value); ``--`` ends the options."""
    operands: list[str] = []
    skip = False
    options = True
    for word in args:
        if skip:
            skip = False
            continue
        if options and word == "--":
            options = False
            continue
        if options and word.startswith("-") and word != "-":
            skip = word in valued
            continue
        operands.append(word)
    return operands


def _copy_targets(program: str, args: list[str]) -> list[str]:
    """What ``cp``/``mv``/``install``/``ln`` write: the target, and for ``mv`` its sources."""
    target_dir = None
    for position, word in enumerate(args):
        if word in {"-t", "--target-directory"} and position + 1 < len(args):
            target_dir = args[position + 1]
        elif word.startswith("--target-directory="):
            target_dir = word.split("=", 1)[1]
    operands = _operands(
        args, frozenset({"-t", "--target-directory", "-S", "--suffix", "-m", "--mode", "-o", "-g"})
    )
    if target_dir is not None:
        sources, targets = operands, [posixpath.join(target_dir, _basename(s)) for s in operands]
    elif len(operands) >= 2:
        sources, destination = operands[:-1], operands[-1]
        if destination.endswith("/") or len(sources) > 1 or destination in {".", ".."}:
            targets = [posixpath.join(destination, _basename(s)) for s in sources]
        else:
            # "cp a b": b is the file, or a folder receiving b/a; both are written.
            targets = [destination, *(posixpath.join(destination, _basename(s)) for s in sources)]
    else:
        return []
    return [*targets, *(sources if program == "mv" else [])]


def _program_effects(
    program: str, args: list[str], body: str
) -> tuple[list[str], str | None, bool]:
    """(files written, why it may rewrite unnamed files, whether it is an unknown program)."""
    if program == "tee":
        return _operands(args), None, False
    if program in {"touch", "truncate", "rm", "unlink", "shred"}:
        return _operands(args, frozenset({"-s", "--size", "-r", "-d", "-t"})), None, False
    if program in {"chmod", "chown", "chgrp"}:
        return _operands(args)[1:], None, False
    if program in {"cp", "mv", "install", "ln"}:
        return _copy_targets(program, args), None, False
    if program == "dd":
        return [word[3:] for word in args if word.startswith("of=")], None, False
    if program == "sort":
        found = [args[i + 1] for i, w in enumerate(args[:-1]) if w == "-o"]
        found += [w.split("=", 1)[1] for w in args if w.startswith("--output=")]
        return found, None, False
    if program in {"sed", "perl"}:
        in_place = any(
            word == "--in-place"
            or word.startswith("--in-place=")
            or (
                word.startswith("-") and not word.startswith("--") and "i" in word[1:].split(".")[0]
            )
            for word in args
        )
        if not in_place:
            return [], None, program == "perl"
        operands = _operands(
            args,
            frozenset(
                {"-e", "-f", "--expression", "--file", "-E"}
                if program == "sed"
                else {"-e", "-E", "-M", "-m", "-I"}
            ),
        )
        scripted = any(
            word in {"-e", "-f", "--expression", "--file", "-E"}
            or word.startswith(("--expression=", "--file="))
            for word in args
        )
        if program == "perl":
            scripted = scripted or any(
                w.startswith("-") and not w.startswith("--") and "e" in w for w in args
            )
        return (operands if scripted else operands[1:]), None, False
    if program == "find":
        if any(
            word in {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf"}
            for word in args
        ):
            return [], "`find` with -delete or -exec changes files it does not name", False
        return [], None, False
    if program == "patch":
        return [], "`patch` writes the files its diff names", False
    if program == "apply_patch":
        return [*patch_files(body), *patch_files(" ".join(args))], None, False
    if program == "git":
        return _git_effects(args)
    if program in _NEVER_WRITE:
        return [], None, False
    return [], None, True


def _git_effects(args: list[str]) -> tuple[list[str], str | None, bool]:
    position = 0
    while position < len(args) and args[position].startswith("-"):
        position += 2 if args[position] in {"-C", "-c", "--git-dir", "--work-tree"} else 1
    if position >= len(args):
        return [], None, False
    sub, rest = args[position], args[position + 1 :]
    if sub == "rm":
        return ([], None, False) if "--cached" in rest else (_operands(rest), None, False)
    if sub == "mv":
        return _copy_targets("mv", rest), None, False
    if sub == "restore" and "--staged" not in rest or sub == "checkout" and "--" in rest:
        paths = (
            rest[rest.index("--") + 1 :]
            if "--" in rest
            else _operands(rest, frozenset({"-s", "--source"}))
        )
        if paths:
            return paths, None, False
    if (
        sub in {"checkout", "switch"}
        and (rest[:1] in (["-b"], ["-B"], ["-c"], ["-C"]))
        and len(_operands(rest)) <= 2
    ):
        return [], None, False
    if sub == "stash" and rest[:1] in (["list"], ["show"]):
        return [], None, False
    if sub == "reset" and not any(w in {"--hard", "--merge", "--keep"} for w in rest):
        return [], None, False
    if sub in _GIT_REWRITES:
        return [], f"`git {sub}` may rewrite files it does not name", False
    if sub in _GIT_QUIET:
        return [], None, False
    return [], None, True
