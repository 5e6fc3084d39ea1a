"""The judge laboratory of tests/judge, driven in-process for the security tests."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trysquare import runner
from trysquare.runs import discover
from trysquare.scenario import load_scenario

from tests.judge.chatserver import ChatServer, error
from tests.judge.conftest import KEY_ENV, JudgeLab

__all__ = ["KEY_ENV", "JudgeLab", "lab_with_key", "validate_in_process", "written"]


def validate_in_process(lab: JudgeLab, *, rejudge: bool = False) -> tuple[int, str]:
    """``trysquare validate`` on the lab's experiment, in this process: (exit code, output)."""
    scenario = load_scenario(lab.scenario)
    out = io.StringIO()
    summary = runner.validate(
        scenario,
        discover([lab.exp]),
        runner.ValidateOptions(jobs=2, progress=False, rejudge=rejudge),
        out=out,
    )
    return summary.exit_code, out.getvalue()


def written(folder: Path) -> str:
    """Every file under ``folder`` outside the clones, as one text."""
    texts = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "repo" not in path.relative_to(folder).parts:
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts)


@pytest.fixture
def lab_with_key(tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A lab whose key is set in this process; call the result with the key to use."""
    with ChatServer(lambda _: error(599)) as server:
        lab = JudgeLab(tmp_path, server, cli)

        def with_key(key: str) -> JudgeLab:
            monkeypatch.setenv(KEY_ENV, key)
            return lab

        yield with_key
