"""Issue 15, item 3: what a judge spent (requests, tokens) and what it cost, recorded and reported."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from trysquare.errors import ConfigError
from trysquare_judge.providers import Usage, load_config
from trysquare_judge.providers.openai import usage_of

from tests.judge.chatserver import (
    CACHED_TOKENS,
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    Received,
    Reply,
    error,
    script,
    tool_call,
    verdict,
)
from tests.judge.conftest import CELL_A, CELL_B, JudgeLab

GOOD = {"note_usable": True, "cites_paths": False}
WRONG = {
    "note_usable": {"reason": "r", "value": "yes"},
    "cites_paths": {"reason": "r", "value": True},
}


def report(lab: JudgeLab, fmt: str) -> str:
    done = lab.cli("report", lab.scenario, lab.exp, "--format", fmt)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


def test_retries_and_corrections_count_and_the_declared_price_gives_a_cost(lab: JudgeLab) -> None:
    lab.write_config(price_input=0.5, price_output=2)
    lab.run()
    # A 429, then a verdict that fails its schema, then a good one: three requests, two answers.
    lab.respond(script([error(429, {"Retry-After": "0"}), tool_call(WRONG), verdict(GOOD)]))
    assert lab.validate().returncode == 0

    usage = lab.result()["usage"]
    assert usage == {
        "requests": 3,
        "input_tokens": 2 * PROMPT_TOKENS,
        "output_tokens": 2 * COMPLETION_TOKENS,
        "cached_tokens": 2 * CACHED_TOKENS,
        "provider": "local",
        "model": "judge-model-1",
        "price_input": 0.5,
        "price_output": 2.0,
    }
    assert lab.transcript()["usage"] == usage

    cost = (2 * PROMPT_TOKENS * 0.5 + 2 * COMPLETION_TOKENS * 2) / 1_000_000
    rows = json.loads(report(lab, "json"))["usage"]
    assert [(r["validator"], r["cell"]) for r in rows] == [("judge", CELL_A), ("judge", None)]
    for row in rows:
        assert row["requests"] == 3 and row["results"] == 1
        assert (
            row["input_tokens"] == 2 * PROMPT_TOKENS and row["cached_tokens"] == 2 * CACHED_TOKENS
        )
        assert row["cost_usd"] == pytest.approx(cost) and row["unpriced"] == {}

    markdown = report(lab, "md")
    assert "### Usage and cost" in markdown
    line = next(line for line in markdown.splitlines() if line.startswith(f"| judge | {CELL_A}"))
    assert "| 3 |" in line and f"| {2 * PROMPT_TOKENS} |" in line and "$0.00024" in line

    table = list(csv.DictReader(io.StringIO(report(lab, "csv"))))
    spent = {(r["cell"], r["validator"], r["metric"]): r for r in table if r["table"] == "usage"}
    assert {(cell, validator) for cell, validator, _ in spent} == {(CELL_A, "judge"), ("", "judge")}
    assert float(spent[(CELL_A, "judge", "cost_usd")]["estimate"]) == pytest.approx(cost)
    assert spent[(CELL_A, "judge", "requests")]["estimate"] == "3"
    assert spent[("", "judge", "cached_tokens")]["estimate"] == str(2 * CACHED_TOKENS)


def test_unreported_tokens_stay_unknown_and_an_undeclared_price_is_never_zero(
    lab: JudgeLab,
) -> None:
    lab.write_config(max_retries=1)
    lab.write_scenario(text=lab.scenario.read_text() + "max_piece_bytes = 4000\n")
    lab.run("quiet", cell=CELL_A, prompt="QUIET: fix counter.py")
    lab.run("storm", cell=CELL_A, repetition=2, prompt="STORM: fix counter.py")
    lab.run("huge", cell=CELL_B, response="x" * 5000)  # over the cap: nothing is sent

    def respond(request: Received) -> Reply:
        text = json.dumps(request.body)
        if "STORM" in text:
            return error(500)
        return verdict(GOOD, usage=None)  # a server that reports no usage at all

    lab.respond(respond)
    assert lab.validate().returncode == 1  # the storm leaves one run invalid

    quiet = lab.result("quiet")["usage"]
    assert quiet["requests"] == 1
    assert (
        quiet["input_tokens"] is None
        and quiet["output_tokens"] is None
        and quiet["cached_tokens"] is None
    )
    assert quiet["price_input"] is None and quiet["price_output"] is None
    storm = lab.result("storm")
    assert storm["state"] == "invalid" and storm["usage"]["requests"] == 2  # first try + one retry
    huge = lab.result("huge")
    assert huge["metrics"] == {"note_usable": None, "cites_paths": None}  # unjudged
    assert huge["usage"]["requests"] == 0 and huge["usage"]["input_tokens"] == 0

    rows = {(r["validator"], r["cell"]): r for r in json.loads(report(lab, "json"))["usage"]}
    a = rows[("judge", CELL_A)]
    assert a["results"] == 2 and a["requests"] == 3 and a["input_tokens"] is None
    assert a["cost_usd"] is None and a["unpriced"] == {"no price declared": 2}
    b = rows[("judge", CELL_B)]
    assert b["requests"] == 0 and b["cost_usd"] == 0  # nothing was sent: truly nothing spent
    assert rows[("judge", None)]["requests"] == 3

    markdown = report(lab, "md")
    line = next(line for line in markdown.splitlines() if line.startswith(f"| judge | {CELL_A}"))
    assert "not reported" in line and "no price declared" in line and "$" not in line

    table = list(csv.DictReader(io.StringIO(report(lab, "csv"))))
    cost = next(
        r
        for r in table
        if r["table"] == "usage" and r["cell"] == CELL_A and r["metric"] == "cost_usd"
    )
    assert cost["estimate"] == "" and cost["state"] == "no price declared"


def test_prices_are_checked_like_every_provider_key(tmp_path: Path) -> None:
    config = tmp_path / "trysquare.toml"
    for value, words in [
        ('"cheap"', "must be a number, not a string"),
        ("-1", "must be a non-negative number"),
        ("nan", "must be a non-negative number"),
    ]:
        config.write_text(
            f'[providers.p]\ntype = "openai"\nprice_input = {value}\n', encoding="utf-8"
        )
        with pytest.raises(ConfigError) as refused:
            load_config(config)
        message = refused.value.message
        assert "providers.p.price_input" in message and words in message, message
        assert "\n" not in message
    config.write_text(
        '[providers.p]\ntype = "openai"\nprice_input = 3\nprice_output = 0.25\n', encoding="utf-8"
    )
    loaded = load_config(config)["p"]
    assert (loaded.price_input, loaded.price_output) == (3.0, 0.25)
    # A price tunes no verdict: changing it never makes a paid verdict stale.
    assert "price_input" not in loaded.identity()


def test_usage_adds_up_and_reads_what_a_chat_completion_reports() -> None:
    assert Usage(requests=1, input_tokens=5) + Usage(requests=2) == Usage(
        requests=3, input_tokens=5
    )
    assert (Usage() + Usage()).input_tokens is None
    read = usage_of(
        {
            "usage": {
                "prompt_tokens": 9,
                "completion_tokens": 4,
                "prompt_tokens_details": {"cached_tokens": 2},
            }
        }
    )
    assert (read.input_tokens, read.output_tokens, read.cached_tokens) == (9, 4, 2)
    assert (
        usage_of({"usage": {"prompt_tokens": 9, "completion_tokens": True}}).output_tokens is None
    )
    assert usage_of({}).input_tokens is None
