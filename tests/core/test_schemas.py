"""``trysquare schema NAME``: the JSON Schema each ``--format json`` output follows, checked
against real outputs (an invalid run, an unjudged one, a hostile id; the demo's report)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from trysquare.ci import SCHEMA_VERSION, SCHEMAS

from tests.core.test_ci_outputs import build


def schema(cli: Any, name: str) -> dict[str, Any]:
    done = cli("schema", name)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(document)
    properties = document["items" if name == "plugins" else "properties"]
    if name == "plugins":
        properties = properties["properties"]
    assert properties["schema_version"] == {"const": SCHEMA_VERSION}
    return document


def conforms(document: Any, against: dict[str, Any]) -> None:
    errors = sorted(jsonschema.Draft202012Validator(against).iter_errors(document), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def test_every_schema_is_a_valid_json_schema(cli) -> None:
    for name in SCHEMAS:
        schema(cli, name)


def test_validate_and_check_outputs_follow_their_schemas(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    validated = cli("validate", scenario, experiment, "--format", "json", "--jobs", "2")
    assert validated.returncode == 1, validated.stderr
    document = json.loads(validated.stdout)
    assert {r["status"] for r in document["records"]} == {"passed", "failed", "unjudged"}
    conforms(document, schema(cli, "validate"))
    checked = cli("check", scenario, experiment, "--format", "json")
    conforms(json.loads(checked.stdout), schema(cli, "check"))
    alone = cli("check", scenario, "--format", "json")  # runs: null
    conforms(json.loads(alone.stdout), schema(cli, "check"))
    # A schema that says something: a record without its status is refused.
    del document["records"][0]["status"]
    with pytest.raises(AssertionError, match="status"):
        conforms(document, schema(cli, "validate"))


def test_the_report_follows_its_schema(cli, make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    cli("validate", scenario, experiment, "--jobs", "2")
    done = cli("report", scenario, experiment, "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    conforms(json.loads(done.stdout), schema(cli, "report"))


def test_an_unknown_schema_name_is_a_usage_error(cli) -> None:
    done = cli("schema", "plugins-and-more")
    assert done.returncode == 2 and "trysquare schema: argument COMMAND" in done.stderr


def test_plugins_json_follows_its_schema_and_is_complete(cli) -> None:
    done = cli("plugins", "--json")
    listing = json.loads(done.stdout)
    conforms(listing, schema(cli, "plugins"))
    view = next(entry for entry in listing if entry["name"] == "trysquare-view")
    assert view["report_formats"] == ["html"]
