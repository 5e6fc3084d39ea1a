"""``trysquare demo``: build the shipped example matrix with real git, validate it, report.

The material lives in the repository's ``examples/`` folder: ``scenario.toml``,
``validator.py`` and ``demo/`` (the project, the agent's changes per run, and
``matrix.toml`` saying which run did what). Wheels ship a copy of it as package
data (``trysquare/_examples``, see ``trysquare_core/hatch_build.py``), so
``pip install trysquare`` then ``trysquare demo`` needs no checkout.
"""

from __future__ import annotations

import py_compile
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from trysquare import _atomic
from trysquare._shown import shown
from trysquare.errors import UsageError

MARKER = ".trysquare-demo"
ETALON_TAG = "etalon-v1"


def find_examples() -> Path:
    """The demo's material: shipped in the package (``trysquare/_examples``, put there when
    the wheel is built from the repository's ``examples/``), else a checkout's ``examples/``."""
    here = Path(__file__).resolve().parent
    candidates = [
        here / "_examples",
        *(p / "examples" for p in here.parents),
        Path.cwd() / "examples",
    ]
    for candidate in candidates:
        if (candidate / "scenario.toml").is_file() and (
            candidate / "demo" / "matrix.toml"
        ).is_file():
            return candidate
    raise UsageError(
        "the demo's example matrix was not found: this trysquare-core was installed without "
        "its package data (reinstall it from a wheel), and no trysquare checkout is above it"
    )


def _git(repo: Path, *args: str) -> None:
    env = {
        "GIT_AUTHOR_NAME": "trysquare demo",
        "GIT_AUTHOR_EMAIL": "demo@trysquare.invalid",
        "GIT_COMMITTER_NAME": "trysquare demo",
        "GIT_COMMITTER_EMAIL": "demo@trysquare.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "PATH": __import__("os").environ.get("PATH", "/usr/bin:/bin"),
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise UsageError(f"git {' '.join(args)} failed in {repo}: {done.stderr.strip()}")


def build_matrix(examples: Path, target: Path, *, material: Path | None = None) -> Path:
    """Build one run folder per ``[[run]]`` of ``matrix.toml`` under ``target/runs``
    (``material``: the folder holding ``matrix.toml``, ``project/``, ``changes/`` and the
    prompts; the Python demo's by default)."""
    demo = examples / "demo" if material is None else material
    matrix = tomllib.loads((demo / "matrix.toml").read_text(encoding="utf-8"))
    if target.exists():
        if not (target / MARKER).exists():
            raise UsageError(
                f"{target} exists and was not made by `trysquare demo`; name another folder"
            )
        shutil.rmtree(target)
    runs = target / "runs"
    runs.mkdir(parents=True)
    (target / MARKER).write_text("made by trysquare demo; rebuilt on every run\n", encoding="utf-8")
    for spec in matrix["run"]:
        _build_run(demo, runs / spec["id"], spec)
    return runs


def _build_run(demo: Path, folder: Path, spec: dict[str, Any]) -> None:
    repo = folder / "repo"
    shutil.copytree(demo / "project", repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "etalon")
    _git(repo, "tag", ETALON_TAG)
    for destination, source in spec.get("write", {}).items():
        shutil.copyfile(demo / source, repo / destination)
    if spec.get("bytecode"):
        # What running the suite leaves behind: real bytecode, untracked and not ignored.
        for source in ("counter.py", "tests/test_counter.py"):
            compiled = (
                repo
                / Path(source).parent
                / "__pycache__"
                / (
                    f"{Path(source).stem}.cpython-{sys.version_info.major}{sys.version_info.minor}.pyc"
                )
            )
            py_compile.compile(str(repo / source), cfile=str(compiled), doraise=True)
    shutil.copyfile(demo / spec.get("prompt", "prompt.txt"), folder / "prompt.txt")
    (folder / "response.md").write_text(spec["response"] + "\n", encoding="utf-8")
    from trysquare.runs import run_toml

    logged = {}
    if "session" in spec:
        _write_session(folder / "session.jsonl", spec, repo)
        logged = {"session": "session.jsonl", "session_format": "pi"}
    _atomic.write_text(
        folder / "run.toml",
        run_toml(
            {
                **logged,
                "id": spec["id"],
                "cell": spec["cell"],
                "repetition": spec["repetition"],
                "repo": "repo",
                "base": ETALON_TAG,
                "prompt": "prompt.txt",
                "model": "demo/scripted-agent",
                "etalon": {"tag": ETALON_TAG},
            }
        ),
    )


def _write_session(path: Path, spec: dict[str, Any], repo: Path) -> None:
    """The agent's log as pi writes it, from ``[tool, argument]`` pairs: ``bash`` runs the
    argument as a command, ``write`` writes the file it names (the clone's version of it)."""
    from trysquare.testing.builders import write_pi_session

    def message(**fields: Any) -> dict[str, Any]:
        return {"type": "message", "message": {**fields, "timestamp": 1}}

    prompt = (path.parent / "prompt.txt").read_text(encoding="utf-8")
    events = [message(role="user", content=[{"type": "text", "text": prompt}])]
    for number, (tool, argument) in enumerate(spec["session"]):
        call = f"call-{number}"
        arguments: dict[str, Any] = {"command": argument}
        if tool == "write":
            written = repo / argument
            text = written.read_text(encoding="utf-8") if written.is_file() else ""
            arguments = {"path": argument, "content": text}
        events.append(
            message(
                role="assistant",
                stopReason="toolUse",
                content=[{"type": "toolCall", "id": call, "name": tool, "arguments": arguments}],
            )
        )
        events.append(
            message(
                role="toolResult",
                toolCallId=call,
                toolName=tool,
                isError=False,
                content=[{"type": "text", "text": "done"}],
            )
        )
    events.append(
        message(
            role="assistant",
            stopReason="stop",
            content=[{"type": "text", "text": spec["response"]}],
        )
    )
    write_pi_session(path, events, cwd=str(repo.absolute()))


def run_demo(target: Path, *, progress: bool = True, node: bool = False) -> int:
    """Build, validate, have the form filled by the demo's reader, and report (``node``: the
    Node example of ``examples/node/``, which has no form)."""
    if node:
        return _run_node_demo(target, progress=progress)
    from trysquare.report import run_report
    from trysquare.runner import ValidateOptions, validate
    from trysquare.runs import discover
    from trysquare.scenario import load_scenario

    examples = find_examples()
    scenario = load_scenario(examples / "scenario.toml")
    target = target.absolute()
    runs = build_matrix(examples, target)
    print(f"built {len(list(runs.iterdir()))} runs with real git under {runs}")
    experiments = discover([target])
    summary = validate(scenario, experiments, ValidateOptions(progress=None if progress else False))
    print(summary.closing_line())
    _fill_the_form(scenario, experiments[0], examples, target)
    print()
    report_code = run_report(scenario, experiments[0], "md")
    _write_html(scenario, experiments[0], target)
    return max(summary.exit_code, report_code)


def _run_node_demo(target: Path, *, progress: bool) -> int:
    from trysquare.report import run_report
    from trysquare.runner import ValidateOptions, validate
    from trysquare.runs import discover
    from trysquare.scenario import load_scenario

    if shutil.which("node") is None:
        raise UsageError("the Node demo needs node on the PATH (e.g. apt-get install nodejs)")
    material = find_examples() / "node"
    scenario = load_scenario(material / "scenario.toml")
    target = target.absolute()
    runs = build_matrix(material, target, material=material)
    print(f"built {len(list(runs.iterdir()))} runs of a Node project with real git under {runs}")
    experiments = discover([target])
    summary = validate(scenario, experiments, ValidateOptions(progress=None if progress else False))
    print(summary.closing_line())
    print()
    report_code = run_report(scenario, experiments[0], "md")
    _write_html(scenario, experiments[0], target)
    return max(summary.exit_code, report_code)


def _write_html(scenario: Any, experiment: Any, target: Path) -> None:
    """End with the page to look at: ``report.html``, when trysquare-view is installed."""
    from trysquare import plugins
    from trysquare.report import run_report

    print()
    if "html" not in plugins.report_formats():
        from trysquare._install import install_hint

        print(f"({install_hint('trysquare-view')} to also get report.html)")
        return
    run_report(scenario, experiment, "html", output=target / "report.html")


def _fill_the_form(scenario: Any, experiment: Any, examples: Path, target: Path) -> None:
    """Export the blind form, answer it as a person would (editing its text), ingest it."""
    try:
        from trysquare_form.export import export_form
        from trysquare_form.ingest import ingest_form
    except ImportError:
        from trysquare._install import install_hint

        hint = install_hint("trysquare-form")
        raise UsageError(f"the demo needs the form mode: {hint}") from None
    answers = {
        spec["id"]: spec["note_clear"]
        for spec in tomllib.loads((examples / "demo" / "matrix.toml").read_text(encoding="utf-8"))[
            "run"
        ]
    }
    exported = export_form(scenario, experiment, target / "form.toml", seed=2026)
    text = exported.form.read_text(encoding="utf-8")
    for entry in exported.runs:
        # The reader sees only the opaque table and its pieces; the demo knows the answer by run.
        table = f"[run.{entry.opaque}]"
        head, _, tail = text.partition(table)
        answer = "true" if answers[entry.run.id] else "false"
        tail = tail.replace("# note_clear = true|false", f"note_clear = {answer}", 1)
        text = head + table + tail
    exported.form.write_text(text, encoding="utf-8")
    ingested = ingest_form(scenario, experiment, exported.form, by="demo reader")
    print(shown(f"form {exported.form.name}: {ingested.summary}"))
