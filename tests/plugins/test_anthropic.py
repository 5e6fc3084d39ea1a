"""Issue 8, point 2: the trysquare-anthropic judge provider.

The plugin is installed as a user would install it, into a fresh virtual
environment holding only trysquare-core, trysquare-judge and the plugin: the
installed ``trysquare`` lists it, and blocking it refuses its provider type. The
conversations (real runs judged against a loopback server speaking the Messages
protocol) go through the in-process ``cli``, which finds the plugin by its entry
point (its source beside a dist-info, when `uv run pytest` did not install it, as
for hidden-tests); the wire mapping is checked in-process too.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from trysquare.testing import RunBuilder

from tests.helpers import dist_info
from tests.plugins.messages_server import (
    CACHE_READ_TOKENS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    MessagesServer,
    Received,
    Reply,
    error,
    prose,
    script,
    thinking_block,
    tool_use,
    verdict,
)
from tests.venvs import Venv, build_venv

ROOT = Path(__file__).resolve().parents[2]
ANTHROPIC_SRC = ROOT / "plugins" / "trysquare-anthropic" / "src"
if str(ANTHROPIC_SRC) not in sys.path:
    sys.path.insert(0, str(ANTHROPIC_SRC))

from trysquare_anthropic import wire
from trysquare_anthropic.connection import AnthropicConnection, messages_url
from trysquare_judge.providers import (
    ChatRequest,
    Message,
    ProviderConfig,
    ProviderError,
    ToolCall,
    ToolSpec,
)
from trysquare_judge.verdict import verdict_schema

LOCAL = ["trysquare_core", "trysquare_judge", "plugins/trysquare-anthropic"]
KEY_ENV = "TRYSQUARE_ANTHROPIC_TEST_KEY"
KEY = "sk-ant-test-DO-NOT-WRITE-51c0de"
CELL = "cell-heron-basalt"
PROMPT = "Fix the off-by-one in counter.py and explain what you changed."
RESPONSE = "I changed `count` in counter.py to start at zero; tests pass."
METRICS = ("note_usable", "cites_paths")
GOOD = {"note_usable": True, "cites_paths": False}
RUBRIC = "# Rubric\nnote_usable is false when the note does not say what changed.\n"
SCHEMA = verdict_schema(METRICS)


# -- the installed plugin ---------------------------------------------------------


@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return build_venv(tmp_path_factory, "anthropic-venv", LOCAL)


def listing(venv: Venv, cwd: Path, **env: str) -> dict[str, dict[str, Any]]:
    done = venv.trysquare("plugins", "--json", cwd=cwd, **env)
    assert done.returncode == 0, done.stderr
    return {entry["name"]: entry for entry in json.loads(done.stdout)}


class Lab:
    """A scenario whose judge is an ``anthropic`` provider pointed at the loopback server."""

    def __init__(self, root: Path, server: MessagesServer, trysquare: Callable[..., Any]) -> None:
        self.root, self.server, self.trysquare = root, server, trysquare
        self.folder = root / "scn"
        self.exp = root / "exp"
        self.folder.mkdir()
        (self.folder / "rubric.md").write_text(RUBRIC, encoding="utf-8")
        self.scenario = self.folder / "scenario.toml"
        self.write_scenario()
        (root / "trysquare.toml").write_text(
            textwrap.dedent(f"""\
            [providers.claude]
            type = "anthropic"
            base_url = "{server.base_url}"
            api_key_env = "{KEY_ENV}"
            timeout = 5
            max_retries = 2
            retry_backoff = 0.05
            """),
            encoding="utf-8",
        )

    def write_scenario(self, thinking: str = "off") -> None:
        self.scenario.write_text(
            textwrap.dedent(f"""\
            [[validation]]
            mode = "judge"
            provider = "claude"
            model = "claude-judge-1"
            thinking = "{thinking}"
            rubric = "rubric.md"
            pieces = ["prompt", "response", "diff"]
            metrics = {json.dumps(list(METRICS))}
            """),
            encoding="utf-8",
        )

    def respond(self, replies: list[Reply]) -> None:
        self.server.responder = script(replies)

    def run(self) -> RunBuilder:
        builder = RunBuilder(
            self.exp / "runs" / "r1", cell=CELL, prompt=PROMPT, model="vendor/agent-model"
        )
        builder.base({"counter.py": "count = 1\n"})
        builder.repo.write("counter.py", "count = 0\n")
        builder.finish(response=RESPONSE)
        return builder

    def validate(self, expect: int = 0) -> Any:
        self.run()
        done = self.trysquare(
            "validate", self.scenario, self.exp, "--no-progress", cwd=self.root, env={KEY_ENV: KEY}
        )
        assert done.returncode == expect, done.stdout + done.stderr
        return done

    def result(self) -> dict[str, Any]:
        return json.loads((self.exp / "runs" / "r1" / "validation" / "judge.json").read_text())

    def transcript(self) -> dict[str, Any]:
        return json.loads(
            (self.exp / "runs" / "r1" / "validation" / "judge" / "transcript.json").read_text()
        )


@pytest.fixture
def lab(tmp_path: Path, cli: Any) -> Iterator[Lab]:
    """A scenario, a loopback Messages server and the in-process CLI with the plugin installed."""
    try:
        metadata.distribution("trysquare-anthropic")
    except metadata.PackageNotFoundError:  # `uv run pytest`: its source, found by entry point
        site = dist_info(tmp_path / "site", "trysquare-anthropic", "trysquare_anthropic",
                         version="0.1.0", requires=("trysquare-judge>=0.1.0",))  # fmt: skip
        cli.env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(site), cli.env.get("PYTHONPATH")])
        )
    with MessagesServer(lambda _: error(599)) as server:
        yield Lab(tmp_path, server, cli)


def test_the_installed_plugin_is_listed_with_its_provider(venv: Venv, tmp_path: Path) -> None:
    entry = listing(venv, tmp_path)["trysquare-anthropic"]
    assert entry["providers"] == ["anthropic"]
    assert entry["hooks"] == ["trysquare_register_judge_providers"]
    assert entry["error"] is None and entry["version"] == "0.1.0"


def test_blocking_the_plugin_hides_it_and_refuses_its_provider_type(lab: Lab, venv: Venv) -> None:
    blocked = {"TRYSQUARE_BLOCK_PLUGINS": "trysquare-anthropic"}
    assert "trysquare-anthropic" not in listing(venv, lab.root, **blocked)
    done = venv.trysquare("check", lab.scenario, cwd=lab.root, **blocked)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no installed plugin provides provider type 'anthropic'" in done.stderr
    done = venv.trysquare("check", lab.scenario, cwd=lab.root)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_good_verdict_through_the_messages_api(lab: Lab) -> None:
    lab.respond([verdict(GOOD)])
    lab.validate()
    result = lab.result()
    assert result["state"] == "valid", result
    assert result["metrics"] == GOOD
    assert result["reasons"]["note_usable"] == "because (note_usable)"
    # The API's input_tokens leave the cache out; the judge's count every input token billed.
    usage = result["usage"]
    assert usage["requests"] == 1
    assert usage["input_tokens"] == INPUT_TOKENS + CACHE_READ_TOKENS
    assert usage["cached_tokens"] == CACHE_READ_TOKENS
    assert usage["output_tokens"] == OUTPUT_TOKENS

    [request] = lab.server.received
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = request.body
    assert body["model"] == "claude-judge-1" and body["stream"] is False
    assert body["tools"] == [
        {"name": "verdict", "description": body["tools"][0]["description"], "input_schema": SCHEMA}
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "verdict"}
    assert "thinking" not in body and body["max_tokens"] == wire.ANSWER_TOKENS
    assert RUBRIC.strip() in body["system"]  # the top-level system field, not a message
    [user] = body["messages"]
    assert user["role"] == "user" and PROMPT in user["content"][0]["text"]
    assert "+count = 0" in user["content"][0]["text"]
    assert CELL not in json.dumps(body)

    transcript = lab.transcript()
    assert transcript["type"] == "anthropic"
    assert [e["response"]["status"] for e in transcript["exchanges"]] == [200]
    assert transcript["exchanges"][0]["request"]["body"] == body
    for folder in (lab.exp, lab.folder):
        for path in folder.rglob("*"):
            if path.is_file() and ".git" not in path.parts:
                data = path.read_bytes()
                assert KEY.encode() not in data and b"x-api-key" not in data, path


def test_options_set_the_version_and_beta_headers(lab: Lab) -> None:
    config = lab.root / "trysquare.toml"
    config.write_text(
        config.read_text() + '[providers.claude.options]\nversion = "2099-01-01"\n'
        'beta = ["tools-2099", "files-2099"]\n'
    )
    lab.respond([verdict(GOOD)])
    lab.validate()
    [request] = lab.server.received
    assert request.headers["anthropic-version"] == "2099-01-01"
    assert request.headers["anthropic-beta"] == "tools-2099,files-2099"
    assert lab.result()["state"] == "valid"


def test_without_options_no_beta_header_is_sent(lab: Lab) -> None:
    lab.respond([verdict(GOOD)])
    lab.validate()
    [request] = lab.server.received
    assert "anthropic-beta" not in request.headers


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            'verison = "2023-06-01"',
            "providers.claude.options.verison: unknown key (did you mean 'version'?)",
        ),
        ("version = 2023", "providers.claude.options.version: must be a string, not a number"),
        ('beta = "tools"', "providers.claude.options.beta: must be a list"),
        ('beta = ["tools", 3]', "providers.claude.options.beta[2]: must be a string, not a number"),
    ],
)
def test_options_are_strict_and_name_file_and_key(lab: Lab, table: str, expected: str) -> None:
    config = lab.root / "trysquare.toml"
    config.write_text(config.read_text() + f"[providers.claude.options]\n{table}\n")
    done = lab.trysquare("check", lab.scenario, cwd=lab.root, env={KEY_ENV: KEY})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"trysquare.toml: {expected}" in done.stderr


def test_options_that_are_not_a_table_are_refused(lab: Lab) -> None:
    config = lab.root / "trysquare.toml"
    config.write_text(config.read_text().replace("timeout = 5", 'timeout = 5\noptions = "x"'))
    done = lab.trysquare("check", lab.scenario, cwd=lab.root, env={KEY_ENV: KEY})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "trysquare.toml: providers.claude.options: must be a table" in done.stderr


def test_options_left_at_their_defaults_keep_the_identity() -> None:
    from trysquare_anthropic.provider import AnthropicOptions

    bare = config("http://127.0.0.1:1")
    defaults = config("http://127.0.0.1:1", options=AnthropicOptions())
    changed = config("http://127.0.0.1:1", options=AnthropicOptions(version="2099-01-01"))
    assert (
        bare.identity()
        == defaults.identity()
        == {"name": "claude", "type": "anthropic", "base_url": "http://127.0.0.1:1"}
    )
    assert changed.identity()["options"] == {"version": "2099-01-01"}
    assert hash(changed) != hash(defaults)


def test_thinking_sends_a_budget_and_a_corrected_call_keeps_its_thinking_blocks(lab: Lab) -> None:
    lab.write_scenario(thinking="high")
    wrong = {
        "note_usable": {"reason": "clear", "value": "yes"},
        "cites_paths": {"reason": "r", "value": True},
    }
    first = tool_use(wrong, thinking=True)
    lab.respond([first, verdict(GOOD, thinking=True)])
    lab.validate()
    assert lab.result()["metrics"] == GOOD

    asked, corrected = (request.body for request in lab.server.received)
    for body in (asked, corrected):
        assert body["thinking"] == {
            "type": "enabled",
            "budget_tokens": wire.THINKING_BUDGETS["high"],
        }
        assert body["max_tokens"] > body["thinking"]["budget_tokens"]
        # The API refuses thinking with a forced tool: documented fallback, verdict the only tool.
        assert body["tool_choice"] == {"type": "auto"}
        assert [tool["name"] for tool in body["tools"]] == ["verdict"]
    _, assistant, answer = corrected["messages"]
    sent = first.body["content"]
    assert assistant == {
        "role": "assistant",
        "content": sent,
    }  # thinking block first, signature intact
    [result] = answer["content"]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert result["tool_use_id"] == sent[1]["id"]
    assert "note_usable.value" in result["content"]


def test_a_prose_answer_is_corrected_within_the_conversation(lab: Lab) -> None:
    lab.respond([prose("Looks fine to me."), verdict(GOOD)])
    lab.validate()
    assert lab.result()["state"] == "valid"
    _, corrected = lab.server.received
    _, assistant, user = corrected.messages
    assert assistant == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Looks fine to me."}],
    }
    assert user["role"] == "user" and "verdict" in user["content"][0]["text"]
    assert corrected.body["tool_choice"] == {"type": "tool", "name": "verdict"}


def test_overloaded_529_is_retried_after_retry_after(lab: Lab) -> None:
    lab.respond([error(529, {"retry-after": "1"}), verdict(GOOD)])
    lab.validate()
    assert lab.result()["metrics"] == GOOD
    first, second = lab.server.received
    assert second.at - first.at >= 0.9  # the server's 1 s, not the 0.05 s backoff
    exchanges = lab.transcript()["exchanges"]
    # The retried request counts; only the answer carried tokens.
    assert lab.result()["usage"]["requests"] == 2
    assert lab.result()["usage"]["output_tokens"] == OUTPUT_TOKENS
    assert [e["response"]["status"] for e in exchanges] == [529, 200]
    assert exchanges[0]["error"] == "HTTP 529" and exchanges[0]["response"]["retry_after"] == "1"


def test_a_500_storm_ends_invalid_never_negative(lab: Lab) -> None:
    lab.respond([error(500)] * 3)
    done = lab.validate(expect=1)  # an invalid run: its cell is not publishable
    assert "not publishable" in done.stdout
    result = lab.result()
    assert result["state"] == "invalid" and result["metrics"] == {}
    assert "judge provider 'claude' failed: HTTP 500" in result["error"]
    assert "gave up after 3 attempts" in result["error"]
    assert len(lab.server.received) == 3
    assert len(lab.transcript()["exchanges"]) == 3
    # Three requests paid for, no token count reported: unknown, not zero.
    assert result["usage"]["requests"] == 3 and result["usage"]["input_tokens"] is None


# -- the wire mapping, in-process -------------------------------------------------


def request(thinking: str = "off", messages: tuple[Message, ...] = ()) -> ChatRequest:
    return ChatRequest(
        model="m",
        thinking=thinking,
        system="sys",
        messages=messages or (Message(role="user", content="material"),),
        tool=ToolSpec("verdict", "record it", SCHEMA),
    )


@pytest.mark.parametrize(
    ("configured", "thinking", "expected"),
    [
        ("named", "off", {"type": "tool", "name": "verdict"}),
        ("required", "off", {"type": "any"}),
        ("auto", "off", {"type": "auto"}),
        ("named", "low", {"type": "auto"}),
        ("required", "medium", {"type": "auto"}),
    ],
)
def test_tool_choice_rule(configured: str, thinking: str, expected: dict[str, str]) -> None:
    assert wire.body(request(thinking), configured)["tool_choice"] == expected


@pytest.mark.parametrize("thinking", ["low", "medium", "high"])
def test_thinking_budgets_are_valid_for_the_api(thinking: str) -> None:
    body = wire.body(request(thinking), "named")
    budget = body["thinking"]["budget_tokens"]
    assert body["thinking"]["type"] == "enabled" and budget >= 1024
    assert body["max_tokens"] == budget + wire.ANSWER_TOKENS
    assert (
        wire.THINKING_BUDGETS["low"]
        < wire.THINKING_BUDGETS["medium"]
        < wire.THINKING_BUDGETS["high"]
    )


def test_tool_answers_and_a_user_message_fold_into_one_user_turn_results_first() -> None:
    calls = (ToolCall("toolu_a", "other", "{}"), ToolCall("toolu_b", "verdict", '{"x": 1}'))
    conversation = (
        Message(role="user", content="material"),
        Message(role="assistant", content="", tool_calls=calls),
        Message(role="tool", content="error: no tool 'other'", tool_call_id="toolu_a"),
        Message(role="tool", content="error: invalid", tool_call_id="toolu_b"),
        Message(role="user", content="call verdict"),
    )
    turns = wire.messages(conversation)
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"] == [
        {"type": "tool_use", "id": "toolu_a", "name": "other", "input": {}},
        {"type": "tool_use", "id": "toolu_b", "name": "verdict", "input": {"x": 1}},
    ]
    assert [(b["type"], b.get("tool_use_id"), b.get("is_error")) for b in turns[2]["content"]] == [
        ("tool_result", "toolu_a", True),
        ("tool_result", "toolu_b", True),
        ("text", None, None),
    ]


def test_an_empty_assistant_reply_is_never_sent_empty() -> None:
    turns = wire.messages(
        (Message(role="user", content="m"), Message(role="assistant", content=""))
    )
    assert turns[1]["content"] == [{"type": "text", "text": wire.EMPTY_REPLY}]


def test_a_reply_is_read_into_text_and_calls_carrying_their_thinking() -> None:
    block = thinking_block("hmm")
    reply = {
        "content": [
            block,
            {"type": "text", "text": "Here: "},
            {"type": "tool_use", "id": "toolu_9", "name": "verdict", "input": {"a": [1]}},
        ]
    }
    text, calls = wire.read_reply(reply)
    assert text == "Here: "
    [call] = calls
    assert (call.id, call.name, json.loads(call.arguments)) == ("toolu_9", "verdict", {"a": [1]})
    assert isinstance(call, ToolCall)  # the judge sees a plain ToolCall
    echoed = wire.messages((Message(role="assistant", content=text, tool_calls=calls),))
    assert echoed[0]["content"] == reply["content"]
    with pytest.raises(TypeError):
        wire.read_reply({"type": "error"})


@pytest.mark.parametrize(
    ("base", "url"),
    [
        (None, "https://api.anthropic.com/v1/messages"),
        ("http://127.0.0.1:9/", "http://127.0.0.1:9/v1/messages"),
        ("https://proxy.example/anthropic/v1", "https://proxy.example/anthropic/v1/messages"),
    ],
)
def test_messages_url(base: str | None, url: str) -> None:
    assert messages_url(base) == url


def config(base_url: str, **overrides: Any) -> ProviderConfig:
    values: dict[str, Any] = {
        "name": "claude",
        "type": "anthropic",
        "base_url": base_url,
        "api_key_env": KEY_ENV,
        "timeout": 5.0,
        "max_retries": 2,
        "retry_backoff": 0.01,
    }
    values.update(overrides)
    return ProviderConfig(**values)


def test_concurrency_is_bounded_per_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with MessagesServer(lambda _: Reply(**{**attrs_of(verdict(GOOD)), "delay": 0.15})) as server:
        connection = AnthropicConnection(config(server.base_url, max_concurrency=2))
        replies: list[Any] = []
        threads = [
            threading.Thread(target=lambda: replies.append(connection.complete(request())))
            for _ in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(replies) == 6 and all(reply.tool_calls for reply in replies)
    assert server.peak == 2


def test_a_refusal_is_final_and_never_echoes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)

    def echo(received: Received) -> Reply:
        # A hostile server echoing the header it was sent.
        return Reply(
            status=401, body={"type": "error", "error": {"message": received.headers["x-api-key"]}}
        )

    with MessagesServer(echo) as server:
        connection = AnthropicConnection(config(server.base_url))
        with pytest.raises(ProviderError) as caught:
            connection.complete(request())
    assert len(server.received) == 1  # 401 is not retried
    assert "HTTP 401" in caught.value.message and KEY not in caught.value.message
    assert KEY not in json.dumps(list(caught.value.exchanges))


def attrs_of(reply: Reply) -> dict[str, Any]:
    return {"status": reply.status, "body": reply.body, "headers": reply.headers}


def test_usage_is_read_from_a_messages_reply_and_unreported_counts_stay_unknown() -> None:
    full = wire.read_usage(
        {
            "usage": {
                "input_tokens": 7,
                "output_tokens": 3,
                "cache_read_input_tokens": 11,
                "cache_creation_input_tokens": 5,
            }
        }
    )
    assert (full.input_tokens, full.output_tokens, full.cached_tokens) == (23, 3, 11)
    bare = wire.read_usage({"usage": {"input_tokens": 7, "output_tokens": 3}})
    assert (bare.input_tokens, bare.output_tokens, bare.cached_tokens) == (7, 3, None)
    for silent in ({}, {"usage": None}, {"usage": {"input_tokens": "many", "output_tokens": -1}}):
        none = wire.read_usage(silent)
        assert (none.input_tokens, none.output_tokens, none.cached_tokens) == (None, None, None)
