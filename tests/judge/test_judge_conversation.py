"""The judge end to end: the CLI in a subprocess, a scripted chat-completions server on loopback."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.judge.chatserver import Reply, by_turn, error, prose, script, tool_call, verdict
from tests.judge.conftest import CELL_A, GIVEN, KEY, PROMPT, RESPONSE, RUBRIC, JudgeLab

GOOD = {"note_usable": True, "cites_paths": False}

EXPECTED_SCHEMA = {
    "type": "object",
    "properties": {
        metric: {
            "type": "object",
            "properties": {"reason": {"type": "string"}, "value": {"type": "boolean"}},
            "required": ["reason", "value"],
            "additionalProperties": False,
        }
        for metric in ("note_usable", "cites_paths")
    },
    "required": ["note_usable", "cites_paths"],
    "additionalProperties": False,
}


def test_a_good_verdict_is_recorded_and_the_request_is_blind_and_forced(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(script([verdict(GOOD)]))
    done = lab.validate()
    assert done.returncode == 0, done.stderr + done.stdout
    assert "judge: blind over 1 cell (pieces: prompt, response, diff)" in done.stdout

    result = lab.result()
    assert result["state"] == "valid" and result["error"] is None
    assert result["metrics"] == GOOD
    assert result["reasons"] == {
        "note_usable": "because (note_usable)",
        "cites_paths": "because (cites_paths)",
    }

    [request] = lab.server.received
    body = request.body
    assert body["stream"] is False
    assert body["model"] == "judge-model-1"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "verdict"}}
    [tool] = body["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "verdict"
    assert tool["function"]["parameters"] == EXPECTED_SCHEMA
    # Reason before value, in the schema as sent.
    entry = json.loads(json.dumps(tool["function"]["parameters"]))["properties"]["note_usable"]
    assert list(entry["properties"]) == ["reason", "value"]
    assert "reasoning_effort" not in body  # thinking = "off" sends no reasoning request
    assert request.headers.get("Authorization") == f"Bearer {KEY}"

    system, user = body["messages"]
    assert system["role"] == "system" and RUBRIC.strip() in system["content"]
    assert user["role"] == "user"
    assert PROMPT in user["content"] and RESPONSE in user["content"]
    assert "+count = 0" in user["content"]  # the diff
    text = json.dumps(body)
    assert CELL_A not in text  # no cell name anywhere
    assert GIVEN not in text  # no given
    assert str(lab.exp) not in text and str(lab.root) not in text  # no path that could name a cell


def test_the_key_is_never_written_and_the_transcript_keeps_every_exchange(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(script([error(429, {"Retry-After": "0"}), verdict(GOOD)]))
    assert lab.validate().returncode == 0
    transcript = lab.transcript()
    assert [e["response"]["status"] for e in transcript["exchanges"]] == [429, 200]
    assert transcript["exchanges"][0]["request"]["body"]["messages"][1]["role"] == "user"
    assert transcript["outcome"] == {"state": "valid", "error": None}
    for folder in (lab.exp, lab.folder):
        for path in folder.rglob("*"):
            if path.is_file() and ".git" not in path.parts:
                data = path.read_bytes()
                assert KEY.encode() not in data, path
                assert b"Authorization" not in data and b"Bearer" not in data, path


def test_a_prose_answer_is_answered_then_the_run_is_invalid(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(lambda _: prose("Looks good to me!"))
    done = lab.validate()
    assert done.returncode == 1
    result = lab.result()
    assert result["state"] == "invalid"
    assert result["error"] == "judge never called the verdict tool"
    assert result["metrics"] == {}  # never a negative
    assert len(lab.server.received) == 3  # max_turns, within one conversation
    second = lab.server.received[1].messages
    assert second[2] == {"role": "assistant", "content": "Looks good to me!"}
    assert second[3]["role"] == "user" and "verdict" in second[3]["content"]
    assert "not publishable" in done.stdout


def test_an_invalid_call_is_corrected_on_the_second_turn(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(by_turn([tool_call({"note_usable": {"value": True}}), verdict(GOOD)]))
    done = lab.validate()
    assert done.returncode == 0, done.stdout
    assert lab.result()["metrics"] == GOOD
    _, second = lab.server.received
    call = second.messages[2]["tool_calls"][0]
    answer = second.messages[3]
    assert answer["role"] == "tool" and answer["tool_call_id"] == call["id"]
    assert "failed validation" in answer["content"]
    assert "cites_paths" in answer["content"] and "reason" in answer["content"]


def test_an_invalid_call_never_corrected_makes_the_run_invalid(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(
        lambda _: tool_call(
            {
                "note_usable": {"reason": "ok", "value": "yes"},
                "cites_paths": {"reason": "", "value": False},
            }
        )
    )
    done = lab.validate()
    assert done.returncode == 1
    result = lab.result()
    assert result["state"] == "invalid" and result["metrics"] == {}
    assert result["error"].startswith(
        "verdict failed validation: note_usable.value: 'yes' is not of type 'boolean'"
    )
    assert len(lab.server.received) == 3


def test_arguments_that_are_not_json_are_a_failed_validation(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(lambda _: tool_call('{"note_usable": ', raw=True))
    lab.validate()
    assert lab.result()["error"].startswith("verdict failed validation: the arguments are not JSON")


def test_429_with_retry_after_is_waited_for_then_succeeds(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(script([error(429, {"Retry-After": "1"}), verdict(GOOD)]))
    done = lab.validate()
    assert done.returncode == 0, done.stdout
    assert lab.result()["metrics"] == GOOD
    first, second = lab.server.received
    assert second.at - first.at >= 1.0  # the server's Retry-After, not the 0.05 s backoff
    assert first.body == second.body  # the same request, retried


def test_a_500_storm_ends_invalid_after_the_retries(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(lambda _: error(500))
    done = lab.validate()
    assert done.returncode == 1
    result = lab.result()
    assert result["state"] == "invalid" and result["metrics"] == {}
    assert "HTTP 500" in result["error"] and "gave up after 3 attempts" in result["error"]
    assert len(lab.server.received) == 3  # the first attempt and max_retries = 2
    assert len(lab.transcript()["exchanges"]) == 3


def test_a_slow_server_hits_the_timeout(lab: JudgeLab) -> None:
    lab.write_config(timeout=0.5, max_retries=0)
    lab.run()
    lab.respond(lambda _: Reply(body={}, delay=2.5))
    done = lab.validate()
    assert done.returncode == 1
    result = lab.result()
    assert result["state"] == "invalid"
    assert "no reply within 0.5 s" in result["error"]
    assert result["duration"] < 2.0


def test_a_4xx_is_not_retried(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(lambda _: error(400))
    lab.validate()
    assert "HTTP 400" in lab.result()["error"]
    assert len(lab.server.received) == 1


def test_empty_material_is_sent_as_empty_and_thinking_is_mapped(lab: JudgeLab) -> None:
    lab.write_scenario(thinking="high", pieces='["response"]')
    lab.run(response="")  # a response.md that is really empty (unknown is tested in security/)
    lab.respond(script([verdict(GOOD)]))
    assert lab.validate().returncode == 0
    [request] = lab.server.received
    assert request.body["reasoning_effort"] == "high"
    user = request.messages[1]["content"]
    assert "## response" in user and "(empty)" in user
    assert PROMPT not in user and "+count = 0" not in user  # only the declared piece


def test_revalidation_reuses_the_verdict_unless_rejudge_and_keeps_history(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(lambda _: verdict(GOOD))
    assert lab.validate().returncode == 0
    assert len(lab.server.received) == 1
    assert lab.validate().returncode == 0
    assert lab.validate("--force").returncode == 0  # --force does not re-ask a paid judge
    assert len(lab.server.received) == 1

    lab.respond(lambda _: verdict({"note_usable": False, "cites_paths": True}))
    assert lab.validate("--rejudge").returncode == 0
    assert len(lab.server.received) == 2
    assert lab.result()["metrics"] == {"note_usable": False, "cites_paths": True}
    validation = lab.exp / "runs" / "r1" / "validation"
    history = [
        json.loads(line) for line in (validation / "judge.history.jsonl").read_text().splitlines()
    ]
    assert [h["metrics"] for h in history] == [GOOD]
    old_transcripts = (validation / "judge" / "transcript.history.jsonl").read_text().splitlines()
    assert len(old_transcripts) == 1

    # Another rubric is another judge: its verdicts are stale, asked again without --rejudge.
    (lab.folder / "rubric.md").write_text(RUBRIC + "Be strict.\n", encoding="utf-8")
    assert lab.validate().returncode == 0
    assert len(lab.server.received) == 3


def test_the_concurrency_bound_holds_across_runs(lab: JudgeLab) -> None:
    lab.write_config(max_concurrency=2)
    for number in range(6):
        lab.run(f"r{number}", repetition=number + 1)
    lab.respond(lambda _: Reply(body=verdict(GOOD).body, delay=0.2))
    done = lab.validate(jobs=6)
    assert done.returncode == 0, done.stdout
    assert len(lab.server.received) == 6
    assert lab.server.peak == 2


def test_the_context_archived_for_the_judge_is_blinded(lab: JudgeLab) -> None:
    lab.run()
    lab.respond(script([verdict(GOOD)]))
    lab.validate()
    context = json.loads(
        (lab.exp / "runs" / "r1" / "validation" / "judge" / "context.json").read_text()
    )
    assert "cell" not in context and "given" not in context
    assert os.path.isabs(context["prompt"]) and Path(context["diff"]).is_file()
