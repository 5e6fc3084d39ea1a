"""Attacks on where trysquare writes: names that are paths, and symlinks planted in a run folder.

Each test builds the hostile run folder itself, validates a matrix holding it and
a good run, and checks that nothing was written or read through the agent's
symlink, that the hostile run is invalid with the path named, and that the good
run was validated.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from trysquare import _atomic, scenario
from trysquare.errors import ScenarioError
from trysquare.runner import Summary, ValidateOptions, validate
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._atomic", "trysquare.scenario")


SCORE = """\
import json, sys
sys.stderr.write("scored\\n")
print(json.dumps({"metrics": {"scored": True}, "reasons": {"scored": "fine"}}))
"""
VICTIM_TEXT = "root:x:0:0:the victim's own content\n"


def scenario_file(folder: Path, name: str = "score") -> Path:
    write_script(folder, "score.py", SCORE)
    return write_scenario(
        folder,
        f"""
        [[validation]]
        name = "{name}"
        mode = "script"
        command = "score.py"
        metrics = ["scored"]
    """,
    )


def two_runs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An experiment with a good run and one the test makes hostile."""
    exp = tmp_path / "exp"
    good = build_run(
        exp / "runs" / "good",
        base={"a.py": "a = 1\n"},
        changes={"a.py": "a = 2\n"},
        response="ok\n",
    )
    evil = build_run(
        exp / "runs" / "evil",
        base={"a.py": "a = 1\n"},
        changes={"a.py": "a = 3\n"},
        response="ok\n",
        repetition=2,
    )
    return exp, good.path, evil.path


def run_validate(
    tmp_path: Path, exp: Path, *, force: bool = False
) -> tuple[Summary, str, list[dict]]:
    scenario = load_scenario(scenario_file(tmp_path / "s"))
    out = io.StringIO()
    summary = validate(
        scenario, discover([exp]), ValidateOptions(progress=False, jobs=2, force=force), out=out
    )
    rows = json.loads((exp / "measures.json").read_text(encoding="utf-8"))
    return summary, out.getvalue(), rows


def row(rows: list[dict], run_id: str) -> dict:
    return next(r for r in rows if r["id"] == run_id)


def victim_file(tmp_path: Path) -> Path:
    victim = tmp_path / "victim" / "passwd"
    victim.parent.mkdir(parents=True, exist_ok=True)
    victim.write_text(VICTIM_TEXT, encoding="utf-8")
    return victim


def assert_good_run_validated(rows: list[dict]) -> None:
    good = row(rows, "good")
    assert good["state"] == "valid" and good["metrics"] == {"scored": True}


def errors_of(summary: Summary, rows: list[dict], run_id: str) -> str:
    texts = [e["error"] for e in row(rows, run_id)["errors"]]
    texts += [e.message for e in summary.skipped_runs]
    return "\n".join(texts)


@pytest.mark.parametrize("name", ["/tmp/x", "../repo/.git/hooks/h", ".hidden", "a/b"])
def test_validator_name_that_is_a_path_is_refused_at_load(tmp_path: Path, name: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        load_scenario(scenario_file(tmp_path / "s", name=name))
    message = refused.value.message
    assert "scenario.toml: [[validation]][1].name" in message and repr(name) in message
    assert refused.value.exit_code == 2


# What a validator's and a metric's name may be, as patterns; the scenario checks both with
# string methods (no pattern compiled at each start), which must accept exactly these.
VALIDATOR_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*\Z")
METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
NAME_LIKE = st.text(alphabet=st.sampled_from("aZ09_-./\\ \n\x00\u00e9\u0661\u2028\ufb01~"))


@given(st.one_of(NAME_LIKE, st.text()))
@example("")
@example(".")
@example("a\n")
@example("..")
@example("-a.b_c")
@example("1abc")
def test_validator_and_metric_names_are_checked_as_their_patterns_say(name: str) -> None:
    assert scenario._is_validator_name(name) == bool(VALIDATOR_NAME.match(name))
    assert scenario._is_metric_name(name) == bool(METRIC_NAME.match(name))


def test_validator_name_that_is_a_path_never_writes_outside_the_run(cli, tmp_path: Path) -> None:
    exp, _, evil = two_runs(tmp_path)
    scenario = scenario_file(tmp_path / "s", name="../repo/.git/hooks/h")
    done = cli("validate", scenario, exp, "--no-progress")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "[[validation]][1].name" in done.stderr
    assert not (evil / "repo" / ".git" / "hooks" / "h.json").exists()


def test_symlinked_validation_folder_is_not_written_through(tmp_path: Path) -> None:
    exp, _, evil = two_runs(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (evil / "validation").symlink_to(elsewhere, target_is_directory=True)
    summary, _, rows = run_validate(tmp_path, exp)
    assert list(elsewhere.iterdir()) == []
    assert summary.exit_code == 1
    assert row(rows, "evil")["state"] == "invalid"
    assert str(evil / "validation") in errors_of(summary, rows, "evil")
    assert_good_run_validated(rows)


def test_result_symlinked_to_a_secret_is_never_copied_into_history(tmp_path: Path) -> None:
    exp, _, evil = two_runs(tmp_path)
    victim = victim_file(tmp_path)
    (evil / "validation").mkdir()
    (evil / "validation" / "score.json").symlink_to(victim)
    summary, _, rows = run_validate(tmp_path, exp)
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    history = evil / "validation" / "score.history.jsonl"
    assert not history.exists() or "victim's own content" not in history.read_text(encoding="utf-8")
    assert row(rows, "evil")["state"] == "invalid"
    assert str(evil / "validation" / "score.json") in errors_of(summary, rows, "evil")
    assert "victim's own content" not in (exp / "measures.json").read_text(encoding="utf-8")
    assert_good_run_validated(rows)


@pytest.mark.parametrize("target", ["score.history.jsonl", "score.stderr"])
def test_symlinked_history_or_stderr_is_not_written_through(tmp_path: Path, target: str) -> None:
    exp, _, evil = two_runs(tmp_path)
    run_validate(tmp_path, exp)  # a first result, so that the next one has one to replace
    victim = victim_file(tmp_path)
    planted = evil / "validation" / target
    planted.unlink(missing_ok=True)
    planted.symlink_to(victim)
    summary, _, rows = run_validate(tmp_path, exp, force=True)
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert row(rows, "evil")["state"] == "invalid"
    assert str(planted) in errors_of(summary, rows, "evil")
    assert summary.exit_code == 1
    assert_good_run_validated(rows)


def test_symlinked_archive_folder_is_not_written_through(tmp_path: Path) -> None:
    exp, _, evil = two_runs(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (evil / "validation").mkdir()
    (evil / "validation" / "score").symlink_to(elsewhere, target_is_directory=True)
    summary, _, rows = run_validate(tmp_path, exp)
    assert list(elsewhere.iterdir()) == []
    assert row(rows, "evil")["state"] == "invalid"
    assert str(evil / "validation" / "score") in errors_of(summary, rows, "evil")
    assert_good_run_validated(rows)


def test_symlinked_diff_patch_is_not_written_through(tmp_path: Path) -> None:
    exp, _, evil = two_runs(tmp_path)
    victim = victim_file(tmp_path)
    (evil / "diff.patch").symlink_to(victim)
    summary, _, rows = run_validate(tmp_path, exp)
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert row(rows, "evil")["state"] == "invalid"
    assert str(evil / "diff.patch") in errors_of(summary, rows, "evil")
    assert_good_run_validated(rows)


def test_symlinked_response_md_is_never_read(tmp_path: Path) -> None:
    exp, _, evil = two_runs(tmp_path)
    victim = victim_file(tmp_path)
    (evil / "response.md").unlink()
    (evil / "response.md").symlink_to(victim)
    summary, _, rows = run_validate(tmp_path, exp)
    context = evil / "validation" / "score" / "context.json"
    assert not context.exists()  # no validator was handed it
    assert row(rows, "evil")["state"] == "invalid"
    assert str(evil / "response.md") in errors_of(summary, rows, "evil")
    assert_good_run_validated(rows)


@pytest.mark.parametrize("planted", ["lock file", ".trysquare folder"])
def test_symlinked_lock_is_not_written_through(cli, tmp_path: Path, planted: str) -> None:
    _, _, evil = two_runs(tmp_path)
    victim = victim_file(tmp_path)
    if planted == "lock file":
        (evil / ".trysquare").mkdir(exist_ok=True)
        (evil / ".trysquare" / "validate.lock").symlink_to(victim)
    else:
        (evil / ".trysquare").symlink_to(victim.parent, target_is_directory=True)
    scenario = scenario_file(tmp_path / "s")
    done = cli("validate", scenario, evil, "--no-progress")  # the hostile run is the experiment
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert str(evil / ".trysquare") in done.stderr
    assert victim.read_text(encoding="utf-8") == VICTIM_TEXT
    assert sorted(os.listdir(victim.parent)) == ["passwd"]
    assert not (evil / "validation" / "score.json").exists()


def test_lone_surrogates_never_stop_a_writer(tmp_path: Path) -> None:
    value = {"reason": "Done \ud83d", "name": "caf\udce9.py"}
    _atomic.write_json(tmp_path / "a.json", value)
    _atomic.append_line(tmp_path / "a.jsonl", value)
    _atomic.write_text(tmp_path / "a.txt", "Done \ud83d")
    assert json.loads((tmp_path / "a.json").read_text(encoding="utf-8")) == value
    assert json.loads((tmp_path / "a.jsonl").read_text(encoding="utf-8")) == value
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "Done \\ud83d"


def test_lone_surrogate_in_a_reason_is_recorded(tmp_path: Path) -> None:
    exp, _, _ = two_runs(tmp_path)
    write_script(
        tmp_path / "s",
        "score.py",
        """\
        import sys
        sys.stdout.write('{"metrics": {"scored": true}, "reasons": {"scored": "Done \\\\ud83d"}}')
    """,
    )
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["scored"]
    """,
    )
    summary = validate(
        load_scenario(scenario), discover([exp]), ValidateOptions(progress=False), out=io.StringIO()
    )
    assert summary.exit_code == 0
    recorded = json.loads(
        (exp / "runs" / "evil" / "validation" / "score.json").read_text(encoding="utf-8")
    )
    assert recorded["reasons"]["scored"] == "Done \ud83d"


def test_planted_result_link_costs_no_validator_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The validator logs its calls beside the scenario, which the sandbox would refuse.
    monkeypatch.setenv("TRYSQUARE_SANDBOX", "off")
    exp, _, evil = two_runs(tmp_path)
    (evil / "validation").mkdir()
    (evil / "validation" / "score.json").symlink_to(victim_file(tmp_path))
    write_script(
        tmp_path / "s",
        "score.py",
        """\
        import json, pathlib, sys
        with open(pathlib.Path(__file__).with_name("calls.log"), "a") as log:
            log.write(sys.argv[1] + "\\n")
        print(json.dumps({"metrics": {"scored": True}}))
    """,
    )
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["scored"]
    """,
    )
    summary = validate(
        load_scenario(scenario), discover([exp]), ValidateOptions(progress=False), out=io.StringIO()
    )
    calls = (tmp_path / "s" / "calls.log").read_text(encoding="utf-8")
    assert "runs/good/" in calls and "runs/evil/" not in calls  # a judge would not be paid for it
    assert summary.exit_code == 1
