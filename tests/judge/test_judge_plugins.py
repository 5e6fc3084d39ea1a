"""Providers are plugins: a provider type from an installed distribution, and the hook's docs."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

from tests.judge.conftest import JudgeLab
from trysquare_judge import hookspecs

DOCS = Path(__file__).resolve().parents[2] / "docs" / "judge.md"

# A provider with no server: it answers every conversation with the same verdict,
# and records what it was handed so the test can see the neutral request.
CANNED = """
import json
from trysquare import hookimpl
from trysquare_judge.providers import ChatReply, ToolCall

class Connection:
    def __init__(self, config):
        self.config = config

    def complete(self, request):
        values = {m: {"reason": "canned", "value": True} for m in request.tool.parameters["required"]}
        exchange = {"request": {"system": request.system[:20], "messages": len(request.messages)},
                    "config": self.config.name}
        return ChatReply(tool_calls=(ToolCall("c1", request.tool.name, json.dumps(values)),),
                         exchanges=(exchange,))

class CannedProvider:
    name = "canned"
    def defaults(self):
        return {"max_concurrency": 2}
    def connect(self, config):
        return Connection(config)

@hookimpl
def trysquare_register_judge_providers(register):
    register(CannedProvider())
"""


def test_the_judge_lists_its_provider_types(lab: JudgeLab) -> None:
    done = lab.cli("plugins", "--json")
    listing = {entry["name"]: entry for entry in json.loads(done.stdout)}
    assert listing["trysquare-judge"]["providers"] == ["openai"]
    assert "trysquare_register_judge_providers" in listing["trysquare-judge"]["hooks"]


def test_a_provider_type_from_a_plugin_is_used_bare_and_through_a_section(
    lab: JudgeLab, site
) -> None:
    site("trysquare-canned", "trysquare_canned", CANNED)
    listing = {e["name"]: e for e in json.loads(lab.cli("plugins", "--json").stdout)}
    assert listing["trysquare-canned"]["providers"] == ["canned"]

    lab.run()
    lab.write_scenario(
        text=lab.scenario.read_text().replace('provider = "local"', 'provider = "canned"')
    )
    done = lab.validate()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lab.result()["metrics"] == {"note_usable": True, "cites_paths": True}
    assert lab.transcript()["exchanges"] == [
        {"request": {"system": "You are a judge. You", "messages": 1}, "config": "canned"}
    ]

    lab.write_config(type="canned", base_url=None, api_key_env=None)
    lab.write_scenario()  # provider = "local", now a section of type "canned"
    assert lab.validate().returncode == 0
    assert lab.transcript()["exchanges"][0]["config"] == "local"


def test_each_judge_hookspec_has_a_section_in_the_docs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    specs = [
        name
        for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("trysquare_")
    ]
    assert specs
    for name in specs:
        assert re.search(rf"^### `{name}\(", text, re.MULTILINE), (
            f"docs/judge.md has no section for {name}"
        )
