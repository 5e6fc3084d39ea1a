"""pi (``badlogic/pi-mono`` coding agent) session logs.

Line 1 is a header ``{"type": "session", "version": N, "cwd": ...}``. Version 1 is a
plain sequence of entries. Versions 2 and 3 chain entries by ``id``/``parentId`` into a
tree: going back to an earlier message and continuing forks it, and only the *active
branch* — the parent chain of the file's last entry — is what the agent's final
context saw. Reading that branch takes two passes: the first only collects
``id -> parentId`` (read from the line's head without a JSON parse where pi's own
key order allows), the second parses only the lines on the branch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trysquare.sessions._shell import shell_reads
from trysquare.sessions.base import (
    CallCollector,
    FilePart,
    LoggedReading,
    PathResolver,
    skill_tags,
    text_of,
)

_ENTRY_TYPES = frozenset(
    {
        "session",
        "message",
        "model_change",
        "thinking_level_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
    }
)
_ROLES = frozenset(
    {
        "user",
        "assistant",
        "toolResult",
        "bashExecution",
        "custom",
        "hookMessage",
        "branchSummary",
        "compactionSummary",
    }
)
# pi writes every entry as {"type":..,"id":..,"parentId":..,...}: the tree is read from
# there without parsing the line. Any other spelling falls back to json.loads.
_HEAD = re.compile(rb'^\{"type":"[^"\\]*","id":"([^"\\]*)","parentId":(?:null|"([^"\\]*)")')


class PiFormat:
    """The ``pi`` session format."""

    name = "pi"

    def sniff(self, head: list[dict[str, Any]]) -> bool:
        """A pi log opens with a ``session`` header, or at least carries pi ``message`` entries."""
        first = head[0] if head else {}
        if first.get("type") == "session" and ("cwd" in first or "version" in first):
            return True
        return any(
            entry.get("type") == "message"
            and isinstance(entry.get("message"), dict)
            and entry["message"].get("role") in {"user", "assistant", "toolResult"}
            for entry in head
        )

    def read(self, files: list[Path], repo: Path | None) -> PiReading:
        """A lazy reading of the pi session in ``files``."""
        return PiReading(files, repo)


def _tool_paths(
    name: str, arguments: dict[str, Any], paths: PathResolver
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(reads, writes) of one pi built-in tool call."""
    target = arguments.get("path", arguments.get("file_path"))
    if name == "read":
        return paths.resolve_all(target), ()
    if name in {"write", "edit"}:
        return (), paths.resolve_all(target)
    if name == "bash":
        return paths.resolve_all(shell_reads(arguments.get("command"))), ()
    return (), ()


class PiReading(LoggedReading):
    """One pi session; see the module's docstring for the branch rule."""

    def read_file(self, file: Path, start: int) -> FilePart:
        """Read one pi log: its active branch when it is a tree, else every entry."""
        header = self._header(file)
        paths = PathResolver.for_session(
            header.get("cwd") if isinstance(header.get("cwd"), str) else None, self.repo
        )
        state = _State(paths)
        version = header.get("version", 1)
        if isinstance(version, int) and version >= 2:
            active, tree_skipped = self._active_branch(file, bool(header))
            state.skipped += tree_skipped
            self._replay_branch(file, bool(header), active, state)
        else:
            self._replay_all(file, bool(header), state)
        return FilePart(
            calls=state.calls.finish(start),
            final_response=state.final,
            skills=frozenset(state.skills),
            skipped=state.skipped,
        )

    @staticmethod
    def _header(file: Path) -> dict[str, Any]:
        """The file's ``session`` header, or ``{}`` when its first line is something else."""
        with file.open("rb") as stream:
            for line in stream:
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    return {}
                if isinstance(entry, dict) and entry.get("type") == "session":
                    return entry
                return {}
        return {}

    @staticmethod
    def _lines(file: Path, has_header: bool) -> Iterator[bytes]:
        """The file's non-blank lines after the header."""
        with file.open("rb") as stream:
            seen_header = not has_header
            for line in stream:
                if not seen_header:
                    if line.strip():
                        seen_header = True
                    continue
                yield line

    def _active_branch(self, file: Path, has_header: bool) -> tuple[set[str], int]:
        """Pass 1: the ids on the parent chain of the last entry, and the lines skipped."""
        parents: dict[str, str | None] = {}
        skipped = 0
        leaf: str | None = None
        previous: str | None = None
        unchecked: bytes | None = None  # the last line, when only its head was read
        head = _HEAD.match
        loads = json.loads
        for line in self._lines(file, has_header):
            found = head(line)
            if found is not None:
                entry_id, parent = found.group(1).decode(), found.group(2)
                parents[entry_id] = parent.decode() if parent is not None else None
                previous, leaf, unchecked = leaf, entry_id, line
                continue
            try:
                entry = loads(line)
            except ValueError:
                if line.strip():
                    skipped += 1
                continue
            if not isinstance(entry, dict):
                skipped += 1
                continue
            entry_id = entry.get("id")
            if not isinstance(entry_id, str):
                skipped += 1  # a tree entry with no place in the tree
                continue
            parent_id = entry.get("parentId")
            parents[entry_id] = parent_id if isinstance(parent_id, str) else None
            previous, leaf, unchecked = leaf, entry_id, None
        if unchecked is not None:
            # A log cut off mid-write ends with a half line whose head is intact.
            try:
                loads(unchecked)
            except ValueError:
                skipped += 1
                if leaf is not None:
                    parents.pop(leaf, None)
                leaf = previous
        active: set[str] = set()
        while leaf is not None and leaf in parents and leaf not in active:
            active.add(leaf)
            leaf = parents[leaf]
        return active, skipped

    def _replay_branch(self, file: Path, has_header: bool, active: set[str], state: _State) -> None:
        """Pass 2: parse and take in only the entries on the active branch, in file order."""
        head = _HEAD.match
        loads = json.loads
        for line in self._lines(file, has_header):
            found = head(line)
            if found is not None:
                if found.group(1).decode() not in active:
                    continue
                try:
                    entry = loads(line)
                except ValueError:
                    state.skipped += 1  # its head was whole, the rest is not
                    continue
            else:
                try:
                    entry = loads(line)
                except ValueError:
                    continue  # counted in pass 1
                if not isinstance(entry, dict) or entry.get("id") not in active:
                    continue
            state.take(entry)

    def _replay_all(self, file: Path, has_header: bool, state: _State) -> None:
        """Version 1: every entry, in file order."""
        loads = json.loads
        for line in self._lines(file, has_header):
            try:
                entry = loads(line)
            except ValueError:
                if line.strip():
                    state.skipped += 1
                continue
            if isinstance(entry, dict):
                state.take(entry)
            else:
                state.skipped += 1


class _State:
    """What one file's entries add up to, taken in one at a time."""

    def __init__(self, paths: PathResolver) -> None:
        self.paths = paths
        self.calls = CallCollector()
        self.final: str | None = None
        self.skills: set[str] = set()
        self.skipped = 0

    def take(self, entry: dict[str, Any]) -> None:
        kind = entry.get("type")
        if kind != "message":
            if kind not in _ENTRY_TYPES:
                self.skipped += 1
            return
        message = entry.get("message")
        if not isinstance(message, dict):
            self.skipped += 1
            return
        role = message.get("role")
        content = message.get("content")
        if role == "assistant":
            self._assistant(content)
        elif role == "toolResult":
            self.calls.result(
                message.get("toolCallId"), text_of(content), bool(message.get("isError"))
            )
        elif role == "user":
            self.skills.update(skill_tags(text_of(content)))
        elif role not in _ROLES:
            self.skipped += 1

    def _assistant(self, content: object) -> None:
        if isinstance(content, str):
            if content:
                self.final = content
            return
        if not isinstance(content, list):
            return
        texts: list[str] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "toolCall":
                name = str(block.get("name", ""))
                arguments = block.get("arguments")
                if not isinstance(arguments, dict):
                    arguments = {} if arguments is None else {"arguments": arguments}
                reads, writes = _tool_paths(name, arguments, self.paths)
                self.calls.call(block.get("id"), name, arguments, reads, writes)
        if texts and any(text.strip() for text in texts):
            self.final = "\n".join(texts)


__all__ = ["PiFormat", "PiReading"]
