"""How much reading a session costs over merely parsing it.

Builds a synthetic pi v3 session (~100 MB; ``--quick``: ~10 MB) in a temporary
folder — turns of an assistant message with tool calls and their results, with an
abandoned branch now and then — and times ``tool_calls()`` against a bare
``json.loads`` loop over the same lines. Goal (issue 17): within 1.3x and 64 MB
(lines are parsed with msgspec, which the baseline is not: it stays the least a
reader using the standard library must pay). Peak memory is measured apart
(tracemalloc slows what it watches), for ``tool_calls()`` as a whole.

    uv run python benchmarks/bench_sessions.py [--quick] [--size-mb N]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

from trysquare.sessions.pi import PiFormat

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "from",
    "at",
    "or",
    "an",
]


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _dump(entry: dict) -> str:
    return json.dumps(entry, separators=(",", ":"))


def build_session(path: Path, size_mb: float, seed: int = 7) -> int:
    """Write a pi v3 log of about ``size_mb`` MB; return its number of lines."""
    rng = random.Random(seed)
    target = int(size_mb * 1024 * 1024)
    written = 0
    lines = 0
    counter = 0
    parent: str | None = None

    def new_id() -> str:
        nonlocal counter
        counter += 1
        return f"{counter:08x}"

    with path.open("w", encoding="utf-8") as stream:

        def emit(entry: dict) -> None:
            nonlocal written, lines
            text = _dump(entry) + "\n"
            stream.write(text)
            written += len(text)
            lines += 1

        emit(
            {
                "type": "session",
                "version": 3,
                "id": "bench",
                "timestamp": "2026-01-01T00:00:00Z",
                "cwd": "/work/repo",
            }
        )

        def message(message_body: dict) -> str:
            nonlocal parent
            entry_id = new_id()
            emit(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": "2026-01-01T00:00:00Z",
                    "message": message_body,
                }
            )
            parent = entry_id
            return entry_id

        message(
            {
                "role": "user",
                "content": [{"type": "text", "text": "Fix the failing tests."}],
                "timestamp": 1,
            }
        )
        turn = 0
        while written < target:
            turn += 1
            fork_point = parent
            calls = []
            for number in range(rng.randint(1, 3)):
                kind = rng.choice(["read", "bash", "edit", "write"])
                path_name = f"src/module_{rng.randint(0, 400)}.py"
                arguments = {
                    "read": {"path": path_name},
                    "bash": {"command": f"cat {path_name} | head -n 40 && python -m pytest -q"},
                    "edit": {
                        "path": path_name,
                        "oldText": _prose(rng, 30),
                        "newText": _prose(rng, 30),
                    },
                    "write": {"path": path_name, "content": _prose(rng, 200)},
                }[kind]
                calls.append(
                    {
                        "type": "toolCall",
                        "id": f"call_{turn}_{number}",
                        "name": kind,
                        "arguments": arguments,
                    }
                )
            message(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": _prose(rng, 60)},
                        {"type": "text", "text": _prose(rng, 25)},
                        *calls,
                    ],
                    "api": "anthropic-messages",
                    "provider": "anthropic",
                    "model": "claude-sonnet-4-5",
                    "usage": {
                        "input": 1200,
                        "output": 300,
                        "cacheRead": 0,
                        "cacheWrite": 0,
                        "cost": {"total": 0.01},
                    },
                    "stopReason": "toolUse",
                    "timestamp": 1,
                }
            )
            for call in reversed(calls):  # results out of order
                message(
                    {
                        "role": "toolResult",
                        "toolCallId": call["id"],
                        "toolName": call["name"],
                        "content": [{"type": "text", "text": _prose(rng, rng.randint(200, 900))}],
                        "isError": rng.random() < 0.1,
                        "timestamp": 1,
                    }
                )
            if turn % 25 == 0:
                # an abandoned branch: the user went back to before this turn
                parent = fork_point
                message(
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "No, try another way."}],
                        "timestamp": 1,
                    }
                )
        message(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Done."}],
                "stopReason": "stop",
                "timestamp": 1,
            }
        )
    return lines


def baseline(path: Path) -> float:
    """A bare json.loads over every line: the least any reader must pay (CPU seconds)."""
    started = time.process_time()
    loads = json.loads
    with path.open("rb") as stream:
        for line in stream:
            loads(line)
    return time.process_time() - started


def reader(path: Path) -> tuple[float, int]:
    """``tool_calls()`` from a fresh reading (CPU seconds: a busy machine skews wall time)."""
    started = time.process_time()
    calls = PiFormat().read([path], None).tool_calls()
    return time.process_time() - started, len(calls)


def peak_memory(path: Path) -> tuple[float, float]:
    """Peak traced allocation while reading every call, and what the calls still hold (MB).

    The calls carry every result and every argument (a written file's content), so
    they hold most of a log made of tool output; the rest of the log — thinking,
    prose, usage, abandoned branches — is never kept.
    """
    tracemalloc.start()
    calls = PiFormat().read([path], None).tool_calls()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del calls
    return peak / (1024 * 1024), held / (1024 * 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~10 MB session instead of ~100 MB")
    parser.add_argument("--size-mb", type=float, default=None, help="the session's size in MB")
    parser.add_argument("--repeat", type=int, default=5, help="timings kept: the best of N")
    options = parser.parse_args()
    size = options.size_mb or (10.0 if options.quick else 100.0)
    with tempfile.TemporaryDirectory(prefix="trysquare-bench-") as folder:
        path = Path(folder) / "session.jsonl"
        lines = build_session(path, size)
        megabytes = path.stat().st_size / (1024 * 1024)
        bases: list[float] = []
        timings: list[float] = []
        calls = 0
        for _ in range(options.repeat):  # interleaved, so drifting load hits both alike
            bases.append(baseline(path))
            seconds, calls = reader(path)
            timings.append(seconds)
        base, best = min(bases), min(timings)
        peak, held = peak_memory(path)
    print(f"session: {megabytes:.1f} MB, {lines} lines, {calls} calls on the active branch")
    print(
        f"sessions.tool_calls: {best / base:.2f}x "
        f"(baseline json.loads loop {base:.3f} s; peak memory {peak:.1f} MB)"
    )
    print(f"  of that peak, {held:.1f} MB is the returned calls' own arguments and results")


if __name__ == "__main__":
    main()
