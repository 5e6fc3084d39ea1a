"""Only results trysquare wrote count: a planted, edited or copied result is never reused nor
reported, and is named.

The run folder is the agent's. Reuse compares a validator digest and a context digest the
agent can compute (it can run trysquare itself), so a result is trusted only when its
signature — an HMAC with the key in trysquare's own cache, outside every run — verifies here
for this run and this validator. Each test builds the hostile run folder at test time.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script
from tests.judge.conftest import lab  # noqa: F401 - the judge laboratory

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._signing", "trysquare.results")


# The measured fact: did the agent deliver feature.py? (The agent of run 'agent' did not.)
SCORE = """
import json, sys
context = json.load(open(sys.argv[1]))
touched = context["touched"]
print(json.dumps({"metrics": {"delivered": "feature.py" in touched, "changed": len(touched)}}))
"""

SCENARIO = """
[task]

[[validation]]
name = "score"
mode = "script"
command = "score.py"
metrics = ["delivered", "changed"]
"""


def two_runs(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """A scenario and an experiment of two runs: 'good' delivered, 'agent' did not."""
    folder = tmp_path / "scenario"
    write_script(folder, "score.py", SCORE)
    scenario = write_scenario(folder, SCENARIO)
    root = tmp_path / "exp"
    base = {"counter.py": "def count(text):\n    return len(text.split(' '))\n"}
    good = build_run(
        root / "runs" / "good", base=base, changes={"feature.py": "x = 1\n"}, cell="c", repetition=1
    ).path
    agent = build_run(
        root / "runs" / "agent", base=base, changes={"notes.txt": "todo\n"}, cell="c", repetition=2
    ).path
    return scenario, root, good, agent


def result_file(run_dir: Path) -> Path:
    return run_dir / "validation" / "score.json"


def result(run_dir: Path) -> dict[str, Any]:
    return json.loads(result_file(run_dir).read_text(encoding="utf-8"))


def forge(run_dir: Path, **metrics: Any) -> None:
    """What the agent does to a result on disk: better numbers, everything else kept."""
    document = result(run_dir)
    document["metrics"].update(metrics)
    result_file(run_dir).write_text(json.dumps(document, indent=2), encoding="utf-8")


def row(root: Path, run_id: str) -> dict[str, Any]:
    rows = json.loads((root / "measures.json").read_text(encoding="utf-8"))
    return next(r for r in rows if r["id"] == run_id)


def test_agent_runs_trysquare_on_its_own_folder_edits_metrics_and_deletes_its_records(
    tmp_path: Path, cli, cli_process
) -> None:
    scenario, root, _, agent = two_runs(tmp_path)
    # During its session the agent runs trysquare on its own run, in a container laid out
    # as the experimenter's machine (same paths: every digest will match what the real
    # validate computes) but with its own trysquare key; then it improves the numbers and
    # removes trysquare's records.
    key = Path(os.environ["XDG_CACHE_HOME"]) / "trysquare" / "suite.key"
    ours = key.read_bytes()
    key.write_bytes(b"0123456789abcdef" * 4)  # the container's key, not the machine's
    try:
        own = cli_process("validate", scenario, agent, "--no-progress")
    finally:
        key.write_bytes(ours)
    assert own.returncode == 0, own.stdout + own.stderr
    assert result(agent)["metrics"] == {"delivered": False, "changed": 1}
    forge(agent, delivered=True)
    shutil.rmtree(agent / ".trysquare")

    done = cli("validate", scenario, root, "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unchanged (reused)" not in done.stdout  # nothing the agent left counted as trysquare's
    assert "run 'agent'" in done.stdout and "validator 'score' is not signed here" in done.stdout
    assert result(agent)["metrics"] == {"delivered": False, "changed": 1}
    assert row(root, "agent")["metrics"]["delivered"] is False


def test_a_result_edited_between_two_validates_is_named_and_not_reused(tmp_path: Path, cli) -> None:
    scenario, root, _, agent = two_runs(tmp_path)
    first = cli("validate", scenario, root, "--no-progress")
    assert first.returncode == 0, first.stderr
    # A process the agent left behind edits its result between two validates.
    forge(agent, delivered=True)

    # Read before anything recomputes it: the report does not show the edited numbers.
    report = cli("report", scenario, root, "--format", "json")
    assert report.returncode == 1, report.stderr
    agent_row = row(root, "agent")
    assert agent_row["state"] == "invalid" and "delivered" not in agent_row["metrics"]
    [error] = agent_row["errors"]
    assert error["validator"] == "score"
    assert "run 'agent'" in error["error"] and "not signed here" in error["error"]
    assert "changed after trysquare wrote it" in error["error"]

    again = cli("validate", scenario, root, "--no-progress")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "run 'agent'" in again.stdout and "not signed here" in again.stdout
    assert "1 result unchanged (reused)" in again.stdout  # the good run's, not the agent's
    assert result(agent)["metrics"] == {"delivered": False, "changed": 1}
    assert row(root, "agent")["state"] == "valid" and row(root, "agent")["errors"] == []


def test_a_result_copied_from_another_run_is_not_reported(tmp_path: Path, cli) -> None:
    """The good run's genuine, signed result put in the agent's run: signed for another run."""
    scenario, root, good, agent = two_runs(tmp_path)
    assert cli("validate", scenario, root, "--no-progress").returncode == 0
    shutil.copyfile(result_file(good), result_file(agent))

    cli("report", scenario, root, "--format", "json")
    agent_row = row(root, "agent")
    assert agent_row["state"] == "invalid" and agent_row["metrics"] == {}
    assert "written for another run" in agent_row["errors"][0]["error"]
    again = cli("validate", scenario, root, "--no-progress")
    assert "run 'agent'" in again.stdout and "not signed here" in again.stdout
    assert row(root, "agent")["metrics"] == {"delivered": False, "changed": 1}


def test_a_planted_history_line_is_never_shown_as_a_result(tmp_path: Path, cli) -> None:
    """A line appended to the history by the agent: the viewer names it, never its numbers."""
    from trysquare_view.panel import run_panel

    scenario, root, _, agent = two_runs(tmp_path)
    assert cli("validate", scenario, root, "--no-progress").returncode == 0
    assert cli("validate", scenario, root, "--no-progress", "--force").returncode == 0
    history = agent / "validation" / "score.history.jsonl"
    [genuine] = history.read_text(encoding="utf-8").splitlines()
    planted = {**json.loads(genuine), "metrics": {"delivered": True, "changed": 4242}}
    with history.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(planted) + "\n")

    panel = run_panel(0, row(root, "agent"), agent)
    assert "4242" not in panel
    assert "a result not signed here" in panel
    genuine_line = "valid: {&quot;changed&quot;: 1, &quot;delivered&quot;: false}"
    assert genuine_line in panel


def test_a_result_signed_with_another_key_before_the_first_validate(tmp_path: Path, cli) -> None:
    """The agent runs its own trysquare (its own cache, so its own key) on a better state of
    its clone — feature.py written for the occasion — then takes the file away again: a
    well-formed, genuinely signed result, with a key that is not this machine's."""
    from trysquare_view.panel import run_panel

    scenario, root, _, agent = two_runs(tmp_path)
    (agent / "repo" / "feature.py").write_text("x = 1\n", encoding="utf-8")
    elsewhere = {"XDG_CACHE_HOME": str(tmp_path / "agent")}
    made = cli("validate", scenario, agent, "--no-progress", env=elsewhere)
    assert made.returncode == 0, made.stdout + made.stderr
    assert result(agent)["metrics"] == {"delivered": True, "changed": 2}
    (agent / "repo" / "feature.py").unlink()
    shutil.rmtree(agent / ".trysquare")

    cli("report", scenario, root)
    agent_row = row(root, "agent")
    assert agent_row["state"] == "invalid" and agent_row["metrics"] == {}
    assert "signed with another key" in agent_row["errors"][0]["error"]
    assert "delivered&quot;: true" not in run_panel(0, agent_row, agent)
    done = cli("validate", scenario, root, "--no-progress")
    assert "run 'agent'" in done.stdout and "signed with another key" in done.stdout
    assert row(root, "agent")["metrics"] == {"delivered": False, "changed": 1}


def test_an_edited_judge_verdict_is_not_reused_nor_bought_again_unasked(lab) -> None:
    """A paid verdict edited in place: never reused, never counted, and not paid for again
    until --rejudge asks (the run is invalid meanwhile, naming why)."""
    from tests.judge.chatserver import script, verdict

    lab.run()
    lab.respond(
        script(
            [
                verdict({"note_usable": False, "cites_paths": False}),
                verdict({"note_usable": False, "cites_paths": True}),
            ]
        )
    )
    assert lab.validate().returncode == 0
    path = lab.exp / "runs" / "r1" / "validation" / "judge.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["metrics"]["note_usable"] = True
    path.write_text(json.dumps(document), encoding="utf-8")

    kept = lab.validate()
    assert kept.returncode == 1, kept.stdout + kept.stderr
    assert len(lab.server.received) == 1  # nothing bought again
    assert "run 'r1'" in kept.stdout and "not signed here" in kept.stdout
    assert "--rejudge" in kept.stdout
    assert "unchanged (reused)" not in kept.stdout
    r1 = row(lab.exp, "r1")
    assert r1["state"] == "invalid" and "note_usable" not in r1["metrics"]

    asked = lab.validate("--rejudge")
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert len(lab.server.received) == 2
    assert row(lab.exp, "r1")["metrics"] == {"note_usable": False, "cites_paths": True}


LEAKER = """
import json, os, sys
key = open(os.path.join(os.environ["XDG_CACHE_HOME"], "trysquare", "suite.key")).read()
sys.stderr.write(f"the key is {key}\\n")
metrics = {"delivered": True, "changed": 0}
print(json.dumps({"metrics": metrics, "reasons": {"delivered": f"key={key}"}}))
"""


def test_code_that_read_the_signing_key_never_gets_it_into_a_record(tmp_path: Path, cli) -> None:
    """Where the key is readable to what a validation runs (no jail), what it prints of the
    key is replaced by *** in the result, its history and the stderr file."""
    scenario, root, _, agent = two_runs(tmp_path)
    write_script(scenario.parent, "score.py", LEAKER)
    done = cli("validate", scenario, root, "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    key = (Path(os.environ["XDG_CACHE_HOME"]) / "trysquare" / "suite.key").read_text()
    assert result(agent)["reasons"]["delivered"] == "key=***"
    for path in sorted(root.rglob("*")):
        if path.is_file() and "repo" not in path.relative_to(root).parts:
            assert key not in path.read_text(encoding="utf-8", errors="replace"), path


def test_an_experiment_copied_from_another_machine_is_not_signed_here_until_revalidated_or_trusted(
    tmp_path: Path, cli, cli_process
) -> None:
    scenario, root, _, _ = two_runs(tmp_path)
    # Validated on another machine laid out as this one (same paths), with its own key.
    key = Path(os.environ["XDG_CACHE_HOME"]) / "trysquare" / "suite.key"
    ours = key.read_bytes()
    key.write_bytes(b"fedcba9876543210" * 4)
    try:
        assert cli_process("validate", scenario, root, "--no-progress").returncode == 0
    finally:
        key.write_bytes(ours)

    # Here, another key: every result is named and none is a measurement.
    shown = cli("report", scenario, root)
    assert shown.returncode == 1
    for run_id in ("good", "agent"):
        found = row(root, run_id)
        assert found["state"] == "invalid" and found["metrics"] == {}
        assert "signed with another key" in found["errors"][0]["error"]

    # The user vouches for them (they came from their own machine): signed here, named.
    trusted = cli("trust", scenario, root, "--run", "good")
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert "run 'good'" in trusted.stdout and "signed now" in trusted.stdout
    assert "run 'agent'" not in trusted.stdout
    assert "1 result signed here on your word" in trusted.stdout
    cli("report", scenario, root)
    good_row = row(root, "good")
    assert good_row["state"] == "valid" and good_row["metrics"]["delivered"] is True

    # The other is computed again by validate, here; the trusted one is reused.
    again = cli("validate", scenario, root, "--no-progress")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "run 'agent'" in again.stdout and "1 result unchanged (reused)" in again.stdout
    assert row(root, "agent")["state"] == "valid"


def test_a_result_quoting_the_signing_key_is_written_with_the_key_scrubbed(
    tmp_path: Path,
) -> None:
    """A validator that read trysquare's key and printed it (in a reason, a metric's name, a
    note, at any depth) gets a result signed with ``***`` in its place: the key's text is
    looked for in the result's canonical text, so no string holding it is missed."""
    from trysquare import _signing, results
    from trysquare.runs import load_run

    built = build_run(tmp_path / "exp" / "runs" / "r1", base={"a.py": "a = 1\n"})
    run = load_run(built.path / "run.toml")
    key = _signing.secret().decode("ascii")
    document = {
        "metrics": {f"m{key}": 1},
        "reasons": {"m": f"the key is {key}!"},
        "state": "valid",
        "error": None,
        "notes": [[f"deep {key}"]],
    }
    signed = results.sign_result(run, "score", document)
    assert key not in json.dumps(signed)
    assert signed["reasons"]["m"] == "the key is ***!" and "m***" in signed["metrics"]
    assert signed["notes"] == [["deep ***"]]
    assert results.signature_problem(run, "score", signed) is None
    clean = {"metrics": {"m": 1}, "reasons": {"m": "fine"}, "state": "valid", "error": None}
    signed = results.sign_result(run, "score", clean)
    assert {k: v for k, v in signed.items() if k != "signature"} == clean
    assert results.signature_problem(run, "score", signed) is None
