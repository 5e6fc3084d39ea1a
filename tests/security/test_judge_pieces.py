"""Judge pieces are bounded and the blinding line tells the truth about what is sent
(issue 19 item 3, issue 13 item 6).

Each test builds the hostile run itself: a one-line untracked file that makes
the diff huge, a sparse file far larger than memory should hold, a harness
file that is the same in every run of a cell and differs between cells.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

from trysquare.runs import load_run

from tests.judge.chatserver import verdict
from tests.security.judgelab import lab_with_key, validate_in_process  # noqa: F401
from trysquare_judge import blinding, prompt

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare_judge.prompt",)


METRICS = ("note_usable", "cites_paths")
SCENARIO_WITH_CAP = """\
[[validation]]
mode = "judge"
provider = "local"
model = "judge-model-1"
thinking = "off"
rubric = "rubric.md"
pieces = ["prompt", "response", "diff"]
metrics = ["note_usable", "cites_paths"]
max_piece_bytes = 4096
"""


def test_huge_untracked_file_makes_diff_over_cap_unjudged_nothing_sent(lab_with_key) -> None:
    lab = lab_with_key("sk-cap-test-0001")
    lab.write_scenario(text=SCENARIO_WITH_CAP)
    big = lab.run("big")
    big.repo.write("blob.txt", "x" * 50_000)  # one line, untracked: all of it in diff.patch
    lab.run("small", change="count = 2\n")
    lab.respond(lambda _: verdict(dict.fromkeys(METRICS, True)))
    code, _ = validate_in_process(lab)
    result = lab.result("big")
    assert result["state"] == "valid"
    assert result["metrics"] == dict.fromkeys(METRICS)  # unjudged, never a negative
    reason = result["reasons"]["note_usable"]
    assert "diff piece is" in reason and "over max_piece_bytes = 4,096" in reason
    assert "nothing was sent" in reason
    # One request only: the small run's. Nothing of the big run reached the judge.
    assert len(lab.server.received) == 1
    assert "x" * 100 not in str(lab.server.received[0].body)
    assert lab.result("small")["metrics"] == dict.fromkeys(METRICS, True)
    assert code == 0


def test_sparse_piece_of_gigabytes_is_sized_without_reading(tmp_path: Path) -> None:
    huge = tmp_path / "response.md"
    with open(huge, "wb") as handle:
        handle.truncate(2 * 1024**3)  # 2 GiB that costs no disk
    context = {"response": str(huge)}
    tracemalloc.start()
    try:
        text, size = prompt.read_piece_capped(context, "response", 1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text is None and size == 2 * 1024**3
    assert peak < 1024 * 1024  # decided from stat: not one chunk of it was read


def test_cap_refused_when_not_positive(lab_with_key) -> None:
    import pytest
    from trysquare.errors import ScenarioError
    from trysquare.scenario import load_scenario

    lab = lab_with_key("sk-cap-test-0002")
    lab.write_scenario(text=SCENARIO_WITH_CAP.replace("4096", "0"))
    with pytest.raises(ScenarioError, match=r"max_piece_bytes: must be a positive number of bytes"):
        load_scenario(lab.scenario)


def _cells_with_injected_file(lab) -> list:
    """Two cells of two runs: every run's own change, plus a file each cell's harness injected."""
    runs = []
    for cell, rule in (
        ("cell-a", "Always write tests first.\n"),
        ("cell-b", "Never touch tests.\n"),
    ):
        for repetition in (1, 2):
            run = lab.run(
                f"{cell}-{repetition}",
                cell=cell,
                repetition=repetition,
                change=f"count = {repetition + (10 if cell == 'cell-b' else 0)}\n",
                response=f"response {cell} {repetition}",
            )
            run.repo.write("HARNESS_RULES.md", rule)
            runs.append(load_run(run.path / "run.toml"))
    return runs


def test_blinding_line_names_cell_constant_file_inside_diff(lab_with_key) -> None:
    lab = lab_with_key("sk-blind-test-0003")
    runs = _cells_with_injected_file(lab)
    line = blinding.blinding_line(runs, ["prompt", "response", "diff"])
    assert line.startswith("! judge is only partially blind: diff (HARNESS_RULES.md) varies")
    # The whole diff varies within each cell: alone, it would have looked blind.
    assert blinding.leaking_pieces(runs, ["diff"]) == ["diff (HARNESS_RULES.md)"]


def test_blinding_line_leaves_out_runs_over_the_cap(lab_with_key) -> None:
    lab = lab_with_key("sk-blind-test-0004")
    runs = _cells_with_injected_file(lab)
    # Every run of cell-b is over the cap: nothing of cell-b is sent, nothing can leak.
    for run in runs:
        if run.cell == "cell-b":
            (run.repo / "blob.txt").write_text("y" * 10_000)
    line = blinding.blinding_line(runs, ["prompt", "response", "diff"], max_piece_bytes=4096)
    assert line.startswith("judge: blind"), line


def test_check_prints_the_honest_line(lab_with_key) -> None:
    lab = lab_with_key("sk-blind-test-0005")
    _cells_with_injected_file(lab)
    done = lab.check(lab.exp)
    assert "diff (HARNESS_RULES.md) varies between cells" in done.stdout + done.stderr
    assert os.environ.get("TRYSQUARE_JUDGE_TEST_KEY") not in done.stdout + done.stderr


def test_run_with_no_recorded_response_is_unjudged_nothing_sent(lab_with_key) -> None:
    # No session and no response.md: the note is unknown, so the judge must not be
    # shown "(empty)" and score it as a poor note.
    lab = lab_with_key("sk-null-response-0001")
    lab.write_scenario(text=SCENARIO_WITH_CAP)
    lab.run("silent", response=None)
    lab.run("spoke")
    lab.respond(lambda _: verdict(dict.fromkeys(METRICS, False)))
    validate_in_process(lab)
    result = lab.result("silent")
    assert result["metrics"] == dict.fromkeys(METRICS)
    assert "no response was recorded" in result["reasons"]["note_usable"]
    assert len(lab.server.received) == 1  # only the run that has a response
    assert lab.result("spoke")["metrics"] == dict.fromkeys(METRICS, False)


def test_a_planted_diff_patch_fifo_never_holds_the_blinding_check(tmp_path: Path) -> None:
    # The agent makes the diff fail (a tracked file replaced by a FIFO) and plants
    # diff.patch as a FIFO, the file the blinding check falls back on: `check` must end.
    import threading

    from trysquare.testing import RunBuilder

    runs = []
    for name, cell in (("a1", "A"), ("b1", "B")):
        run = RunBuilder(tmp_path / "runs" / name, cell=cell)
        run.base({"counter.py": "x = 1\n"})
        run.repo.write("counter.py", "x = 2\n")
        run.finish(response="Done.\n")
        runs.append(run)
    hostile = runs[1]
    (hostile.repo.path / "counter.py").unlink()
    os.mkfifo(hostile.repo.path / "counter.py")
    os.mkfifo(hostile.path / "diff.patch")
    loaded = [load_run(run.path / "run.toml") for run in runs]
    found: list[list[str]] = []
    worker = threading.Thread(
        target=lambda: found.append(blinding.leaking_pieces(loaded, ["diff"])), daemon=True
    )
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the blinding check waited on the planted diff.patch"
    assert found == [["diff"]]  # the hostile run's diff reads as empty, the other's does not


def test_a_planted_diff_patch_link_is_not_followed(tmp_path: Path) -> None:
    from trysquare.testing import RunBuilder

    secret = tmp_path / "secret.txt"
    secret.write_text("the key\n")
    run = RunBuilder(tmp_path / "runs" / "r1")
    run.base({"counter.py": "x = 1\n"})
    run.finish(response="Done.\n")
    (run.repo.path / "counter.py").unlink()
    os.mkfifo(run.repo.path / "counter.py")  # the fallback is taken
    os.symlink(secret, run.path / "diff.patch")
    assert blinding._diff(load_run(run.path / "run.toml"), None) == b""
