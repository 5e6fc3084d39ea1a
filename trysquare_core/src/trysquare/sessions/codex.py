"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}``: a ``session_meta`` first (with the
``cwd``), then ``response_item``s — ``message``, ``function_call`` (arguments as a JSON
string), ``function_call_output``, ``custom_tool_call`` (``apply_patch`` in its
freeform form), ``local_shell_call``... — among ``event_msg`` and ``turn_context``
lines. Older rollouts wrote the items bare (no ``payload`` wrapper) after a first
``{"id", "timestamp", "instructions"}`` line; both are read.

Codex has no read or write tool: files are read through the shell (see
``_shell.py`` for what counts) and written with ``apply_patch``, whose envelope names
every file it adds, updates (and moves to) or deletes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from trysquare.sessions._shell import patch_files, script_of, shell_reads
from trysquare.sessions._shell_writes import shell_effects
from trysquare.sessions._tools import ToolTable, call_paths, finished_part
from trysquare.sessions.base import (
    CallCollector,
    FilePart,
    LineCounter,
    LoggedReading,
    PathResolver,
    arguments_kept_or_logged,
    iter_positioned,
    kept_or_logged,
    skill_tags,
    text_of,
)

_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
        "ghost_snapshot",
        "compaction",
        "compaction_summary",
        "image_generation_call",
    }
)
_LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_SHELLS = frozenset({"shell", "container.exec", "shell_command", "exec_command", "local_shell"})
_READ_TOOLS = frozenset({"read_file", "view_image"})
_QUIET_TOOLS = frozenset(
    {
        "update_plan",
        "web_search",
        "list_dir",
        "grep_files",
        "list_mcp_resources",
        "read_mcp_resource",
    }
)
"""Tools that write no file of the repo."""
_TOOLS = ToolTable(
    reader="codex",
    reads={name: ("path", "file_path") for name in _READ_TOOLS},
    quiet=_QUIET_TOOLS,
)
_EXIT = re.compile(r"^(?:Exit code:|Process exited with code)\s*(-?\d+)", re.MULTILINE)
_CWD = re.compile(r"<cwd>([^<]+)</cwd>")
_TEXT_KINDS = frozenset({"input_text", "output_text", "text"})


class CodexFormat:
    """The ``codex`` session format (Codex CLI rollouts)."""

    name = "codex"

    def sniff(self, head: list[dict[str, Any]]) -> bool:
        """A rollout opens with ``session_meta`` or wraps its lines as ``{type, payload}``."""
        for entry in head:
            kind = entry.get("type")
            if not isinstance(kind, str):
                continue
            if kind == "session_meta":
                return True
            if kind in _LINE_TYPES and isinstance(entry.get("payload"), dict):
                return True
        first = head[0] if head else {}
        return "type" not in first and "id" in first and "instructions" in first

    def read(self, files: list[Path], repo: Path | None) -> CodexReading:
        """A lazy reading of the Codex rollout(s) in ``files``."""
        return CodexReading(files, repo)


def _arguments(raw: object) -> dict[str, Any]:
    """A function call's arguments: its JSON string parsed; a non-object kept under ``arguments``."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {"arguments": raw}
        if isinstance(parsed, dict):
            return parsed
    return {"arguments": raw}


def _output(raw: object) -> tuple[str, bool]:
    """(text, failed) of a call's output, in any of the shapes Codex has written."""
    if isinstance(raw, dict):
        text, failed = _output(raw.get("content", raw.get("output", "")))
        return text, failed or raw.get("success") is False
    if isinstance(raw, list):
        return text_of(raw, _TEXT_KINDS), False
    if not isinstance(raw, str):
        return "", False
    text = raw
    failed = False
    if raw.startswith("{"):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
            text = parsed["output"]
            metadata = parsed.get("metadata")
            if isinstance(metadata, dict) and isinstance(metadata.get("exit_code"), int):
                failed = metadata["exit_code"] != 0
    exit_code = _EXIT.search(raw[:600])
    if exit_code is not None and int(exit_code.group(1)) != 0:
        failed = True
    if text.startswith("apply_patch verification failed"):
        failed = True
    return text, failed


def _call_arguments(item: dict[str, Any]) -> dict[str, Any]:
    """A call item's arguments as a dict, in each of the call shapes."""
    kind = item.get("type")
    if kind == "custom_tool_call":
        return {"input": item.get("input")}
    if kind == "local_shell_call":
        action = item.get("action")
        return dict(action) if isinstance(action, dict) else {}
    arguments = _arguments(item.get("arguments"))
    if item.get("name") == "apply_patch" and "input" not in arguments and "arguments" in arguments:
        return {"input": arguments["arguments"]}
    return arguments


def _logged_arguments(entry: dict[str, Any], key: str | None) -> dict[str, Any]:
    """A call's arguments, read back from its line (wrapped in a payload or bare)."""
    payload = entry.get("payload")
    item: dict[str, Any] = payload if isinstance(payload, dict) else entry
    return _call_arguments(item)


def _output_text(entry: dict[str, Any], key: str | None) -> str:
    """A call's output text, read back from its line (wrapped in a payload or bare)."""
    payload = entry.get("payload")
    item: dict[str, Any] = payload if isinstance(payload, dict) else entry
    return _output(item.get("output"))[0]


def _paths_of(
    name: str, arguments: dict[str, Any], paths: PathResolver
) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, Any]]:
    """(reads, writes, what else :meth:`CallCollector.call` needs) of one Codex call."""
    if name == "apply_patch":
        patch = arguments.get("input", arguments.get("patch", arguments.get("arguments")))
        return (), paths.resolve_all(patch_files(patch)), {}
    if name in _SHELLS:
        command = arguments.get("command", arguments.get("cmd"))
        workdir = arguments.get("workdir", arguments.get("working_directory"))
        base = workdir if isinstance(workdir, str) else None
        script = script_of(command)
        reads = paths.resolve_all(shell_reads(script), base)
        effects = shell_effects(script)
        writes = paths.resolve_all([*patch_files(script), *effects.writes], base)
        return (
            reads,
            writes,
            {"shell": True, "unclear": effects.unclear, "mentions": effects.mentions},
        )
    if name == "write_stdin":
        return (
            (),
            (),
            {"unclear": "'write_stdin' types into a running command, whose writes are not named"},
        )
    return call_paths(_TOOLS, name, arguments, paths)


class CodexReading(LoggedReading):
    """One Codex session (a rollout per file)."""

    def read_file(self, file: Path, start: int) -> FilePart:
        """Read one rollout in a single pass."""
        counter = LineCounter()
        calls = CallCollector(file)
        skills: set[str] = set()
        failed_ids: set[str] = set()
        final: str | None = None
        final_line: int | None = None
        cwd: str | None = None
        paths = PathResolver.for_session(None, self.repo)

        def found_cwd(value: object) -> None:
            nonlocal cwd, paths
            if cwd is None and isinstance(value, str) and value:
                cwd = value
                paths = PathResolver.for_session(cwd, self.repo)

        for number, (offset, entry) in enumerate(iter_positioned(file, counter)):
            kind = entry.get("type")
            if isinstance(kind, (list, dict)):
                kind = ""  # hostile: an unknown type, not a key to look up
            payload = entry.get("payload")
            if kind in _LINE_TYPES and isinstance(payload, dict):
                if kind == "session_meta":
                    found_cwd(payload.get("cwd"))
                    continue
                if kind == "turn_context":
                    found_cwd(payload.get("cwd"))
                    continue
                if kind == "event_msg":
                    self._event(payload, failed_ids)
                    continue
                if kind == "compacted":
                    continue
                item = payload
            elif kind in _ITEM_TYPES:
                item = entry  # an older rollout: the item itself is the line
            elif kind is None and (
                "record_type" in entry or (number == 0 and "id" in entry and "timestamp" in entry)
            ):
                continue  # an older rollout's header or state marker
            else:
                counter.skipped += 1
                continue
            item_type = item.get("type")
            if isinstance(item_type, (list, dict)):
                item_type = ""  # hostile: an unknown item, not a key to look up
            if item_type == "message":
                text = text_of(item.get("content"), _TEXT_KINDS)
                if item.get("role") == "assistant":
                    if text.strip():
                        final, final_line = text, counter.line
                elif item.get("role") == "user":
                    skills.update(skill_tags(text))
                    if cwd is None and "<cwd>" in text:
                        match = _CWD.search(text)
                        if match:
                            found_cwd(match.group(1).strip())
            elif item_type in {"function_call", "custom_tool_call"}:
                name = str(item.get("name", ""))
                arguments = _call_arguments(item)
                reads, writes, more = _paths_of(name, arguments, paths)
                kept = arguments_kept_or_logged(arguments, file, offset, None, _logged_arguments)
                calls.call(
                    item.get("call_id"), name, kept, reads, writes, line=counter.line, **more
                )
            elif item_type == "local_shell_call":
                arguments = _call_arguments(item)
                reads, writes, more = _paths_of("local_shell", arguments, paths)
                calls.call(
                    item.get("call_id") or item.get("id"),
                    "local_shell",
                    arguments,
                    reads,
                    writes,
                    line=counter.line,
                    **more,
                )
            elif item_type in {"function_call_output", "custom_tool_call_output"}:
                text, failed = _output(item.get("output"))
                logged = kept_or_logged(text, file, offset, None, _output_text)
                calls.result(item.get("call_id"), logged, failed, line=counter.line)
            elif item_type not in _ITEM_TYPES:
                counter.skipped += 1
        for call_id in failed_ids:
            calls.fail(call_id)
        return finished_part(
            file,
            start,
            counter,
            calls,
            final_response=final,
            final_line=final_line,
            skills=skills,
        )

    @staticmethod
    def _event(payload: dict[str, Any], failed_ids: set[str]) -> None:
        """An event that reports a call's exit apart from its output."""
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            return
        kind = payload.get("type")
        if kind == "exec_command_end":
            exit_code = payload.get("exit_code")
            if isinstance(exit_code, int) and exit_code != 0:
                failed_ids.add(call_id)
        elif kind == "patch_apply_end" and payload.get("success") is False:
            failed_ids.add(call_id)


__all__ = ["CodexFormat", "CodexReading"]
