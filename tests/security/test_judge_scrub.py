"""The judge's key never reaches a file or a terminal, in any encoding, and a
reason the judge could not have written in UTF-8 does not cost the paid verdict
(issue 13 item 3, issue 19 item 2).

The loopback judge is hostile here: it echoes the key it was sent (raw, JSON-
escaped, URL-encoded, base64 as in a Basic header) into its prose, its error
bodies and its reasons.
"""

from __future__ import annotations

import base64
import json
import urllib.parse

from tests.judge.chatserver import Reply, error, tool_call
from tests.security.judgelab import lab_with_key, validate_in_process, written  # noqa: F401

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare_judge.scrub",)


# A key holding the two characters JSON escapes: a raw-text comparison misses it.
KEY = 'sk-live-"odd\\key-5c1e9a77'
METRICS = ("note_usable", "cites_paths")


def _forms(key: str) -> dict[str, str]:
    return {
        "raw": key,
        "json": json.dumps(key)[1:-1],
        "url": urllib.parse.quote(key, safe=""),
        "base64": base64.b64encode(key.encode()).decode(),
        "basic": base64.b64encode(f"user:{key}".encode()).decode()[8:-4],
    }


def _echo(key: str) -> str:
    forms = _forms(key)
    return (
        f"raw {forms['raw']} url {forms['url']} b64 {forms['base64']} "
        f"Authorization: Basic {base64.b64encode(f'user:{key}'.encode()).decode()}"
    )


def _leaks(text: str, key: str) -> list[str]:
    return [name for name, form in _forms(key).items() if form in text]


def test_judge_echoing_key_in_every_encoding_writes_none(lab_with_key) -> None:
    lab = lab_with_key(KEY)
    lab.run()
    arguments = {m: {"reason": f"the key is {KEY}; {_echo(KEY)}", "value": True} for m in METRICS}
    reply = tool_call(arguments)
    reply.body["choices"][0]["message"]["content"] = f"I saw {_echo(KEY)}"
    reply.body["echo"] = {"headers": {"authorization": f"Bearer {KEY}"}, "text": _echo(KEY)}
    lab.respond(lambda _: reply)
    code, printed = validate_in_process(lab)
    result = lab.result()
    assert result["state"] == "valid" and result["metrics"] == dict.fromkeys(METRICS, True)
    assert "***" in result["reasons"]["note_usable"]
    assert _leaks(written(lab.exp) + printed, KEY) == []
    assert code == 0


def test_error_body_echoing_key_is_scrubbed_from_error_and_transcript(lab_with_key) -> None:
    lab = lab_with_key(KEY)
    lab.run()
    lab.respond(lambda _: Reply(status=400, body={"error": {"message": f"bad key {_echo(KEY)}"}}))
    code, printed = validate_in_process(lab)
    result = lab.result()
    assert result["state"] == "invalid" and "HTTP 400" in result["error"]
    assert _leaks(written(lab.exp) + printed, KEY) == []
    assert code == 1


def test_lone_surrogate_in_judge_reason_keeps_the_paid_verdict(lab_with_key) -> None:
    lab = lab_with_key(KEY)
    lab.run()
    # The model's JSON may legally carry "\ud83d" alone: in its reasons and in its prose.
    raw = json.dumps({m: {"reason": "Done \ud83d", "value": True} for m in METRICS})
    reply = tool_call(raw, raw=True)
    reply.body["choices"][0]["message"]["content"] = "prose \ud83d too"
    lab.respond(lambda _: reply)
    code, _ = validate_in_process(lab)
    result = lab.result()
    assert result["state"] == "valid", result
    assert result["metrics"] == dict.fromkeys(METRICS, True)
    assert result["reasons"]["note_usable"] == "Done \\ud83d"  # written as its escape
    assert lab.transcript()["outcome"]["state"] == "valid"
    paid = len(lab.server.received)
    lab.respond(lambda _: error(500))
    code_again, _ = validate_in_process(lab)
    assert len(lab.server.received) == paid  # never paid again
    assert lab.result()["metrics"] == dict.fromkeys(METRICS, True)
    assert code == code_again == 0


def test_key_of_another_configured_provider_echoed_is_scrubbed(lab_with_key, monkeypatch) -> None:
    # A key of another [providers.*] section, unused by this judge, is scrubbed too.
    lab = lab_with_key(KEY)
    other = "other-provider-key-0b77c2d1"
    monkeypatch.setenv("OTHER_JUDGE_CRED", other)
    config = lab.root / "trysquare.toml"
    config.write_text(
        config.read_text()
        + '\n[providers.other]\ntype = "openai"\napi_key_env = "OTHER_JUDGE_CRED"\n'
    )
    lab.run()
    arguments = {m: {"reason": f"I know {other}", "value": False} for m in METRICS}
    lab.respond(lambda _: tool_call(arguments))
    _, printed = validate_in_process(lab)
    assert lab.result()["reasons"]["note_usable"] == "I know ***"
    assert other not in written(lab.exp) + printed


def _encodings(key: str) -> dict[str, str]:
    data = key.encode()
    return {
        "raw": key,
        "json": json.dumps(key)[1:-1],
        "json-ascii-twice": json.dumps(json.dumps(key))[1:-1],
        "url": urllib.parse.quote(key, safe=""),
        "url-plus": urllib.parse.quote_plus(key, safe=""),
        "hex": data.hex(),
        "base64": base64.b64encode(data).decode(),
        "base64-urlsafe": base64.urlsafe_b64encode(data).decode(),
        "basic-offset-1": base64.b64encode(b"u:" + data).decode(),
        "basic-offset-2": base64.b64encode(b"us:" + data).decode(),
    }


def test_scrub_removes_every_encoding_of_a_key_with_quote_backslash_and_space() -> None:
    from trysquare_judge.scrub import scrub, scrub_value

    key = 'sk "odd\\key+/=é-77'
    for name, form in _encodings(key).items():
        text = f"before {form} after"
        cleaned = scrub(text, [key])
        assert form not in cleaned, name
        assert cleaned.startswith("before ") and "***" in cleaned, name
        # Inside a JSON-like value, keys of maps included.
        assert form not in json.dumps(scrub_value({form: [text]}, [key]), ensure_ascii=False), name


def test_a_value_is_scrubbed_whole_when_a_plain_key_hides_anywhere_in_it() -> None:
    # The quick check reads the value's JSON text at once; a key it finds there sends the
    # value through the string-by-string scrub, in any encoding and in keys of maps.
    from trysquare_judge.scrub import scrub_value

    key = "sk-plain-0123456789abcdef"
    for name, form in _encodings(key).items():
        value = {"exchanges": [{"n": 1, "body": ("x", f"a{form}b")}], f"k{form}": None}
        assert form not in json.dumps(scrub_value(value, [key]), ensure_ascii=False), name


def test_a_value_with_no_key_and_no_lone_surrogate_is_returned_as_is() -> None:
    from trysquare_judge.scrub import scrub_value

    value = {"exchanges": [{"body": "ordinary text é", "n": [1, 2.5, None, True]}]}
    assert scrub_value(value, ["sk-absent-key-123456"]) is value
    assert scrub_value(value, []) is value
    # A lone surrogate still becomes its escape, so the file can be written.
    assert scrub_value({"t": ["Done \ud83d"]}, []) == {"t": ["Done \\ud83d"]}
