"""A judge laboratory: a scripted loopback server, a scenario pointing at it, real runs."""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from trysquare.testing import RunBuilder

from tests.judge.chatserver import ChatServer, Received, Reply, error

KEY_ENV = "TRYSQUARE_JUDGE_TEST_KEY"
KEY = "sk-test-DO-NOT-WRITE-7f3a9c"
CELL_A = "cell-zebra-quartz"
CELL_B = "cell-walrus-onyx"
GIVEN = "probe_given_check.py"
PROMPT = "Fix the off-by-one in counter.py and explain what you changed."
RESPONSE = "I changed `count` in counter.py to start at zero; tests pass."
RUBRIC = textwrap.dedent("""\
    # Rubric (tests)
    note_usable is false when the note does not say what changed.
    cites_paths is false when no file path is named.
    If the material is empty or unreadable, still call the tool: every metric false.
""")

SCENARIO = """\
[[validation]]
mode = "judge"
provider = "local"
model = "judge-model-1"
thinking = "{thinking}"
rubric = "rubric.md"
pieces = {pieces}
metrics = ["note_usable", "cites_paths"]
"""


class JudgeLab:
    """Everything a judge test needs, with the server's responder set per test."""

    def __init__(self, root: Path, server: ChatServer, cli: Any) -> None:
        self.root = root
        self.server = server
        self.cli = cli
        self.folder = root / "scn"
        self.exp = root / "exp"
        self.folder.mkdir()
        (self.folder / "rubric.md").write_text(RUBRIC, encoding="utf-8")
        self.scenario = self.folder / "scenario.toml"
        self.write_scenario()
        self.write_config()
        cli.env[KEY_ENV] = KEY
        # The judge as `pip install trysquare-judge` leaves it: a provider plugin synced beside
        # it (`uv sync --all-packages` installs trysquare-anthropic) would change "installed".
        cli.env["TRYSQUARE_BLOCK_PLUGINS"] = "trysquare-anthropic"

    def respond(self, responder: Callable[[Received], Reply]) -> None:
        self.server.responder = responder

    def write_scenario(
        self,
        *,
        thinking: str = "off",
        pieces: str = '["prompt", "response", "diff"]',
        text: str | None = None,
    ) -> None:
        body = text if text is not None else SCENARIO.format(thinking=thinking, pieces=pieces)
        self.scenario.write_text(textwrap.dedent(body), encoding="utf-8")

    def write_config(self, **overrides: Any) -> None:
        values: dict[str, Any] = {
            "type": "openai",
            "base_url": self.server.base_url,
            "api_key_env": KEY_ENV,
            "max_concurrency": 4,
            "timeout": 5,
            "max_retries": 2,
            "retry_backoff": 0.05,
        }
        values.update(overrides)
        lines = ["[providers.local]"]
        for key, value in values.items():
            if value is not None:
                lines.append(f"{key} = {json.dumps(value)}")
        (self.root / "trysquare.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def run(
        self,
        run_id: str = "r1",
        *,
        cell: str = CELL_A,
        repetition: int = 1,
        prompt: str = PROMPT,
        response: str | None = RESPONSE,
        model: str | None = "agent-vendor/agent-model",
        change: str = "count = 0\n",
    ) -> RunBuilder:
        builder = RunBuilder(
            self.exp / "runs" / run_id, cell=cell, repetition=repetition, prompt=prompt, model=model
        )
        builder.base({"counter.py": "count = 1\n"}, given={GIVEN: "assert True\n"})
        builder.repo.write("counter.py", change)
        builder.finish(response=response)
        return builder

    def validate(self, *args: str | Path, jobs: int = 4) -> subprocess.CompletedProcess[str]:
        return self.cli(
            "validate", self.scenario, self.exp, "--no-progress", "--jobs", str(jobs), *args
        )

    def check(self, *paths: Path) -> subprocess.CompletedProcess[str]:
        return self.cli("check", self.scenario, *paths)

    def result(self, run_id: str = "r1", name: str = "judge") -> dict[str, Any]:
        path = self.exp / "runs" / run_id / "validation" / f"{name}.json"
        return json.loads(path.read_text(encoding="utf-8"))

    def transcript(self, run_id: str = "r1", name: str = "judge") -> dict[str, Any]:
        path = self.exp / "runs" / run_id / "validation" / name / "transcript.json"
        return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def lab(tmp_path: Path, cli: Any) -> Iterator[JudgeLab]:
    with ChatServer(lambda _: error(599)) as server:
        yield JudgeLab(tmp_path, server, cli)
