"""pi (``badlogic/pi-mono`` coding agent) session logs.

Line 1 is a header ``{"type": "session", "version": N, "cwd": ...}``. Version 1 is a
plain sequence of entries. Versions 2 and 3 chain entries by ``id``/``parentId`` into a
tree: going back to an earlier message and continuing forks it, and only the *active
branch* — the parent chain of the file's last entry — is what the agent's final
context saw. The file is read once; each entry is boiled down to what it would add
(its calls with their paths, a result, a skill), kept by id — never the entry
itself — and once the last entry is known the branch's contributions are replayed
in file order.
"""

from __future__ import annotations

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
    iter_positioned,
    kept_or_logged,
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
            and isinstance(role := entry["message"].get("role"), str)
            and role in {"user", "assistant", "toolResult"}
            for entry in head
        )

    def read(self, files: list[Path], repo: Path | None) -> PiReading:
        """A lazy reading of the pi session in ``files``."""
        return PiReading(files, repo)


_KNOWN_TOOLS = frozenset({"read", "write", "edit", "bash", "grep", "find", "ls"})
"""pi's built-in tools; ``grep``, ``find`` and ``ls`` write nothing."""


_TARGET = ("path", "file_path")
_TOOLS = ToolTable(
    reader="pi",
    reads={"read": _TARGET},
    writes={"write": _TARGET, "edit": _TARGET},
    shells=frozenset({"bash"}),
    quiet=_KNOWN_TOOLS,
)


class PiReading(LoggedReading):
    """One pi session; see the module's docstring for the branch rule."""

    def read_file(self, file: Path, start: int) -> FilePart:
        """Read one pi log: its active branch when it is a tree, else every entry."""
        state: _State | None = None
        tree: dict[str, tuple[str | None, _Effect, int]] = {}
        leaf: str | None = None
        is_tree = False
        counter = LineCounter()
        doubts: list[str] = []
        for position, entry in iter_positioned(file, counter):  # broken lines counted and named
            if state is None:
                header = entry if entry.get("type") == "session" else {}
                cwd = header.get("cwd")
                state = _State(
                    PathResolver.for_session(cwd if isinstance(cwd, str) else None, self.repo),
                    file,
                )
                version = header.get("version", 1)
                is_tree = isinstance(version, int) and version >= 2
                if header:
                    continue
            effect = state.extract(entry, file, position)
            if not is_tree:
                state.apply(effect, counter.line)
                continue
            entry_id = entry.get("id")
            if not isinstance(entry_id, str):
                counter.broke("a tree entry with no id")
                continue
            parent = entry.get("parentId")
            if entry_id in tree:
                # Which of the two is the real entry cannot be told: both stay out
                # of nothing, and every process metric says so.
                doubts.append(
                    f"{file.name}: lines {tree[entry_id][2]} and {counter.line} both use "
                    f"the entry id {entry_id!r}, so which entry the history holds cannot be told"
                )
            tree[entry_id] = (parent if isinstance(parent, str) else None, effect, counter.line)
            leaf = entry_id
        if state is None:
            return FilePart(
                calls=[],
                final_response=None,
                skills=frozenset(),
                skipped=counter.skipped,
                notes=counter.notes(file),
                response_unknown=counter.response_unknown(file, None),
            )
        notes: list[str] = []
        if is_tree:
            # The active branch: the parent chain of the last entry, replayed in file order.
            active: set[str] = set()
            last = leaf
            while leaf is not None and leaf in tree and leaf not in active:
                active.add(leaf)
                leaf = tree[leaf][0]
            last_line = tree[last][2] if last in tree else "?"
            left_calls = 0
            left_lines: list[int] = []
            for entry_id, (_, effect, number) in tree.items():
                if entry_id in active:
                    state.apply(effect, number)
                elif effect is not None and effect[0] in {"call", "result"}:
                    left_lines.append(number)
                    left_calls += len(effect[1]) if effect[0] == "call" else 0
                # Its contribution now lives in the collector: what held it goes as the
                # calls' records come (both would count in the peak).
                tree[entry_id] = _DONE
            if left_lines:
                notes.append(
                    f"{file.name}: the active branch (the parent chain of the last entry, "
                    f"line {last_line}) leaves out {len(left_lines)} "
                    f"recorded {'entry' if len(left_lines) == 1 else 'entries'} holding "
                    f"{left_calls} tool call{'s' if left_calls != 1 else ''} (lines "
                    f"{min(left_lines)}-{max(left_lines)}); they are not counted"
                )
            tree.clear()  # and the tree itself before the calls are built
            active.clear()
        return finished_part(
            file,
            start,
            counter,
            state.calls,
            final_response=state.final,
            final_line=state.final_line,
            skills=state.skills,
            more_skipped=state.skipped,
            more_notes=tuple(notes),
            doubts_first=tuple(doubts),
        )


_DONE: tuple[None, None, int] = (None, None, 0)  # a tree entry already replayed (shared)

# What one entry contributes, kept (for a tree) until its branch is known:
# ("call", [(id, name, arguments, reads, writes), ...], text) for an assistant message,
# ("result", id, text, failed), ("user", skills), ("skip",) for an unknown entry, or None.
_Effect = tuple[Any, ...] | None


_logged_arguments = logged_call_arguments("toolCall", "arguments")
"""The arguments of a ``toolCall``, read back from its assistant message."""


def _result_text(entry: dict[str, Any], key: str | None) -> str:
    """A tool result's text, read back from its line."""
    return text_of(entry["message"].get("content"))


class _State:
    """What one file's entries add up to."""

    def __init__(self, paths: PathResolver, file: Path) -> None:
        self.paths = paths
        self.calls = CallCollector(file)
        self.final: str | None = None
        self.final_line: int | None = None
        self.skills: set[str] = set()
        self.skipped = 0

    def extract(self, entry: dict[str, Any], file: Path, offset: int) -> _Effect:
        """What ``entry`` (at ``offset`` in ``file``) would add, without adding it yet."""
        kind = entry.get("type")
        if kind != "message":
            return None if isinstance(kind, str) and kind in _ENTRY_TYPES else ("skip",)
        message = entry.get("message")
        if not isinstance(message, dict):
            return ("skip",)
        role = message.get("role")
        content = message.get("content")
        if role == "assistant":
            return self._assistant(message, content, file, offset)
        if role == "toolResult":
            call_id = message.get("toolCallId")
            text = kept_or_logged(text_of(content), file, offset, None, _result_text)
            return ("result", call_id, text, bool(message.get("isError")))
        if role == "user":
            skills = skill_tags(text_of(content))
            return ("user", skills) if skills else None
        return None if isinstance(role, str) and role in _ROLES else ("skip",)

    def apply(self, effect: _Effect, line: int = 0) -> None:
        """Add what the entry on line ``line``, on the branch, contributes."""
        if effect is None:
            return
        kind = effect[0]
        if kind == "call":
            call = self.calls.call
            for call_id, name, arguments, reads, writes, more in effect[1]:
                if more:
                    call(call_id, name, arguments, reads, writes, line=line, **more)
                else:
                    call(call_id, name, arguments, reads, writes, line=line)
            if effect[2] is not None:
                self.final = effect[2]
                self.final_line = line
        elif kind == "result":
            self.calls.result(effect[1], effect[2], effect[3], line=line)
        elif kind == "user":
            self.skills.update(effect[1])
        else:
            self.skipped += 1

    def _assistant(
        self, message: dict[str, Any], content: object, file: Path, offset: int
    ) -> _Effect:
        # A turn that ended (no call, stopped) with no text is a real empty answer: "".
        stop = message.get("stopReason")
        ended = isinstance(stop, str) and stop in {"stop", "end_turn", "length"}
        if isinstance(content, str):
            final: str | None = content if content.strip() else ("" if ended else None)
            return ("call", [], final)
        if not isinstance(content, list):
            return ("call", [], "" if ended else None)
        texts: list[str] = []
        calls: list[tuple[Any, ...]] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "toolCall":
                name = str(block.get("name", ""))
                arguments = arguments_in(block, "arguments")
                reads, writes, more = call_paths(_TOOLS, name, arguments, self.paths)
                call_id = block.get("id")
                kept = arguments_kept_or_logged(arguments, file, offset, call_id, _logged_arguments)
                calls.append((call_id, name, kept, reads, writes, more))
        if any(text.strip() for text in texts):
            final = "\n".join(texts)
        else:
            final = "" if ended and not calls else None
        return ("call", calls, final)


__all__ = ["PiFormat", "PiReading"]
