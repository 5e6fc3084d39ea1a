"""Contexts for the assay's tests: hand-written ones, and ones built from real runs."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
PYTHON = sys.executable


@pytest.fixture
def write_context(tmp_path: Path) -> Callable[..., Path]:
    """Write a context by hand: every core context key with harmless values, overridden by ``keys``.

    A key given as ``...`` (Ellipsis) is left out, the way a judge's context lacks
    ``cell`` and ``given``.
    """
    counter = iter(range(1000))

    def write(**keys: Any) -> Path:
        folder = tmp_path / f"ctx{next(counter)}"
        folder.mkdir()
        repo = folder / "repo"
        repo.mkdir()
        (folder / "prompt.txt").write_text("Fix the counter.", encoding="utf-8")
        (folder / "diff.patch").write_text("--- a/x\n+++ b/x\n", encoding="utf-8")
        context: dict[str, Any] = {
            "repo": str(repo),
            "etalon": {"tag": "etalon-v1", "checkout": str(folder / "etalon")},
            "prompt": str(folder / "prompt.txt"),
            "session": None,
            "trace": None,
            "cell": "rule / high",
            "repetition": 3,
            "prepare": [],
            "artefacts": [],
            "touched": [],
            "files": [],
            "given": [],
            "declared": [],
            "base": "0" * 40,
            "response": str(folder / "response.md"),
            "diff": str(folder / "diff.patch"),
        }
        for key, value in keys.items():
            if value is ...:
                context.pop(key, None)
            else:
                context[key] = value
        path = folder / "context.json"
        path.write_text(json.dumps(context), encoding="utf-8")
        return path

    return write


def build_context(
    tmp_path: Path,
    *,
    name: str = "run",
    change: bool = True,
    extra: dict[str, str] | None = None,
    ran_suite: bool = True,
    test_command: str | None = f"{PYTHON} -m unittest",
    prepare: tuple[str, ...] = (),
    artefacts: tuple[str, ...] = ("__pycache__",),
    metrics: tuple[str, ...] = ("delivered", "in_scope", "tests"),
) -> Path:
    """A real git run of the tiny fixture and the context the core builds for it.

    ``change`` applies the agent's fix, ``extra`` writes more files into the tree,
    ``ran_suite`` runs the suite in the clone as an agent checking itself would;
    ``test_command=None`` declares no suite (the key is then absent).
    """
    from trysquare.testing.builders import run_from_folders

    run = run_from_folders(
        tmp_path / name / "runs" / "r1",
        TINY / "base",
        TINY / "change" if change else None,
        commands=[[PYTHON, "-m", "unittest", "-q"]] if ran_suite else [],
    )
    if extra:
        run.repo.write_files(extra)
    scenario = tmp_path / name / "scenario.toml"
    validator = tmp_path / name / "score.py"
    validator.write_text("#!/bin/sh\n", encoding="utf-8")
    validator.chmod(0o755)
    # JSON strings and lists are valid TOML: no quoting to get wrong by hand.
    task = f"prepare = {json.dumps(list(prepare))}\nartefacts = {json.dumps(list(artefacts))}\n"
    if test_command is not None:
        task += f"test_command = {json.dumps(test_command)}\n"
    metric_list = ", ".join(json.dumps(m) for m in metrics)
    scenario.write_text(
        f"[task]\n{task}\n[[validation]]\nmode = 'script'\ncommand = 'score.py'\n"
        f"metrics = [{metric_list}]\n",
        encoding="utf-8",
    )
    return context_for(scenario, run.path)


def context_for(scenario_path: Path, run_dir: Path) -> Path:
    """The context the harness would hand the scenario's first validator, written to a file."""
    from trysquare import context as contexts
    from trysquare.runs import load_run
    from trysquare.scenario import load_scenario

    scenario = load_scenario(scenario_path)
    run = load_run(run_dir / "run.toml")
    validation = scenario.validations[0]
    facts = contexts.gather_facts(run)
    context = contexts.build_context(scenario, run, validation, facts)
    path = run_dir / "context.json"
    path.write_text(json.dumps(context), encoding="utf-8")
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``tiny(**options)`` -> the context file of a fresh tiny run (see ``build_context``)."""
    counter = iter(range(1000))
    yield lambda **options: build_context(tmp_path, name=f"t{next(counter)}", **options)
