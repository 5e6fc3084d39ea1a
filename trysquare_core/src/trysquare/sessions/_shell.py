"""The files a shell command plainly reads, and the patches it applies.

Agents read files through their shell as often as through a read tool (Codex has no
read tool at all), so a skill opened with ``cat .../SKILL.md`` must count as read.
Only the plain readers are recognised — ``cat``, ``head``, ``tail``, ``sed -n``,
``nl``, ``less``, ``more``, ``bat`` and ``<`` redirections — never a guess about what
``grep`` or a script touched.
"""

from __future__ import annotations

import functools
import posixpath
import re
import shlex

import attrs

_READERS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "sed"})
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})
_VALUED = {"head": {"-n", "-c"}, "tail": {"-n", "-c"}, "sed": {"-e", "-f"}, "nl": {"-w", "-s"}}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
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


def _words(line: str) -> list[str]:
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


def _simple_commands(script: str) -> list[list[str]]:
    """The script's simple commands as word lists; heredoc bodies are not commands."""
    commands: list[list[str]] = []
    heredocs: list[str] = []
    for line in script.splitlines():
        if heredocs:
            if line.strip() == heredocs[0]:
                heredocs.pop(0)
            continue
        try:
            words = _words(line)
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
    for words in _simple_commands(script):
        while words and _ASSIGNMENT.match(words[0]):
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


# --- what a shell command writes -----------------------------------------------------
#
# ``first_write`` must not read "cannot tell" as "did not write". A shell command is
# classified one simple command at a time: a redirection onto a file, ``tee``,
# ``sed -i``, ``perl -i``, ``cp``/``mv``/``install``/``ln`` onto it, ``touch``,
# ``truncate``, ``dd of=``, ``chmod`` and the deletions (``rm``, ``unlink``,
# ``git rm``, the source of ``mv``) write the files they name. A program known to
# write nothing (a reader, ``grep``, ``ls``, ``git diff``...) writes nothing. Any
# other program (an interpreter, a build tool, a script) may write whatever it
# names: its words are kept as *mentions*. A command that rewrites files without
# naming them (``git stash``, ``git checkout BRANCH``, ``patch``, ``find -delete``)
# is *unclear* about every file.


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


def _commands_with_bodies(script: str) -> list[tuple[list[str], str]] | None:
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
            words = _words(text)
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
    commands = _commands_with_bodies(script)
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
        while words and (_ASSIGNMENT.match(words[0]) or posixpath.basename(words[0]) in _PREFIXES):
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


def _join(cwd: str | None, path: str) -> str:
    if cwd is None or path.startswith(("/", "~")):
        return path
    return posixpath.join(cwd, path)


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


# --- package managers ------------------------------------------------------------------
#
# A package manager writes its manifest and lockfile without naming them: ``npm install
# left-pad`` rewrites package.json and package-lock.json. Each known subcommand says what
# it writes for certain (``writes``) and what it may write (kept as *mentions*, so
# ``first_write`` of such a file before any other write is unjudged, not "never").


@attrs.frozen
class _Manager:
    """One package manager: its files, and the options that move it to another folder."""

    manifest: str
    locks: tuple[str, ...]
    installed: str | None
    """The folder the packages are installed into inside the project (``node_modules``)."""
    directory_options: frozenset[str]
    adds: frozenset[str]
    """Subcommands that change the manifest and the lockfile."""
    installs: frozenset[str]
    """Subcommands that install what the lockfile says (and may rewrite it)."""
    updates: frozenset[str]
    """Subcommands that rewrite the lockfile (and may rewrite the manifest)."""
    manifest_only: frozenset[str] = frozenset()
    quiet: frozenset[str] = frozenset()
    """Subcommands that write nothing in the project."""


_NODE_QUIET = frozenset(
    {
        "ls",
        "list",
        "view",
        "info",
        "show",
        "outdated",
        "why",
        "explain",
        "help",
        "--version",
        "-v",
        "--help",
        "whoami",
        "search",
        "bin",
        "root",
        "prefix",
        "config",
        "cache",
        "doctor",
        "licenses",
        "store",
    }
)
_MANAGERS: dict[str, _Manager] = {
    "npm": _Manager(
        "package.json",
        ("package-lock.json",),
        "node_modules",
        frozenset({"--prefix", "-C"}),
        adds=frozenset({"uninstall", "remove", "rm", "r", "un", "unlink"}),
        installs=frozenset(
            {
                "install",
                "i",
                "in",
                "ins",
                "inst",
                "insta",
                "instal",
                "isnt",
                "isnta",
                "isntal",
                "isntall",
                "add",
                "ci",
                "clean-install",
                "install-clean",
                "ic",
            }
        ),
        updates=frozenset(
            {"update", "up", "upgrade", "udpate", "dedupe", "ddp", "prune", "rebuild", "rb"}
        ),
        manifest_only=frozenset({"init", "create", "innit"}),
        quiet=_NODE_QUIET,
    ),
    "yarn": _Manager(
        "package.json",
        ("yarn.lock",),
        "node_modules",
        frozenset({"--cwd"}),
        adds=frozenset({"add", "remove"}),
        installs=frozenset({"install"}),
        updates=frozenset({"upgrade", "up", "dedupe", "upgrade-interactive"}),
        manifest_only=frozenset({"init"}),
        quiet=_NODE_QUIET,
    ),
    "pnpm": _Manager(
        "package.json",
        ("pnpm-lock.yaml",),
        "node_modules",
        frozenset({"-C", "--dir", "--prefix"}),
        adds=frozenset({"add", "remove", "rm", "uninstall", "un"}),
        installs=frozenset({"install", "i", "ci", "install-test", "it"}),
        updates=frozenset({"update", "up", "upgrade", "dedupe", "prune", "rebuild", "rb"}),
        manifest_only=frozenset({"init"}),
        quiet=_NODE_QUIET,
    ),
    "bun": _Manager(
        "package.json",
        ("bun.lock", "bun.lockb"),
        "node_modules",
        frozenset({"--cwd"}),
        adds=frozenset({"add", "a", "remove", "rm"}),
        installs=frozenset({"install", "i"}),
        updates=frozenset({"update"}),
        manifest_only=frozenset({"init"}),
    ),
    "uv": _Manager(
        "pyproject.toml",
        ("uv.lock",),
        ".venv",
        frozenset({"--directory", "--project"}),
        adds=frozenset({"add", "remove"}),
        installs=frozenset({"sync"}),
        updates=frozenset({"lock"}),
        manifest_only=frozenset({"init"}),
        quiet=frozenset({"tree", "--version", "help", "python", "cache", "self", "tool"}),
    ),
    "poetry": _Manager(
        "pyproject.toml",
        ("poetry.lock",),
        None,
        frozenset({"-C", "--directory", "-P", "--project"}),
        adds=frozenset({"add", "remove"}),
        installs=frozenset({"install", "sync"}),
        updates=frozenset({"lock", "update"}),
        manifest_only=frozenset({"init"}),
        quiet=frozenset({"show", "check", "--version", "help", "env", "config"}),
    ),
    "pdm": _Manager(
        "pyproject.toml",
        ("pdm.lock",),
        None,
        frozenset({"-p", "--project"}),
        adds=frozenset({"add", "remove"}),
        installs=frozenset({"install", "sync"}),
        updates=frozenset({"lock", "update"}),
        manifest_only=frozenset({"init"}),
        quiet=frozenset({"list", "show", "info", "--version", "config"}),
    ),
    "cargo": _Manager(
        "Cargo.toml",
        ("Cargo.lock",),
        None,
        frozenset({"--manifest-path", "-C"}),
        adds=frozenset({"add", "remove", "rm"}),
        installs=frozenset({"fetch", "generate-lockfile"}),
        updates=frozenset({"update", "upgrade"}),
        manifest_only=frozenset(),
        quiet=frozenset({"tree", "--version", "help", "search", "metadata", "locate-project"}),
    ),
    "go": _Manager(
        "go.mod",
        ("go.sum",),
        None,
        frozenset({"-C"}),
        adds=frozenset({"get"}),
        installs=frozenset({"mod download"}),
        updates=frozenset({"mod tidy"}),
        manifest_only=frozenset({"mod init", "mod edit"}),
        quiet=frozenset(
            {"version", "env", "list", "doc", "help", "mod graph", "mod why", "mod verify"}
        ),
    ),
}
_MANAGER_VALUED = frozenset(
    {
        "--registry",
        "--cache",
        "--tag",
        "--workspace",
        "--filter",
        "-F",
        "--python",
        "-p",
        "--package",
        "--group",
        "--optional",
        "--extra",
        "--index",
        "--features",
        "--rename",
        "--target",
        "--source",
        "--branch",
        "--git",
        "--path",
        "--loglevel",
    }
)


def _manager_effects(program: str, args: list[str]) -> tuple[list[str], set[str]] | None:
    """(files a package manager writes, names it may write), or ``None`` when not one.

    ``None`` also for subcommands that run the project's own scripts (``npm test``,
    ``npm run X``, ``cargo build``): they stay unknown programs.
    """
    manager = _MANAGERS.get(program)
    if program in {"pip", "pip3"} or (program == "uv" and args[:1] == ["pip"]):
        rest = args[1:] if program == "uv" else args
        if rest[:1] != ["install"]:
            return None
        targets = [
            rest[i + 1] for i, w in enumerate(rest[:-1]) if w in {"-t", "--target", "--prefix"}
        ]
        targets += [w.split("=", 1)[1] for w in rest if w.startswith(("--target=", "--prefix="))]
        return (targets, set()) if targets else None
    if manager is None:
        return None
    folder: str | None = None
    words: list[str] = []
    skip_to: str | None = None
    for word in args:
        if skip_to is not None:
            folder = word if skip_to in manager.directory_options else folder
            skip_to = None
            continue
        option, _, value = word.partition("=")
        if option in manager.directory_options and word.startswith("-"):
            if value:
                folder = value
            else:
                skip_to = option
            continue
        if word.startswith("-") and "=" not in word and word in _MANAGER_VALUED:
            skip_to = word
            continue
        words.append(word)
    if folder is not None and program == "cargo" and folder.endswith("Cargo.toml"):
        folder = posixpath.dirname(folder) or None
    operands = [word for word in words if not word.startswith("-")]
    if not operands:
        if program in {"yarn", "bun"} and not words:  # a bare `yarn` installs
            operands = ["install"]
        else:
            return None
    sub = operands[0]
    if program == "go" and sub == "mod" and len(operands) > 1:
        sub = f"mod {operands[1]}"
    names = operands[2:] if sub.startswith("mod ") else operands[1:]
    global_install = any(w in {"-g", "--global", "--location=global"} for w in words)
    if program == "npm" and sub == "pkg":
        action = operands[1] if len(operands) > 1 else ""
        if action in {"set", "delete", "fix"}:
            return [_join(folder, manager.manifest)], set()
        return [], set()
    if program == "yarn" and sub == "global" or global_install:
        return [], set()
    no_save = any(
        w
        in {
            "--no-save",
            "--save=false",
            "--no-lockfile",
            "--frozen-lockfile",
            "--immutable",
            "--locked",
            "--frozen",
        }
        for w in words
    )
    manifest = _join(folder, manager.manifest)
    locks = [_join(folder, lock) for lock in manager.locks]
    installed = [] if manager.installed is None else [_join(folder, manager.installed)]
    installs_named = sub in manager.installs and names and program in _NODE_MANAGERS
    if sub in manager.adds or installs_named:
        if no_save:
            return installed, set()
        if program == "bun":
            return [manifest, *installed], {posixpath.basename(lock) for lock in locks}
        return [manifest, *locks, *installed], set()
    if sub in manager.installs:
        maybe = (
            set()
            if no_save or sub in {"ci", "clean-install", "install-clean", "ic"}
            else {posixpath.basename(lock) for lock in manager.locks}
        )
        return installed, maybe
    if sub in manager.updates:
        return [*locks, *installed], {manager.manifest}
    if sub in manager.manifest_only:
        return [manifest], set()
    if sub in manager.quiet:
        return [], set()
    return None


_NODE_MANAGERS = frozenset({"npm", "yarn", "pnpm", "bun"})
