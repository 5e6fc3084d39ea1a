"""Turning the paths an agent named into repo-relative POSIX paths.

An agent names files every way a shell allows: absolute, relative to where it was
started, ``~/...``, or pi's ``@path`` mention. The log records the working directory
the agent was started in (its *cwd*), and that is the repo root as the agent saw it.
Runs are moved after they finish, so the log's cwd need not be where the clone lives
now: a path is made relative to the log's cwd first, and to the clone's current path
(``repo``) second. Where the log's cwd lies inside ``repo`` (an agent started in a
sub-folder), paths are made relative to ``repo``, so they stay repo-relative. A path
under neither is kept absolute (a skill in ``~/.claude/skills``, a file in ``/tmp``).
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

import attrs

_HOME = re.compile(r"^(/Users/[^/]+|/home/[^/]+|/root)(?:/|$)")


def _under(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` when it lies under it (both normalised), else ``None``."""
    if path == root:
        return "."
    prefix = root if root.endswith("/") else root + "/"
    if path.startswith(prefix):
        return path[len(prefix) :]
    return None


def _home_of(cwd: str | None) -> str:
    """The agent's home: read from its cwd when that sits in one, else ours."""
    if cwd:
        found = _HOME.match(cwd)
        if found:
            return found.group(1)
    return os.path.expanduser("~").replace(os.sep, "/")


@attrs.frozen
class PathResolver:
    """Resolves the paths of one session (one cwd) against the measured clone."""

    cwd: str | None
    """The working directory the log records (POSIX), or ``None`` when it has none."""
    repo: str | None
    """Where the measured clone lives now (absolute, POSIX), or ``None``."""
    home: str
    _seen: dict[tuple[str, str | None], str | None] = attrs.field(
        factory=dict, eq=False, hash=False, repr=False
    )
    """Paths already resolved: agents name the same few files again and again."""

    @classmethod
    def for_session(cls, cwd: str | None, repo: Path | None) -> PathResolver:
        """A resolver for a log recording ``cwd``, measured against the clone at ``repo``."""
        clean = posixpath.normpath(cwd.replace("\\", "/")) if cwd else None
        where = posixpath.normpath(repo.resolve().as_posix()) if repo is not None else None
        return cls(cwd=clean, repo=where, home=_home_of(clean))

    def resolve(self, raw: object, base: str | None = None) -> str | None:
        """A repo-relative POSIX path for ``raw``, absolute when outside; ``None`` if empty.

        :param base: the directory the call ran in when it names its own (a shell's
            ``workdir``); relative to the cwd when itself relative.
        """
        if not isinstance(raw, str):
            return None
        path = raw.strip()
        path = path.removeprefix("@")
        if not path:
            return None
        if path == "~" or path.startswith("~/"):
            path = self.home + path[1:]
        cwd = self.cwd
        if not path.startswith("/"):
            if cwd is not None and not cwd.startswith("/"):
                # A log whose cwd was rewritten into a relative form (anonymised test
                # data): paths that spell the cwd out are under it.
                inside = _under(posixpath.normpath(path), cwd)
                if inside is not None:
                    return inside
            if base:
                base_dir = self.resolve(base)
                if base_dir is not None and base_dir != ".":
                    path = posixpath.join(base_dir, path)
            if cwd is not None and cwd.startswith("/") and not path.startswith("/"):
                path = posixpath.join(cwd, path)
        path = posixpath.normpath(path)
        if not path.startswith("/"):
            return path
        if self.repo is not None and cwd is not None and _under(cwd, self.repo) is not None:
            inside = _under(path, self.repo)
            if inside is not None:
                return inside
        if cwd is not None:
            inside = _under(path, cwd)
            if inside is not None:
                return inside
        if self.repo is not None:
            inside = _under(path, self.repo)
            if inside is not None:
                return inside
        return path

    def resolve_all(self, raws: object, base: str | None = None) -> tuple[str, ...]:
        """:meth:`resolve` over several paths, dropping empties and repeats, order kept."""
        known = self._seen
        if type(raws) is str:  # the usual case: one path, most often one seen before
            key = (raws, base)
            resolved = (
                known[key] if key in known else known.setdefault(key, self.resolve(raws, base))
            )
            return () if resolved is None else (resolved,)
        seen: dict[str, None] = {}
        for raw in raws if isinstance(raws, (list, tuple)) else (raws,):
            if not isinstance(raw, str):
                continue
            key = (raw, base)
            if key in known:
                resolved = known[key]
            else:
                resolved = known[key] = self.resolve(raw, base)
            if resolved is not None:
                seen.setdefault(resolved, None)
        return tuple(seen)
