"""The GitHub Action (``action.yml``) run locally, step by step, as the runner would.

Each ``run:`` step goes to ``bash --noprofile --norc -eo pipefail`` (what a composite
action's ``shell: bash`` is) with a fake ``GITHUB_*`` environment in a temporary folder;
``if:`` conditions and ``${{ }}`` expressions are evaluated by a small reader that knows
only the forms the action uses (another form fails the test, so the action cannot drift
into something this test does not check). ``pip`` is a fake that records its arguments;
``trysquare`` is the one under test.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.core.test_ci_outputs import build

ROOT = Path(__file__).resolve().parents[2]
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class Runner:
    """The little of GitHub's runner a composite action needs."""

    def __init__(self, action: dict[str, Any], inputs: dict[str, str], env: dict[str, str]) -> None:
        declared = action["inputs"].items()
        self.inputs = {
            name: inputs.get(name, str(spec.get("default", ""))) for name, spec in declared
        }
        for name, spec in action["inputs"].items():
            assert not spec.get("required") or name in inputs, f"required input {name} not given"
        self.action, self.env = action, env
        self.outputs: dict[str, dict[str, str]] = {}
        self.ran: list[str] = []
        self.logs: dict[str, str] = {}
        self.failed = False

    def value(self, expression: str) -> str:
        if match := re.fullmatch(r"inputs\.([\w-]+)", expression):
            return self.inputs[match.group(1)]
        if match := re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expression):
            return self.outputs.get(match.group(1), {}).get(match.group(2), "")
        if match := re.fullmatch(r"'([^']*)'", expression):
            return match.group(1)
        raise AssertionError(f"an expression this test cannot read: {expression}")

    def condition(self, text: str | None) -> bool:
        if text is None:
            return not self.failed  # success(), the default
        text = EXPRESSION.sub(lambda m: m.group(1), str(text))
        result, always = True, False
        for part in text.split("&&"):
            part = part.strip()
            if part == "always()":
                always = True
            elif match := re.fullmatch(r"(\S+)\s*(==|!=)\s*(\S+)", part):
                left, operator, right = match.groups()
                equal = self.value(left) == self.value(right)
                result = result and (equal if operator == "==" else not equal)
            else:
                raise AssertionError(f"a condition this test cannot read: {part}")
        return result and (always or not self.failed)

    def expand(self, text: str) -> str:
        return EXPRESSION.sub(lambda m: self.value(m.group(1)), text)

    def run(self, cwd: Path) -> None:
        for step in self.action["runs"]["steps"]:
            name = step["name"]
            if not self.condition(step.get("if")):
                continue
            if "uses" in step:
                assert step["uses"].startswith("actions/setup-python@"), step["uses"]
                self.ran.append(name)
                continue
            assert step["shell"] == "bash"
            # Inputs reach the scripts through env only: no ${{ }} inside a script.
            assert "${{" not in step["run"], name
            output = cwd / f"output-{len(self.ran)}"
            output.touch()
            env = {**self.env, "GITHUB_OUTPUT": str(output)}
            env.update({key: self.expand(str(value)) for key, value in step.get("env", {}).items()})
            script = cwd / f"step-{len(self.ran)}.sh"
            script.write_text(step["run"], encoding="utf-8")
            done = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            self.ran.append(name)
            self.logs[name] = done.stdout + done.stderr
            if "id" in step:
                lines = output.read_text(encoding="utf-8").splitlines()
                self.outputs[step["id"]] = dict(line.split("=", 1) for line in lines if "=" in line)
            if done.returncode != 0:
                self.failed = True
                self.logs[name] += f"\n[exit {done.returncode}]"


def test_the_action_validates_annotates_and_writes_the_summary(make_run, tmp_path: Path) -> None:
    scenario, experiment = build(make_run, tmp_path)
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"

    fakes = tmp_path / "fakes"
    fakes.mkdir()
    pip_log = tmp_path / "pip-args"
    fake_python = fakes / "python"
    fake_python.write_text(f'#!/bin/sh\necho "$@" > {pip_log}\n', encoding="utf-8")
    fake_python.chmod(fake_python.stat().st_mode | stat.S_IEXEC)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    summary = tmp_path / "step-summary.md"
    summary.touch()
    env = {
        "PATH": os.pathsep.join([str(fakes), str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_ENV": str(tmp_path / "github-env"),
        "GITHUB_PATH": str(tmp_path / "github-path"),
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
    }
    runner = Runner(
        action,
        {
            "scenario": str(scenario),
            "paths": f"{experiment}",
            "extras": "anthropic, dask",
            "version": "0.1.0",
            "python-version": "",
            "junit-xml": "out/junit.xml",
            "args": "--jobs 2",
        },
        env,
    )
    (workspace / "out").mkdir()
    runner.run(workspace)

    assert pip_log.read_text().split() == [
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "trysquare[anthropic,dask]==0.1.0",
    ]
    assert "Set up Python" not in runner.ran  # python-version "" uses the one on PATH
    assert runner.outputs["validate"] == {"exit-code": "1"}  # one invalid result
    log = runner.logs["Validate"]
    annotations = [line for line in log.splitlines() if line.startswith(("::error ", "::warning "))]
    assert len(annotations) == 2, log
    assert annotations[0].startswith("::error title=trysquare script%3A failed (r1)::")
    assert "unjudged: ok" in annotations[1]
    assert (workspace / "out" / "junit.xml").read_text(encoding="utf-8").startswith("<?xml")

    text = summary.read_text(encoding="utf-8")
    assert text.startswith("#"), text[:200]  # the Markdown report, headed
    assert "alpha" in text and "invalid" in text.lower()
    assert runner.ran[-1] == "Fail when validate did" and runner.failed
    assert runner.logs["Fail when validate did"].endswith("[exit 1]")


def test_the_action_takes_no_input_into_a_script_unquoted() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    for step in action["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), step["name"]
