"""Claude Code session logs (``~/.claude/projects/<cwd>/<session>.jsonl``).

Each line is an entry: ``user``, ``assistant``, ``system``, ``summary``... One API
message is spread over several ``assistant`` entries sharing ``message.id``, one
content block each. Results come back in ``user`` entries as ``tool_result`` blocks,
paired by ``tool_use_id``; ``is_error`` is often absent, which means success.

A session file also holds its subagents' work as ``isSidechain`` entries: those are
not the agent's own calls and are skipped. A subagent's own file (``subagents/...``),
where every entry is a sidechain, is read as its own chain — the first entry that
says ``isSidechain`` decides which kind of file it is.

A skill fetched with the ``Skill`` tool arrives as an ``isMeta`` user entry starting
``Base directory for this skill: DIR``; the ``Skill`` call then counts as reading
``DIR/SKILL.md``. The same body with no ``Skill`` call before it (a ``/skill`` typed
in the prompt) is a skill that arrived expanded.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from trysquare.sessions._tools import (
    ToolTable,
    arguments_in,
    call_paths,
    finished_part,
    logged_call_arguments,
)
from trysquare.sessions.base import (
    CallCollector,
    FilePart,
    LineCounter,
    LoggedReading,
    PathResolver,
    arguments_kept_or_logged,
    iter_entries,
    iter_positioned,
    kept_or_logged,
    skill_tags,
    text_of,
)

_ENTRY_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "queue-operation",
        "file-history-snapshot",
        "progress",
        "attachment",
        "custom-title",
    }
)
_SKILL_BASE = re.compile(r"^\s*Base directory for this skill:\s*(\S[^\n]*?)\s*$", re.MULTILINE)
_READS = {"Read": "file_path", "NotebookRead": "notebook_path"}
_QUIET_TOOLS = frozenset(
    {
        "Read",
        "NotebookRead",
        "Bash",
        "BashOutput",
        "KillShell",
        "KillBash",
        "Glob",
        "Grep",
        "LS",
        "WebFetch",
        "WebSearch",
        "TodoWrite",
        "TodoRead",
        "ExitPlanMode",
        "EnterPlanMode",
        "Skill",
        "SlashCommand",
        "AskUserQuestion",
        "ListMcpResourcesTool",
        "ReadMcpResourceTool",
        "ToolSearch",
        "TaskGet",
        "TaskUpdate",
        "TaskList",
        "TaskCreate",
        "TaskOutput",
        "TaskStop",
        "Monitor",
        "CronList",
    }
)
"""Tools that write no file of the repo (``Bash`` is read for what it writes)."""
_SUBAGENTS = frozenset({"Task", "Agent"})
_WRITES = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}


_TOOLS = ToolTable(
    reader="claude-code",
    reads={name: (key,) for name, key in _READS.items()},
    writes={name: (key,) for name, key in _WRITES.items()},
    shells=frozenset({"Bash"}),
    quiet=_QUIET_TOOLS,
    subagents=_SUBAGENTS,
)
_logged_input = logged_call_arguments("tool_use", "input")
"""The input of a ``tool_use``, read back from its entry."""


def _result_text(entry: dict[str, Any], use_id: str | None) -> str | None:
    """The text of the ``tool_result`` for ``use_id``, read back from its entry."""
    for block in entry["message"]["content"]:
        if isinstance(block, dict) and block.get("tool_use_id") == use_id:
            return text_of(block.get("content"))
    return None


class ClaudeCodeFormat:
    """The ``claude-code`` session format."""

    name = "claude-code"

    def sniff(self, head: list[dict[str, Any]]) -> bool:
        """Claude Code entries carry ``uuid``/``parentUuid``/``sessionId`` beside their type."""
        for entry in head:
            kind = entry.get("type")
            if not isinstance(kind, str):
                continue
            if kind in {"user", "assistant", "system"} and (
                "parentUuid" in entry or "uuid" in entry
            ):
                return True
            if kind in {"summary"} and "leafUuid" in entry:
                return True
            if kind in {"queue-operation", "file-history-snapshot"}:
                return True
        return False

    def read(self, files: list[Path], repo: Path | None) -> ClaudeCodeReading:
        """A lazy reading of the Claude Code session in ``files``."""
        return ClaudeCodeReading(files, repo)


def _prescan(file: Path) -> tuple[bool, str | None]:
    """(is a subagent's own file, the session's cwd), from the first entries that say."""
    sidechain: bool | None = None
    cwd: str | None = None
    for entry in iter_entries(file, LineCounter()):
        if sidechain is None and isinstance(entry.get("isSidechain"), bool):
            sidechain = entry["isSidechain"]
        if cwd is None and isinstance(entry.get("cwd"), str):
            cwd = entry["cwd"]
        if sidechain is not None and cwd is not None:
            break
    return bool(sidechain), cwd


class ClaudeCodeReading(LoggedReading):
    """One Claude Code session: the main chain of each file (see the module's docstring)."""

    def read_file(self, file: Path, start: int) -> FilePart:
        """Read one file in a single pass (after a look at its first entries)."""
        own_chain, cwd = _prescan(file)
        paths = PathResolver.for_session(cwd, self.repo)
        counter = LineCounter()
        calls = CallCollector(file)
        final_line: int | None = None
        skills: set[str] = set()
        skill_bodies: set[int] = set()
        final_id: object = None
        final_parts: list[str] = []
        for offset, entry in iter_positioned(file, counter):
            kind = entry.get("type")
            if isinstance(kind, (list, dict)):
                kind = ""  # hostile: an unknown type, not a key to look up
            if kind not in {"user", "assistant"}:
                if kind not in _ENTRY_TYPES:
                    counter.skipped += 1
                continue
            if entry.get("isSidechain") is True and not own_chain:
                continue
            message = entry.get("message")
            if not isinstance(message, dict):
                counter.skipped += 1
                continue
            content = message.get("content")
            if kind == "assistant":
                if entry.get("isApiErrorMessage") or not isinstance(content, list):
                    continue
                for block in content:
                    if not isinstance(block, dict):
                        continue
                    if block.get("type") == "text":
                        text = block.get("text")
                        if not isinstance(text, str) or not text.strip() or text == "(no content)":
                            continue
                        if message.get("id") != final_id or final_id is None:
                            final_id, final_parts = message.get("id"), []
                        final_parts.append(text)
                        final_line = counter.line
                    elif block.get("type") == "tool_use":
                        self._call(block, calls, paths, file, offset, counter.line)
                continue
            if isinstance(content, str):
                self._user_text(entry, content, calls, paths, skills, skill_bodies)
                continue
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_result":
                    use_id = block.get("tool_use_id")
                    text = text_of(block.get("content"))
                    calls.result(
                        use_id,
                        kept_or_logged(text, file, offset, use_id, _result_text),
                        block.get("is_error") is True,
                        line=counter.line,
                    )
                elif block.get("type") == "text" and isinstance(block.get("text"), str):
                    self._user_text(entry, block["text"], calls, paths, skills, skill_bodies)
        return finished_part(
            file,
            start,
            counter,
            calls,
            final_response="\n".join(final_parts) if final_parts else None,
            final_line=final_line,
            skills=skills,
        )

    @staticmethod
    def _call(
        block: dict[str, Any],
        calls: CallCollector,
        paths: PathResolver,
        file: Path,
        offset: int,
        line: int = 0,
    ) -> None:
        name = str(block.get("name", ""))
        arguments = arguments_in(block, "input")
        reads, writes, more = call_paths(_TOOLS, name, arguments, paths)
        use_id = block.get("id")
        kept = arguments_kept_or_logged(arguments, file, offset, use_id, _logged_input)
        calls.call(use_id, name, kept, reads, writes, line=line, **more)

    @staticmethod
    def _user_text(
        entry: dict[str, Any],
        text: str,
        calls: CallCollector,
        paths: PathResolver,
        skills: set[str],
        skill_bodies: set[int],
    ) -> None:
        """A user text: a skill's body (after a ``Skill`` call, or expanded), or a prompt."""
        base = _SKILL_BASE.search(text) if entry.get("isMeta") else None
        if base is None:
            skills.update(skill_tags(text))
            return
        folder = base.group(1).rstrip("/")
        source = entry.get("sourceToolUseID")
        index = calls.index_of(source) if isinstance(source, str) else None
        if index is None:
            last = calls.last("Skill")
            if last is not None and last not in skill_bodies:
                index = last
        if index is None:
            skills.add(posixpath.basename(folder))
            return
        skill_bodies.add(index)
        calls.add_reads(index, paths.resolve_all(folder + "/SKILL.md"))


__all__ = ["ClaudeCodeFormat", "ClaudeCodeReading"]
