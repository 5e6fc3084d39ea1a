"""The public plugin API: what plugins stand on, and the rule that they stand on nothing else."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from trysquare import api
from trysquare.errors import ScenarioError

ROOT = Path(__file__).resolve().parents[2]


def private_imports(source: str) -> list[str]:
    """Every ``trysquare._*`` module a Python source imports (``import``, ``from ... import``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("trysquare._")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("trysquare._"):
                found.append(node.module)
            elif node.module == "trysquare":
                found += [f"trysquare.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_the_private_import_finder_sees_every_spelling() -> None:
    source = (
        "import trysquare._atomic\nfrom trysquare._process import run_process\n"
        "from trysquare import _convert, api\ndef f():\n    from trysquare import _env\n"
        "from trysquare.api import digest\n"
    )
    assert private_imports(source) == [
        "trysquare._atomic",
        "trysquare._process",
        "trysquare._convert",
        "trysquare._env",
    ]


def test_no_distribution_but_the_core_imports_a_private_module() -> None:
    sources = [
        path
        for folder in [*ROOT.glob("trysquare_*/src"), *ROOT.glob("plugins/*/src")]
        if folder.parent.name != "trysquare_core"
        for path in folder.rglob("*.py")
    ]
    assert len(sources) > 20  # the walk found the distributions
    offenders = {
        str(path.relative_to(ROOT)): private_imports(path.read_text(encoding="utf-8"))
        for path in sources
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_run_steps_stops_at_a_failed_prepare_with_its_tail(tmp_path: Path) -> None:
    done = api.run_steps(
        [
            ("prepare", ["sh", "-c", "echo fetching; echo broke >&2; exit 3"]),
            ("the command", ["sh", "-c", "touch ran"]),
        ],
        cwd=tmp_path,
        timeout=30,
        writable=[tmp_path],
        consequence="so no test ran",
    )
    assert done.problem is not None
    assert done.problem.startswith(
        "prepare `sh -c echo fetching; echo broke >&2; exit 3` failed (exit 3), so no test ran:"
    )
    assert done.problem.endswith("broke") and "\nfetching\n" in done.problem
    assert not (tmp_path / "ran").exists()
    assert b"[exit 3]" in done.transcript


def test_run_steps_returns_a_failing_command_for_the_caller_to_read(tmp_path: Path) -> None:
    done = api.run_steps(
        [("prepare", ["true"]), ("the command", ["sh", "-c", "echo 2 failed; exit 1"])],
        cwd=tmp_path,
        timeout=30,
    )
    assert done.problem is None and done.last is not None
    assert done.last.returncode == 1 and done.last.stdout == b"2 failed\n"


def test_run_steps_shares_one_deadline(tmp_path: Path) -> None:
    done = api.run_steps(
        [("prepare", ["sleep", "0.4"]), ("the command", ["sleep", "5"])], cwd=tmp_path, timeout=0.8
    )
    assert done.problem == "the command `sleep 5` did not finish within the timeout of 0.8 s"
    assert done.last is not None and done.last.timed_out


def test_write_with_history_keeps_every_replaced_document(tmp_path: Path) -> None:
    path, history = tmp_path / "v" / "t.json", tmp_path / "v" / "t.history.jsonl"
    for number in (1, 2, 3):
        api.write_with_history(path, {"n": number}, history, root=tmp_path)
    assert json.loads(path.read_text()) == {"n": 3}
    assert [json.loads(line) for line in history.read_text().splitlines()] == [{"n": 1}, {"n": 2}]


def test_write_with_history_refuses_a_planted_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "t.json").symlink_to(outside)
    with pytest.raises(OSError):
        api.write_with_history(
            tmp_path / "run" / "t.json",
            {"n": 1},
            tmp_path / "run" / "h.jsonl",
            root=tmp_path / "run",
        )
    assert outside.read_text() == "{}"


def test_digest_is_canonical() -> None:
    assert api.digest({"b": [1, 2], "a": "x"}) == api.digest({"a": "x", "b": [1, 2]})
    assert api.digest({"a": 1}) != api.digest({"a": 2})
    assert api.digest(Path("/p")) == api.digest("/p")


def test_structure_names_the_file_and_key(tmp_path: Path) -> None:
    import attrs

    @attrs.frozen
    class Table:
        metrics: tuple[str, ...]

    assert api.structure({"metrics": ["a"]}, Table, file=tmp_path / "x.toml").metrics == ("a",)
    with pytest.raises(ScenarioError) as refused:
        api.structure({"metircs": ["a"]}, Table, file=tmp_path / "x.toml", path="[[validation]][1]")
    assert (
        "x.toml: [[validation]][1].metircs: unknown key (did you mean 'metrics'?)"
        in refused.value.message
    )


def test_commands_join_the_parser_only_when_the_hook_returns() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="trysquare")
    sub = parser.add_subparsers(dest="command")
    commands = api.Commands()
    hello = commands.add("hello", lambda args: 7, help="say hello")
    hello.add_argument("--name", default="you")
    with pytest.raises(SystemExit):
        parser.parse_args(["hello"])  # not attached yet
    commands.attach_to(sub)
    args = parser.parse_args(["hello", "--name", "ada"])
    assert args.name == "ada" and args.handler(args) == 7
