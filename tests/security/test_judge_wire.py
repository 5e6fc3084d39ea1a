"""Issue 29 item 6: the judge's wire — a deadline for the whole exchange, an interrupt that ends
``validate`` with requests in flight, and a cap on the bytes of a reply.

Each test runs a real HTTP server on loopback (tests/judge/chatserver.py) that misbehaves
as a hostile or broken endpoint would: it trickles its reply a byte at a time, stays silent,
or sends 50 MB.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.judge.chatserver import Reply, verdict
from tests.security.judgelab import lab_with_key, validate_in_process  # noqa: F401

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare_judge.providers.http",)


KEY = "sk-wire-test-key"
METRICS = {"note_usable": True, "cites_paths": True}
MiB = 1024 * 1024


def sizes_below(folder: Path) -> dict[str, int]:
    """The size of every file trysquare wrote below ``folder`` (the clones left out)."""
    return {
        str(path.relative_to(folder)): path.stat().st_size
        for path in folder.rglob("*")
        if path.is_file() and "repo" not in path.relative_to(folder).parts
    }


def test_a_reply_trickled_a_byte_at_a_time_ends_at_the_timeout(lab_with_key: Any) -> None:
    lab = lab_with_key(KEY)
    lab.write_config(timeout=1, max_retries=0)
    lab.run()
    # Headers at once, then a byte every 0.4 s: every read arrives within httpx's per-read
    # timeout, so only a deadline on the whole exchange ends it.
    lab.respond(lambda _: Reply(body=verdict(METRICS).body, trickle=0.4))
    started = time.monotonic()
    code, _ = validate_in_process(lab)
    took = time.monotonic() - started
    result = lab.result()
    assert took < 15, f"validate took {took:.1f} s with timeout = 1"  # the server gives in at 20 s
    assert code == 1 and result["state"] == "invalid"
    assert "no reply within 1 s (the whole exchange, body included)" in result["error"]


def test_a_50_mb_reply_is_unjudged_with_its_size_and_never_stored(lab_with_key: Any) -> None:
    lab = lab_with_key(KEY)
    lab.write_config(max_retries=0)  # the default max_reply_bytes: 1 MiB
    lab.run()
    huge = "x" * (25 * MiB)  # two reasons of 25 MB: a verdict that would parse
    body = verdict(METRICS).body
    arguments = {m: {"reason": huge, "value": True} for m in METRICS}
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json.dumps(arguments)
    size = len(json.dumps(body).encode())
    lab.respond(lambda _: Reply(body=body))
    code, _ = validate_in_process(lab)
    result = lab.result()
    assert result["state"] == "valid" and result["metrics"] == dict.fromkeys(METRICS)
    for reason in result["reasons"].values():
        assert f"{size:,} bytes, over max_reply_bytes = 1,048,576" in reason
    assert code == 0
    # Nothing bigger than the cap anywhere: judge.json, the transcript, measures.json.
    written = sizes_below(lab.exp)
    assert max(written.values()) < MiB, sorted(written.items(), key=lambda item: -item[1])[:3]
    assert "runs/r1/validation/judge/transcript.json" in written


def test_max_reply_bytes_is_configured_per_provider(lab_with_key: Any) -> None:
    lab = lab_with_key(KEY)
    lab.run()
    reply = verdict(METRICS, reason="r" * 3000)
    size = len(json.dumps(reply.body).encode())
    lab.respond(lambda _: reply)
    lab.write_config(max_retries=0, max_reply_bytes=size + 1)
    assert validate_in_process(lab)[0] == 0
    assert lab.result()["metrics"] == METRICS  # a reply within the cap is judged
    lab.write_config(max_retries=0, max_reply_bytes=2000)
    assert validate_in_process(lab, rejudge=True)[0] == 0
    result = lab.result()
    assert result["metrics"] == dict.fromkeys(METRICS)
    assert (
        f"is {size:,} bytes, over max_reply_bytes = 2,000 of [providers.local]"
        in (result["reasons"]["note_usable"])
    )
    transcript = (lab.exp / "runs" / "r1" / "validation" / "judge" / "transcript.json").read_text()
    assert "r" * 3000 not in transcript  # the reply over the cap is not kept
    assert "reply over max_reply_bytes = 2,000" in transcript


def test_max_reply_bytes_that_is_not_positive_is_refused_at_load(lab_with_key: Any) -> None:
    lab = lab_with_key(KEY)
    lab.run()
    lab.write_config(max_reply_bytes=0)
    done = lab.cli("check", lab.scenario, lab.exp)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    said = "trysquare.toml: providers.local.max_reply_bytes: must be a positive number of bytes"
    assert said in done.stderr


def test_sigterm_ends_validate_within_seconds_while_requests_are_in_flight(
    lab_with_key: Any, cli_process: Any
) -> None:
    lab = lab_with_key(KEY)
    lab.write_config(timeout=120, max_retries=4)
    for index in range(3):
        lab.run(f"r{index}", repetition=index + 1)
    # One endpoint silent for a minute, another trickling: requests in flight, both kinds.
    replies = iter([Reply(body=verdict(METRICS).body, delay=60)] * 2)
    lab.respond(lambda _: next(replies, Reply(body=verdict(METRICS).body, trickle=0.4)))
    env = {**cli_process.env, **lab.cli.env}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trysquare",
            "validate",
            str(lab.scenario),
            str(lab.exp),
            "--no-progress",
            "--jobs",
            "4",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(lab.server.received) < 3 and time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
        assert len(lab.server.received) == 3, "the requests never reached the server"
        time.sleep(0.3)
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert took < 5, f"validate took {took:.1f} s to end after SIGTERM"
    assert process.returncode == 128 + signal.SIGTERM, (stdout, stderr)
    assert "Traceback" not in stderr and "interrupted" in stderr
    # Nothing an interrupted judge returned was recorded as a result.
    for index in range(3):
        assert not (lab.exp / "runs" / f"r{index}" / "validation" / "judge.json").exists()
    assert os.path.exists(lab.exp)


def test_the_anthropic_provider_holds_the_same_deadline_and_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # trysquare-anthropic carries its requests over the judge's HTTP transport: the same wire.
    pytest.importorskip("trysquare_anthropic")
    from trysquare_anthropic.connection import AnthropicConnection
    from trysquare_judge.providers import (
        ChatRequest,
        Message,
        ProviderConfig,
        ProviderError,
        ReplyTooLarge,
        ToolSpec,
    )
    from trysquare_judge.verdict import verdict_schema

    from tests.plugins.messages_server import MessagesServer
    from tests.plugins.messages_server import verdict as messages_verdict

    monkeypatch.setenv("TRYSQUARE_WIRE_KEY", KEY)
    request = ChatRequest(
        model="m",
        thinking="off",
        system="sys",
        messages=(Message(role="user", content="x"),),
        tool=ToolSpec("verdict", "record it", verdict_schema(list(METRICS))),
    )
    good = messages_verdict(METRICS)
    replies = iter(
        [
            Reply(body=good.body, trickle=0.4),
            Reply(body=messages_verdict(METRICS, reason="y" * 5000).body),
        ]
    )
    with MessagesServer(lambda _: next(replies)) as server:
        connection = AnthropicConnection(
            ProviderConfig(
                name="claude",
                type="anthropic",
                base_url=server.base_url,
                api_key_env="TRYSQUARE_WIRE_KEY",
                timeout=1.0,
                max_retries=0,
                max_reply_bytes=4000,
            )
        )
        started = time.monotonic()
        with pytest.raises(ProviderError) as slow:
            connection.complete(request)
        assert time.monotonic() - started < 4
        assert "no reply within 1 s (the whole exchange, body included)" in slow.value.message
        with pytest.raises(ReplyTooLarge) as large:
            connection.complete(request)
    assert "over max_reply_bytes = 4,000 of [providers.claude]" in large.value.message
    assert "y" * 5000 not in json.dumps(large.value.exchanges)


def test_an_interrupted_request_leaves_no_thread_or_connection_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A server that sends its headers and one byte, then nothing for half a minute. On an
    # interruption the caller leaves at once and the socket is shut down, so the request's
    # thread ends too instead of waiting for the next byte or httpx's per-read timeout
    # (120 s here) on a held connection.
    import threading

    from trysquare import _process
    from trysquare_judge.providers import (
        ChatRequest,
        Message,
        ProviderConfig,
        ProviderError,
        ToolSpec,
    )
    from trysquare_judge.providers.openai import OpenAIConnection

    from tests.judge.chatserver import ChatServer

    def carriers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "trysquare-judge-request"]

    monkeypatch.setenv("TRYSQUARE_WIRE_KEY", KEY)
    request = ChatRequest(
        model="m",
        thinking="off",
        system="sys",
        messages=(Message(role="user", content="x"),),
        tool=ToolSpec("verdict", "record it", {"type": "object"}),
    )
    with ChatServer(lambda _: Reply(body=verdict(METRICS).body, trickle=30)) as server:
        connection = OpenAIConnection(
            ProviderConfig(
                name="local",
                type="openai",
                base_url=server.base_url,
                api_key_env="TRYSQUARE_WIRE_KEY",
                timeout=120.0,
                max_retries=0,
            )
        )
        stop = threading.Timer(1.0, _process.interrupt)
        stop.start()
        started = time.monotonic()
        try:
            with pytest.raises(ProviderError, match="interrupted while waiting on"):
                connection.complete(request)
            assert time.monotonic() - started < 3
            until = time.monotonic() + 3
            while carriers() and time.monotonic() < until:
                time.sleep(0.05)
            assert not carriers(), "the interrupted request's thread still waits on the server"
        finally:
            stop.cancel()
            _process.interrupt(asked=False)


def _openai(server_url: str, **overrides: Any) -> Any:
    from trysquare_judge.providers import ProviderConfig
    from trysquare_judge.providers.openai import OpenAIConnection

    values: dict[str, Any] = {
        "name": "local",
        "type": "openai",
        "base_url": server_url,
        "api_key_env": "TRYSQUARE_WIRE_KEY",
        "timeout": 30.0,
        "max_retries": 0,
    }
    return OpenAIConnection(ProviderConfig(**{**values, **overrides}))


def _request() -> Any:
    from trysquare_judge.providers import ChatRequest, Message, ToolSpec

    return ChatRequest(
        model="m",
        thinking="off",
        system="sys",
        messages=(Message(role="user", content="x"),),
        tool=ToolSpec("verdict", "record it", {"type": "object"}),
    )


def test_a_gzip_bomb_is_cut_at_the_cap_without_inflating_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 200 MB of JSON that gzip makes 200 KB: the cap holds for the bytes as read, and the
    # reply is never inflated further than the cap in memory.
    import gzip
    import tracemalloc

    from trysquare_judge.providers import ReplyTooLarge

    from tests.judge.chatserver import ChatServer

    monkeypatch.setenv("TRYSQUARE_WIRE_KEY", KEY)
    body = verdict(METRICS).body
    head = json.dumps(body).encode()
    bomb = gzip.compress(head[:-1] + b', "padding": "' + b"0" * (200 * MiB) + b'"}', 6)
    reply = Reply(raw=bomb, headers={"Content-Encoding": "gzip"})
    with ChatServer(lambda _: reply) as server:
        connection = _openai(server.base_url)
        tracemalloc.start()
        try:
            with pytest.raises(ReplyTooLarge) as over:
                connection.complete(_request())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert "is more than 1,048,576 bytes, over max_reply_bytes = 1,048,576" in over.value.message
    assert peak < 16 * MiB, f"{peak:,} bytes held while reading a 200 KB reply"


def test_a_reply_in_an_encoding_not_asked_for_is_unreadable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trysquare_judge.providers import ProviderError

    from tests.judge.chatserver import ChatServer

    monkeypatch.setenv("TRYSQUARE_WIRE_KEY", KEY)
    reply = Reply(raw=b"\x00\x01\x02", headers={"Content-Encoding": "br"})
    with ChatServer(lambda _: reply) as server, pytest.raises(ProviderError) as refused:
        _openai(server.base_url).complete(_request())
    assert "unreadable reply from" in refused.value.message
    assert "encoded as 'br', which was not asked for" in refused.value.message
