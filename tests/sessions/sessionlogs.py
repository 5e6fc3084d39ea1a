"""Builders for hand-made session logs, and where the real ones are kept."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"

WriteLog = Callable[..., Path]


def jsonl(path: Path, entries: Iterable[Mapping[str, Any] | str]) -> Path:
    """Write entries one per line (a ``str`` is written as it is: a broken line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [entry if isinstance(entry, str) else json.dumps(entry) for entry in entries]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- pi (v3) -------------------------------------------------------------------------


def pi_header(cwd: str = "/work/repo", version: int = 3) -> dict[str, Any]:
    return {"type": "session", "version": version, "id": "s1", "timestamp": "t", "cwd": cwd}


def pi_entry(entry_id: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    """An entry in pi's own key order (type, id, parentId, ...)."""
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "t",
        "message": message,
    }


def pi_user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def pi_assistant(*blocks: dict[str, Any], stop: str = "toolUse") -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks), "stopReason": stop, "timestamp": 1}


def pi_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def pi_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def pi_result(
    call_id: str, text: str, *, error: bool = False, name: str = "read"
) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": error,
        "timestamp": 1,
    }
