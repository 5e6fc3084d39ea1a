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


# --- Claude Code ---------------------------------------------------------------------


def cc_entry(kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    """A Claude Code ``user``/``assistant`` entry (main chain, cwd /home/me/repo)."""
    message: dict[str, Any] = {"role": kind, "content": content}
    if "msg" in extra:
        message["id"] = extra.pop("msg")
    return {
        "type": kind,
        "uuid": extra.pop("uuid", "u"),
        "parentUuid": None,
        "isSidechain": extra.pop("side", False),
        "cwd": extra.pop("cwd", "/home/me/repo"),
        "sessionId": "s",
        "message": message,
        **extra,
    }


def cc_use(use_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": arguments}


def cc_result(use_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": use_id, "content": content, **extra}


# --- Codex ---------------------------------------------------------------------------


def codex_line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2025-12-01T00:00:00Z", "type": kind, "payload": payload}


def codex_meta(cwd: str = "/home/me/repo") -> dict[str, Any]:
    return codex_line("session_meta", {"id": "r", "timestamp": "t", "cwd": cwd})


def codex_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return codex_line(
        "response_item",
        {
            "type": "function_call",
            "name": name,
            "arguments": json.dumps(arguments),
            "call_id": call_id,
        },
    )


def codex_output(call_id: str, output: str) -> dict[str, Any]:
    return codex_line(
        "response_item", {"type": "function_call_output", "call_id": call_id, "output": output}
    )


# --- one agent's steps, in each format -----------------------------------------------
#
# A step is ("edit", path, ok), ("shell", command, ok), ("tool", name, arguments, ok),
# ("text", prose) or ("orphan", call_id, ok): what the agent did, written the way
# each runtime logs it, so one rule is tested against every format.

FORMATS = ("pi", "claude-code", "codex")


def session_entries(fmt: str, steps: Iterable[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The log lines of ``steps`` in format ``fmt`` (cwd ``/home/me/repo``)."""
    cwd = "/home/me/repo"
    entries: list[dict[str, Any]] = []
    if fmt == "pi":
        entries.append(pi_header(cwd))
    elif fmt == "codex":
        entries.append(codex_meta(cwd))
    parent: str | None = None

    def pi_add(message: dict[str, Any]) -> None:
        nonlocal parent
        entry_id = f"e{len(entries)}"
        entries.append(pi_entry(entry_id, parent, message))
        parent = entry_id

    for number, step in enumerate(steps):
        call_id = f"call{number}"
        kind = step[0]
        if kind == "text":
            if fmt == "pi":
                pi_add(pi_assistant(pi_text(step[1]), stop="stop"))
            elif fmt == "claude-code":
                entries.append(
                    cc_entry("assistant", [{"type": "text", "text": step[1]}], msg=call_id)
                )
            else:
                entries.append(
                    codex_line(
                        "response_item",
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": step[1]}],
                        },
                    )
                )
            continue
        if kind == "orphan":
            _, orphan_id, ok = step
            if fmt == "pi":
                pi_add(pi_result(orphan_id, "ok" if ok else "error", error=not ok))
            elif fmt == "claude-code":
                entries.append(cc_entry("user", [cc_result(orphan_id, "ok", is_error=not ok)]))
            else:
                entries.append(codex_output(orphan_id, "ok" if ok else "Exit code: 1"))
            continue
        ok = step[-1]
        if kind == "edit":
            path = step[1]
            name, arguments = {
                "pi": ("edit", {"path": path, "oldText": "a", "newText": "b"}),
                "claude-code": ("Edit", {"file_path": path, "old_string": "a", "new_string": "b"}),
                "codex": (
                    "apply_patch",
                    {
                        "input": f"*** Begin Patch\n*** Update File: {path}\n@@\n-a\n+b\n*** End Patch"
                    },
                ),
            }[fmt]
        elif kind == "shell":
            name, arguments = {
                "pi": ("bash", {"command": step[1]}),
                "claude-code": ("Bash", {"command": step[1]}),
                "codex": ("shell", {"command": ["bash", "-lc", step[1]], "workdir": cwd}),
            }[fmt]
        else:
            name, arguments = step[1], step[2]
        if fmt == "pi":
            pi_add(pi_assistant(pi_call(call_id, name, **arguments)))
            pi_add(
                pi_result(
                    call_id, "ok" if ok else "Command exited with code 1", error=not ok, name=name
                )
            )
        elif fmt == "claude-code":
            entries.append(cc_entry("assistant", [cc_use(call_id, name, **arguments)], msg=call_id))
            entries.append(
                cc_entry(
                    "user", [cc_result(call_id, "ok" if ok else "Error: failed", is_error=not ok)]
                )
            )
        else:
            entries.append(codex_call(call_id, name, arguments))
            if name == "apply_patch" and not ok:
                output = "apply_patch verification failed: no match"
            else:
                output = json.dumps({"output": "ok", "metadata": {"exit_code": 0 if ok else 1}})
            entries.append(codex_output(call_id, output))
    return entries
