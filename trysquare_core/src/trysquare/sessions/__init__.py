"""What the agent did, read from its own session log.

A metric of process (did the agent open the skill, which file did it write first)
reads the archived session, so it replays months later. Each agent writes its log
its own way; a *session format* turns one into the same few facts:

- :meth:`SessionReading.tool_calls` — every call the agent made, as :class:`ToolCall`;
- :meth:`SessionReading.final_response` — the agent's last prose;
- :meth:`SessionReading.skills_expanded` — skills that arrived expanded in a prompt,
  leaving no call to count.

The three built-in formats (``pi``, ``claude-code``, ``codex``) and any plugin's are
registered through the ``trysquare_register_session_formats`` hook. This module
stays cheap to import: ``trysquare.assay`` imports it on first use, and the format
modules and the plugin manager are only imported by :func:`open_session`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trysquare.sessions.reading import (
    HEAD_LINES,
    LoggedValue,
    SessionFormat,
    SessionReading,
    ToolCall,
    path_matches,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "LoggedValue",
    "SessionFormat",
    "SessionReading",
    "ToolCall",
    "final_response",
    "open_session",
    "path_matches",
]


def session_files(path: Path) -> list[Path]:
    """The log files a session path stands for: the file itself, or a folder's ``*.jsonl`` by name."""
    from trysquare.errors import RunError

    if path.is_dir():
        files = sorted(
            (child for child in path.iterdir() if child.suffix == ".jsonl" and child.is_file()),
            key=lambda child: child.name,
        )
        if not files:
            raise RunError(f"session folder {path} holds no .jsonl file.")
        return files
    if not path.is_file():
        raise RunError(f"session log {path} does not exist.")
    return [path]


def read_head(files: Sequence[Path], limit: int = HEAD_LINES) -> list[dict[str, Any]]:
    """The first ``limit`` lines of the first file that has any, parsed; broken lines left out."""
    from trysquare.sessions._json import loads

    for file in files:
        head: list[dict[str, Any]] = []
        with file.open("rb") as stream:
            for line in stream:
                if not line.strip():
                    continue
                try:
                    entry = loads(line)
                except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deep
                    continue
                if isinstance(entry, dict):
                    head.append(entry)
                if len(head) >= limit:
                    break
        if head:
            return head
    return []


def _installed_formats() -> Mapping[str, SessionFormat]:
    from trysquare import plugins

    return plugins.session_formats()


def open_session(
    path: Path | str,
    *,
    format: str | None = None,
    repo: Path | str | None = None,
    formats: Mapping[str, SessionFormat] | None = None,
) -> SessionReading:
    """Open the session log at ``path`` (a ``.jsonl`` file or a folder of them).

    :param format: a registered format's name; ``None`` detects it from the content
        (the first format, in registration order, whose ``sniff`` accepts the head).
    :param repo: the measured clone's current path, to make paths repo-relative.
    :param formats: the formats to choose from; default: every installed one.
    :raises trysquare.errors.RunError: the log is missing, its format is unknown or
        cannot be told from its content — one sentence naming the file.
    """
    from trysquare.errors import RunError

    path = Path(path)
    files = session_files(path)
    available = dict(formats) if formats is not None else dict(_installed_formats())
    known = ", ".join(sorted(available)) or "none"
    if format is not None:
        chosen = available.get(format)
        if chosen is None:
            raise RunError(
                f"session log {path}: unknown session format {format!r} (installed: {known})."
            )
    else:
        head = read_head(files)
        chosen = next((fmt for fmt in available.values() if head and fmt.sniff(head)), None)
        if chosen is None:
            raise RunError(
                f"cannot tell which agent wrote session log {path}: its first lines match "
                f"no installed session format ({known}); set session_format in run.toml."
            )
    return chosen.read(files, Path(repo) if repo is not None else None)


def final_response(
    path: Path | str,
    *,
    format: str | None = None,
    repo: Path | str | None = None,
    formats: Mapping[str, SessionFormat] | None = None,
) -> str | None:
    """The agent's final prose in the session at ``path`` (see :func:`open_session`)."""
    return open_session(path, format=format, repo=repo, formats=formats).final_response()
