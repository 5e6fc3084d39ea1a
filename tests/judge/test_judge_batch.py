"""Batch judging (issue 34): verdicts through the providers' batch APIs, kill-safe.

Every test drives a stateful fake batch API on loopback (``tests/judge/batchserver.py``):
its batches advance on each look, answer in a shuffled order, and script each request's
fate. The kill tests SIGKILL a real ``trysquare validate`` at the three moments that
matter (the batch created but its id not heard; while looking at it; while its verdicts
are recorded), run it again, and count: one batch, each verdict once.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from trysquare.testing import build_matrix

from tests.helpers import dist_info
from tests.judge.batchserver import GOOD, BatchFake, verdict_arguments
from tests.judge.chatserver import verdict
from tests.judge.conftest import PROMPT, RESPONSE, SCENARIO, JudgeLab

BATCH_SCENARIO = SCENARIO + "batch = true\n"
PIECES = '["prompt", "response", "diff"]'
FLAVOURS = ("openai", "anthropic")


class BatchLab:
    """A judge lab whose provider is a fake batch API of one flavour."""

    def __init__(self, lab: JudgeLab, fake: BatchFake) -> None:
        self.lab, self.fake = lab, fake
        lab.write_scenario(text=BATCH_SCENARIO.format(thinking="off", pieces=PIECES))
        self.configure()
        if fake.flavour == "anthropic":
            lab.cli.env["TRYSQUARE_BLOCK_PLUGINS"] = ""
            try:
                metadata.distribution("trysquare-anthropic")
            except metadata.PackageNotFoundError:  # `uv run pytest`: its source, by entry point
                site = dist_info(lab.root / "site", "trysquare-anthropic", "trysquare_anthropic",
                                 version="0.1.0", requires=("trysquare-judge>=0.1.0",))  # fmt: skip
                source = (
                    Path(__file__).resolve().parents[2] / "plugins" / "trysquare-anthropic" / "src"
                )
                lab.cli.env["PYTHONPATH"] = os.pathsep.join(
                    filter(None, [str(site), str(source), lab.cli.env.get("PYTHONPATH")])
                )

    def configure(self, **overrides: Any) -> None:
        values: dict[str, Any] = {
            "base_url": self.fake.base_url,
            "poll_interval": 0.01,
            "type": self.fake.flavour,
        }
        values.update(overrides)
        self.lab.write_config(**values)

    def runs(self, count: int, *, copies: bool = False) -> list[str]:
        """``count`` runs, each with its own prompt (copies of one run when ``copies``)."""
        ids = [f"r{number:03d}" for number in range(count)]
        if copies:
            build_matrix(
                self.lab.exp, [(run_id, "cell-zebra-quartz", number) for number, run_id in enumerate(ids)],
                base={"counter.py": "count = 1\n"}, changes={"counter.py": "count = 0\n"},
                response=RESPONSE, prompt=PROMPT, model="agent-vendor/agent-model",
            )  # fmt: skip
            return ids
        for number, run_id in enumerate(ids):
            self.lab.run(run_id, repetition=number, prompt=f"{PROMPT} (run {run_id})")
        return ids

    def validate(self, *args: str) -> Any:
        return self.lab.validate(*args)

    def process(self, *args: str) -> subprocess.Popen[str]:
        """``trysquare validate`` in a process of its own, which the fake may kill."""
        argv = [
            sys.executable,
            "-m",
            "trysquare",
            "validate",
            str(self.lab.scenario),
            str(self.lab.exp),
            "--no-progress",
            "--jobs",
            "2",
            *args,
        ]
        return subprocess.Popen(
            argv, env=self.lab.cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def verdicts(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        return {run_id: self.lab.result(run_id) for run_id in ids}

    def history(self, run_id: str) -> list[dict[str, Any]]:
        path = self.lab.exp / "runs" / run_id / "validation" / "judge.history.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]

    def store(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.lab.exp / ".trysquare" / "batches.sqlite")
        db.row_factory = sqlite3.Row
        return db


@pytest.fixture(params=FLAVOURS)
def batch(request: pytest.FixtureRequest, lab: JudgeLab) -> Iterator[BatchLab]:
    with BatchFake(request.param) as fake:
        yield BatchLab(lab, fake)


@pytest.fixture
def openai_batch(lab: JudgeLab) -> Iterator[BatchLab]:
    with BatchFake("openai") as fake:
        yield BatchLab(lab, fake)


def _run_of(body: Mapping[str, Any]) -> str:
    """The run a request is about: its prompt says ``(run rNNN)``."""
    text = json.dumps(body)
    start = text.index("(run r") + len("(run ")
    return text[start : start + 4]


def _one_verdict_each(batch: BatchLab, ids: list[str]) -> None:
    """Every run holds a valid verdict, and no verdict was ever recorded twice."""
    for run_id in ids:
        result = batch.lab.result(run_id)
        assert result["state"] == "valid", (run_id, result)
        assert result["metrics"] == GOOD
        earlier = [entry for entry in batch.history(run_id) if entry["state"] == "valid"]
        assert earlier == [], (run_id, earlier)


# -- the path itself --------------------------------------------------------------------------


def test_200_runs_are_one_batch_and_their_verdicts_are_the_interactive_ones(
    openai_batch: BatchLab, lab: JudgeLab
) -> None:
    started = time.monotonic()
    ids = openai_batch.runs(200, copies=True)
    built = time.monotonic()
    done = openai_batch.validate()
    judged = time.monotonic()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "200 runs: 200 valid"
    fake = openai_batch.fake
    assert (fake.counts["create"], fake.counts["upload"], fake.counts["chat"]) == (1, 1, 0)
    assert len(fake.sent_ids) == 200 == len(set(fake.sent_ids))
    batched = openai_batch.verdicts(ids)
    assert all(result["usage"]["batch"] is True for result in batched.values())

    # The same answers from the interactive path: the same records, the usage's batch mark aside.
    interactive = lab.root / "interactive"
    (interactive / "runs").mkdir(parents=True)
    for run_id in ids[:3]:
        shutil.copytree(lab.exp / "runs" / run_id, interactive / "runs" / run_id, symlinks=True)
        shutil.rmtree(interactive / "runs" / run_id / "validation")
    lab.write_scenario(text=SCENARIO.format(thinking="off", pieces=PIECES))
    lab.write_config()  # the chat server, no batch
    lab.respond(lambda _request: verdict(GOOD))
    asked = lab.cli("validate", lab.scenario, interactive, "--no-progress")
    assert asked.returncode == 0, asked.stdout + asked.stderr
    for run_id in ids[:3]:
        one = json.loads((interactive / "runs" / run_id / "validation" / "judge.json").read_text())
        other = batched[run_id]
        # Another endpoint (the chat server) is another judge: its digests differ, nothing else.
        for key in ("metrics", "reasons", "state", "error"):
            assert one[key] == other[key], key
        assert one["validator"]["name"] == other["validator"]["name"] == "judge"
        assert {k: v for k, v in one["usage"].items() if k not in ("batch",)} == {
            k: v for k, v in other["usage"].items() if k != "batch"
        }
        shapes = [
            json.loads(
                (root / "runs" / run_id / "validation" / "judge" / "transcript.json").read_text()
            )
            for root in (interactive, lab.exp)
        ]
        assert shapes[0].keys() == shapes[1].keys()
        assert [e["request"]["body"]["messages"] for e in shapes[0]["exchanges"]] == [
            e["request"]["body"]["messages"] for e in shapes[1]["exchanges"]
        ]
    print(
        f"\n200 runs: built in {built - started:.1f} s, judged in batch in {judged - built:.1f} s"
    )


def test_scripted_outcomes_are_sent_again_corrected_or_failed_never_negative(
    batch: BatchLab,
) -> None:
    fates = {
        "r000": ["succeeded"],
        "r001": ["errored", "succeeded"],
        "r002": ["expired", "succeeded"],
        "r003": ["malformed", "succeeded"],  # corrected in the same conversation, next batch
        "r004": ["missing", "succeeded"],
        "r005": ["errored", "errored", "errored"],  # attempts run out: invalid, never false
    }
    seen: dict[str, int] = {}

    def outcome(_custom_id: str, body: Mapping[str, Any]) -> str:
        run_id = _run_of(body)
        turn = seen.get(run_id, 0)
        seen[run_id] = turn + 1
        script = fates[run_id]
        return script[min(turn, len(script) - 1)]

    batch.fake.outcome = outcome
    ids = batch.runs(6)
    done = batch.validate()
    assert done.returncode == 1, done.stdout + done.stderr
    results = batch.verdicts(ids)
    for run_id in ids[:5]:
        assert results[run_id]["state"] == "valid", results[run_id]
        assert results[run_id]["metrics"] == GOOD
    failed = results["r005"]
    assert failed["state"] == "invalid" and failed["metrics"] == {}
    assert "errored 3 times" in failed["error"]
    assert batch.fake.counts["chat"] == 0
    assert (
        batch.fake.counts["create"] == 3
    )  # everything, the five sent again, then r005 a third time
    assert len(batch.fake.sent_ids) == len(set(batch.fake.sent_ids)) == 6 + 5 + 1
    corrected = batch.lab.transcript("r003")
    assert len(corrected["exchanges"]) == 2
    last = corrected["exchanges"][1]["request"]["body"]["messages"]
    assert "failed validation" in json.dumps(last[-1])
    assert corrected["usage"]["requests"] == 2


def test_no_wait_returns_pending_and_a_later_validate_collects_without_sending_again(
    batch: BatchLab,
) -> None:
    batch.fake.looks_to_end = 3
    ids = batch.runs(2)
    sent = batch.validate("--no-wait")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    remote = batch.fake.order[0]
    assert f"judge 'judge': batch {remote} sent (2 requests)" in sent.stdout
    assert (
        f"judge 'judge': batch {remote} " in sent.stdout
        and ": 0 done, 0 failed, 2 pending, oldest 0s" in sent.stdout
    )
    last = sent.stdout.splitlines()[-1]
    assert last.startswith("2 runs: 2 pending"), last
    assert "2 verdicts in flight in 1 batch; run validate again to collect them" in last
    pending = batch.lab.result(ids[0])
    assert pending["state"] == "pending"
    assert any(batch.fake.order[0] in note for note in pending["notes"])  # with its batch id
    listed = batch.lab.cli("batches", batch.lab.scenario, batch.lab.exp)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert batch.fake.order[0] in listed.stdout and "in_flight" in listed.stdout
    collected = batch.validate()
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert collected.stdout.splitlines()[-1] == "2 runs: 2 valid"
    assert batch.fake.counts["create"] == 1
    _one_verdict_each(batch, ids)


def test_a_batch_verdict_is_reused_and_rejudged_like_an_interactive_one(batch: BatchLab) -> None:
    ids = batch.runs(2)
    assert batch.validate().returncode == 0
    again = batch.validate()
    assert again.returncode == 0
    assert again.stdout.splitlines()[-1] == "2 runs: 2 valid; 2 results unchanged (reused)"
    assert batch.fake.counts["create"] == 1
    first_ids = list(batch.fake.sent_ids)
    batch.fake.verdict = lambda _body: verdict_arguments(
        {"note_usable": False, "cites_paths": True}
    )
    rejudged = batch.validate("--rejudge")
    assert rejudged.returncode == 0, rejudged.stdout + rejudged.stderr
    assert batch.fake.counts["create"] == 2
    assert not set(first_ids) & set(batch.fake.sent_ids[2:])  # new custom_ids: no answer confused
    for run_id in ids:
        assert batch.lab.result(run_id)["metrics"] == {"note_usable": False, "cites_paths": True}
        assert [
            entry["metrics"] for entry in batch.history(run_id) if entry["state"] == "valid"
        ] == [GOOD]
    report = batch.lab.cli("report", batch.lab.scenario, batch.lab.exp, "--format", "json")
    assert report.returncode == 0, report.stdout + report.stderr


def test_a_rejudge_whose_batch_fails_keeps_the_previous_verdict_like_an_interactive_one(
    batch: BatchLab,
) -> None:
    ids = batch.runs(2)
    assert batch.validate().returncode == 0
    first = batch.verdicts(ids)
    batch.fake.outcome = lambda _id, _body: "errored"  # the provider fails every request
    rejudged = batch.validate("--rejudge")
    assert rejudged.returncode == 1, rejudged.stdout + rejudged.stderr
    last = rejudged.stdout.splitlines()[-1]
    assert last.startswith("2 runs: 2 valid; 2 results kept as recorded: asking again failed ("), (
        last
    )
    assert batch.fake.counts["create"] == 1 + 3  # asked again, up to the attempt bound
    for run_id in ids:
        result = batch.lab.result(run_id)
        assert result["state"] == "valid", result
        assert (result["metrics"], result["reasons"]) == (
            first[run_id]["metrics"],
            first[run_id]["reasons"],
        )
        assert result["kept_after"].startswith("kept the previous verdict: judge provider")
        assert "errored 3 times" in result["kept_after"]
        # The spending of the kept verdict stays counted, with that of the failed asks.
        assert result["usage"]["requests"] == first[run_id]["usage"]["requests"] + 3
        assert not [entry for entry in batch.history(run_id) if entry["state"] == "invalid"]
    # Kept and current: the next validate reuses it, as after an interactive outage.
    again = batch.validate()
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines()[-1] == "2 runs: 2 valid; 2 results unchanged (reused)"
    assert batch.fake.counts["create"] == 4


def test_a_rejudge_with_no_verdict_before_stays_invalid(openai_batch: BatchLab) -> None:
    openai_batch.fake.outcome = lambda _id, _body: "errored"
    openai_batch.runs(1)
    assert openai_batch.validate().returncode == 1
    assert openai_batch.validate("--rejudge").returncode == 1
    result = openai_batch.lab.result("r000")
    assert result["state"] == "invalid" and result["metrics"] == {}
    assert "kept_after" not in result and "errored 3 times" in result["error"]


@pytest.mark.parametrize("ending", ["cancelled", "expired"])
def test_a_batch_ending_with_requests_unanswered_sends_them_again_within_the_bound(
    batch: BatchLab, ending: str
) -> None:
    fates = {
        "r000": ["succeeded"],
        "r001": ["succeeded"],
        "r002": ["missing", "succeeded"],  # absent from the first batch's results
        "r003": ["missing"],  # absent every time: invalid after the attempt bound, never false
    }
    seen: dict[str, int] = {}

    def outcome(_custom_id: str, body: Mapping[str, Any]) -> str:
        run_id = _run_of(body)
        turn = seen.get(run_id, 0)
        seen[run_id] = turn + 1
        script = fates[run_id]
        return script[min(turn, len(script) - 1)]

    batch.fake.outcome = outcome
    batch.fake.end_states = dict.fromkeys((1, 2, 3), ending)  # the provider ends each batch itself
    ids = batch.runs(4)
    done = batch.validate()
    assert done.returncode == 1, done.stdout + done.stderr
    assert batch.fake.counts["create"] == 3  # all four; r002 and r003; r003 alone
    assert len(batch.fake.sent_ids) == len(set(batch.fake.sent_ids)) == 4 + 2 + 1
    assert seen == {"r000": 1, "r001": 1, "r002": 2, "r003": 3}
    results = batch.verdicts(ids)
    for run_id in ids[:3]:
        assert results[run_id]["state"] == "valid" and results[run_id]["metrics"] == GOOD
        assert not [e for e in batch.history(run_id) if e["state"] == "valid"]  # landed once
    unanswered = results["r003"]
    assert unanswered["state"] == "invalid" and unanswered["metrics"] == {}
    assert "expired 3 times (the batch ended without answering it)" in unanswered["error"]
    again = batch.validate()
    assert again.returncode == 1, again.stdout + again.stderr
    assert batch.fake.counts["create"] == 3  # nothing sent again unasked
    assert batch.verdicts(ids) == results
    with batch.store() as db:
        assert {row["state"] for row in db.execute("SELECT state FROM items")} == {"ingested"}


def test_cancel_leaves_its_runs_invalid_until_rejudged(batch: BatchLab) -> None:
    batch.fake.looks_to_end = 50
    ids = batch.runs(2)
    assert batch.validate("--no-wait").returncode == 0
    cancelled = batch.lab.cli("batches", batch.lab.scenario, batch.lab.exp, "--cancel")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert "cancel asked" in cancelled.stdout
    assert batch.fake.counts["cancel"] == 1
    done = batch.validate()
    assert done.returncode == 1
    for run_id in ids:
        result = batch.lab.result(run_id)
        assert result["state"] == "invalid" and "cancelled" in result["error"]
    assert batch.fake.counts["create"] == 1  # a cancelled batch is not sent again unasked
    batch.fake.looks_to_end = 1
    assert batch.validate("--rejudge").returncode == 0
    _one_verdict_each(batch, ids)


def test_batches_are_split_at_the_providers_request_and_byte_limits(
    openai_batch: BatchLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trysquare_judge.providers.openai_batch import OpenAIBatchClient

    ids = openai_batch.runs(5)
    monkeypatch.setattr(OpenAIBatchClient, "max_requests", 2)
    assert openai_batch.validate().returncode == 0
    assert [len(openai_batch.fake.requests[b]) for b in openai_batch.fake.order] == [2, 2, 1]
    monkeypatch.setattr(OpenAIBatchClient, "max_requests", 50_000)
    monkeypatch.setattr(
        OpenAIBatchClient, "max_bytes", 1
    )  # each request alone is over it: one a batch
    assert openai_batch.validate("--rejudge").returncode == 0
    assert [len(openai_batch.fake.requests[b]) for b in openai_batch.fake.order[3:]] == [1] * 5
    assert all(openai_batch.lab.result(run_id)["state"] == "valid" for run_id in ids)


def test_a_server_without_a_batch_api_leaves_the_runs_invalid_saying_why(
    openai_batch: BatchLab,
) -> None:
    openai_batch.fake.api = False
    openai_batch.runs(1)
    done = openai_batch.validate()
    assert done.returncode == 1, done.stdout + done.stderr
    result = openai_batch.lab.result("r000")
    assert result["state"] == "invalid" and result["metrics"] == {}
    assert "its batch could not be created 3 times (HTTP 404 from POST" in result["error"]
    assert openai_batch.fake.counts["chat"] == 0


def test_costs_of_batch_verdicts_are_at_batch_price_and_apart(openai_batch: BatchLab) -> None:
    openai_batch.configure(price_input=2.0, price_output=8.0)
    openai_batch.runs(1)
    assert openai_batch.validate().returncode == 0
    usage = openai_batch.lab.result("r000")["usage"]
    assert (usage["price_input"], usage["price_output"], usage["batch"]) == (1.0, 4.0, True)
    report = openai_batch.lab.cli("report", openai_batch.lab.scenario, openai_batch.lab.exp)
    assert report.returncode == 0, report.stdout
    assert "judge (batch)" in report.stdout


def test_a_provider_without_a_batch_api_is_refused_at_load(lab: JudgeLab, site: Any) -> None:
    site(
        "fake-provider",
        "fake_provider",
        textwrap.dedent("""\
        from trysquare import hookimpl

        class Plain:
            name = "plain"
            def defaults(self):
                return {"base_url": "http://127.0.0.1:9/v1"}
            def connect(self, config):
                raise AssertionError("never used")

        @hookimpl
        def trysquare_register_judge_providers(register):
            register(Plain())
    """),
    )
    lab.write_scenario(
        text=BATCH_SCENARIO.format(thinking="off", pieces=PIECES).replace('"local"', '"plain"')
    )
    done = lab.check()
    assert done.returncode == 2
    assert (
        "batch: provider type 'plain' (provider 'plain') declares no batch support" in done.stderr
    )


# -- kill -9 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("moment", ["create", "poll"])
def test_a_kill_while_sending_or_looking_loses_nothing_and_pays_nothing_twice(
    batch: BatchLab, moment: str
) -> None:
    ids = batch.runs(4)
    batch.fake.kill_at = moment
    batch.fake.kill_after = 1
    process = batch.process()
    batch.fake.kill_pid = process.pid
    out, err = process.communicate(timeout=120)
    assert process.returncode == -9, out + err
    assert batch.fake.killed
    with batch.store() as db:
        states = [row["state"] for row in db.execute("SELECT state FROM items")]
        batches = [dict(row) for row in db.execute("SELECT state, remote_id FROM batches")]
    if moment == "create":  # recorded as being created, its id never heard
        assert (states, batches) == (["submitting"] * 4, [{"state": "creating", "remote_id": None}])
    else:
        assert (states, batches) == (
            ["in_flight"] * 4,
            [{"state": "in_flight", "remote_id": batch.fake.order[0]}],
        )
    again = batch.validate()
    assert again.returncode == 0, again.stdout + again.stderr
    if moment == "create":
        assert "adopted" in again.stdout, again.stdout
    assert batch.fake.counts["create"] == 1  # the orphan was found, not paid for again
    assert len(batch.fake.sent_ids) == len(set(batch.fake.sent_ids)) == 4
    assert batch.fake.counts["chat"] == 0
    _one_verdict_each(batch, ids)


OBSERVER = """\
import os, signal
from trysquare import hookimpl

seen = []

@hookimpl
def trysquare_metrics_collected(run, validation, outcome):
    if outcome.state == "valid":
        seen.append(run.id)
        if len(seen) == int(os.environ.get("KILL_AFTER_VERDICTS", "0")):
            os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_kill_while_verdicts_are_recorded_records_each_exactly_once(
    batch: BatchLab, site: Any
) -> None:
    folder = site("kill-observer", "kill_observer", OBSERVER)
    batch.lab.cli.env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(folder), batch.lab.cli.env.get("PYTHONPATH")])
    )
    ids = batch.runs(5)
    batch.lab.cli.env["KILL_AFTER_VERDICTS"] = "2"
    process = batch.process()
    out, err = process.communicate(timeout=120)
    assert process.returncode == -9, out + err
    recorded = [run_id for run_id in ids if batch.lab.result(run_id)["state"] == "valid"]
    assert len(recorded) == 2
    with batch.store() as db:
        states = sorted(row["state"] for row in db.execute("SELECT state FROM items"))
    assert (
        states.count("ended") == 4 and states.count("ingested") == 1
    )  # the second's mark never came
    batch.lab.cli.env["KILL_AFTER_VERDICTS"] = "0"
    again = batch.validate()
    assert again.returncode == 0, again.stdout + again.stderr
    assert batch.fake.counts["create"] == 1
    assert (
        batch.fake.counts["results"] == (2 if batch.fake.flavour == "openai" else 1)
        or batch.fake.counts["results"] == 1
    )
    _one_verdict_each(batch, ids)
    with batch.store() as db:
        assert {row["state"] for row in db.execute("SELECT state FROM items")} == {"ingested"}


def test_ctrl_c_while_waiting_leaves_the_batch_recorded(batch: BatchLab) -> None:
    import signal

    batch.fake.looks_to_end = 10_000
    batch.configure(poll_interval=0.05)
    ids = batch.runs(2)
    process = batch.process()
    deadline = time.monotonic() + 60
    while batch.fake.counts["poll"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    with batch.store() as db:
        assert {row["state"] for row in db.execute("SELECT state FROM items")} == {"in_flight"}
        assert [row["remote_id"] for row in db.execute("SELECT remote_id FROM batches")] == [
            batch.fake.order[0]
        ]
    assert batch.fake.counts["cancel"] == 0  # left in flight, not cancelled
    batch.fake.looks_to_end = 0
    again = batch.validate()
    assert again.returncode == 0, again.stdout + again.stderr
    assert batch.fake.counts["create"] == 1
    _one_verdict_each(batch, ids)
