"""What a package manager writes without naming it.

A package manager writes its manifest and lockfile without naming them: ``npm install
left-pad`` rewrites package.json and package-lock.json. Each known subcommand says what
it writes for certain (``writes``) and what it may write (kept as *mentions*, so
``first_write`` of such a file before any other write is unjudged, not "never").
"""

from __future__ import annotations

import posixpath

import attrs

from trysquare.sessions._shell import _join


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
