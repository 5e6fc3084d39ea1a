"""Batch judging (issue 34): verdicts through the providers' batch APIs, kill-safe."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.judge.batchserver import GOOD, BatchFake
from tests.judge.conftest import SCENARIO, JudgeLab

BATCH_SCENARIO = SCENARIO + "batch = true\n"


@pytest.fixture
def openai_fake() -> Iterator[BatchFake]:
    with BatchFake("openai") as fake:
        yield fake


def _batch_lab(lab: JudgeLab, fake: BatchFake, **config: Any) -> None:
    lab.write_scenario(text=BATCH_SCENARIO.format(thinking="off", pieces='["prompt", "response", "diff"]'))
    lab.write_config(base_url=fake.base_url, poll_interval=0.01, **config)


def test_a_batch_judge_sends_one_batch_and_records_every_verdict(lab: JudgeLab, openai_fake: BatchFake) -> None:
    _batch_lab(lab, openai_fake)
    for number in range(3):
        lab.run(f"r{number}", repetition=number, prompt=f"Fix counter.py (run {number}).")
    done = lab.validate()
    assert done.returncode == 0, done.stdout + done.stderr
    assert openai_fake.counts["create"] == 1
    assert openai_fake.counts["chat"] == 0
    for number in range(3):
        result = lab.result(f"r{number}")
        assert result["state"] == "valid", result
        assert result["metrics"] == GOOD
        assert result["usage"]["batch"] is True
    print(done.stdout)
