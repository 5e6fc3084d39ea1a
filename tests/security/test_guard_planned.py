"""What planning decided is what runs: a validator cannot change it for a run validated later.

``validate`` plans every run before the first validator starts and keeps only
digests in memory; each task is rebuilt from the files when it runs. With the
sandbox off nothing stops a validator of one run from writing the next run's
archived context, its result, or trysquare's own record of its clone: each such
write must make that run invalid, by path, never be measured.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from tests.security.guard_fixtures import build_run, result, run_validate, scenario

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.planning", "trysquare.clone_guard")


@pytest.fixture(autouse=True)
def _detection_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRYSQUARE_SANDBOX", "off")


def _only_in_first(code: str) -> str:
    """Validator code run by the validator of r1 alone (validated before r2 with one job)."""
    indented = "".join(f"    {line}\n" for line in code.strip().splitlines())
    return f"if os.path.basename(os.path.dirname(repo)) == 'r1':\n{indented}"


def test_a_context_rewritten_after_planning_is_not_handed_to_its_validator(tmp_path: Path) -> None:
    build_run(tmp_path, "r1")
    second = build_run(tmp_path, "r2")
    context = second.path / "validation" / "attack" / "context.json"
    body = _only_in_first(f"""
doc = json.load(open({str(context)!r}))
doc["cell"] = "planted"
attempt("context", lambda: open({str(context)!r}, "w").write(json.dumps(doc)))
""")
    summary, out = run_validate(scenario(tmp_path / "s", body), tmp_path / "exp")
    recorded = result(second)
    assert recorded["state"] == "invalid", out
    assert str(context) in recorded["error"] and "changed during validate" in recorded["error"]
    assert "blocked" not in recorded["reasons"]  # its validator never ran on the planted context
    assert summary.exit_code == 1


def test_a_result_rewritten_before_its_run_is_validated_is_neither_kept_nor_measured(
    tmp_path: Path,
) -> None:
    build_run(tmp_path, "r1")
    second = build_run(tmp_path, "r2")
    run_validate(scenario(tmp_path / "s", ""), tmp_path / "exp")
    assert result(second)["state"] == "valid"
    forged = second.path / "validation" / "attack.json"
    body = _only_in_first(f"""
doc = json.load(open({str(forged)!r}))
doc["metrics"] = {{"blocked": "forged"}}
attempt("forge", lambda: open({str(forged)!r}, "w").write(json.dumps(doc)))
""")
    summary, out = run_validate(scenario(tmp_path / "s", body), tmp_path / "exp", force=True)
    recorded = result(second)
    assert recorded["state"] == "invalid", out
    assert str(forged) in recorded["error"] and "changed during validate" in recorded["error"]
    assert recorded["metrics"] == {}  # the forged value is not carried into the refusal
    assert summary.exit_code == 1


@pytest.mark.parametrize("attacker,victim", [("r1", "r2"), ("r2", "r1")], ids=["before", "after"])
def test_trysquares_record_of_a_clone_rewritten_to_hide_a_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attacker: str, victim: str
) -> None:
    """The picture of each clone is kept on disk while validate runs, in a file with no name:
    one run's validator writes into the other run's clone — before that run is validated, or
    after — finds the file through trysquare's open descriptors (``/proc/<pid>/fd``, open to
    a process of the same user where no sandbox stops the write) and rewrites the picture to
    match. The digest kept in memory catches it: the victim is invalid."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))  # where validate keeps its records
    runs = {name: build_run(tmp_path, name) for name in ("r1", "r2")}
    clone = runs[victim].path / "repo"
    body = f"""
if os.path.basename(os.path.dirname(repo)) == {attacker!r}:
    import io, marshal
    target = os.path.join({str(clone)!r}, "counter.py")
    append(target)
    root = os.stat({str(clone)!r})
    # The records have no name to be found by (the scratch folders are made here too).
    assert not [n for n in os.listdir({str(private)!r}) if n.startswith("trysquare-plan")]
    descriptors = f"/proc/{{os.getppid()}}/fd"
    for name in [os.path.join(descriptors, fd) for fd in os.listdir(descriptors)]:
        try:
            if not os.readlink(name).startswith({str(private)!r}):
                continue
        except OSError:
            continue
        # The records lie end to end in one file: each is read in turn and the victim's
        # put back rewritten, every other record as it was.
        stream, kept, found = io.BytesIO(open(name, "rb").read()), [], False
        while stream.tell() < len(stream.getvalue()):
            picture, planned = marshal.load(stream)
            if picture is not None and tuple(picture[1]) == (root.st_dev, root.st_ino):
                st = os.lstat(target)
                picture[0]["counter.py"] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
                found = True
            kept.append(marshal.dumps((picture, planned)))
        if found:
            attempt("record", lambda: open(name, "r+b").write(b"".join(kept)))
"""
    summary, out = run_validate(scenario(tmp_path / "s", body), tmp_path / "exp")
    assert json.loads(result(runs[attacker])["reasons"]["blocked"]) == {
        "record": "wrote"
    }  # found and rewrote it
    recorded = result(runs[victim])
    assert recorded["state"] == "invalid", out
    assert "trysquare's record" in recorded["error"] and "were changed" in recorded["error"]
    assert summary.exit_code == 1
    assert not list(private.iterdir())  # nothing left behind


def test_a_fifo_put_in_place_of_a_result_never_hangs_validate(tmp_path: Path) -> None:
    """A FIFO where a result file is (planted before validate, or by a validator after its
    result was written) would block any plain open for reading: validate must finish, and
    the run with it is invalid."""
    import os
    import threading

    first, second = build_run(tmp_path, "r1"), build_run(tmp_path, "r2")
    (second.path / "validation").mkdir(exist_ok=True)
    os.mkfifo(second.path / "validation" / "attack.json")
    planted_late = first.path / "validation" / "attack.json"
    body = f"""
if os.path.basename(os.path.dirname(repo)) == 'r2':
    os.unlink({str(planted_late)!r})
    attempt("fifo", lambda: os.mkfifo({str(planted_late)!r}))
"""
    done: list[tuple[object, str]] = []
    worker = threading.Thread(
        target=lambda: done.append(run_validate(scenario(tmp_path / "s", body), tmp_path / "exp")),
        daemon=True,
    )
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "validate hung on a FIFO"
    ((summary, out),) = done
    assert summary.exit_code == 1  # type: ignore[attr-defined]
    assert "is not a regular file" in out
    assert f"{planted_late}" in out


def test_a_result_rewritten_while_its_own_validator_runs_is_neither_kept_nor_measured(
    tmp_path: Path,
) -> None:
    """A script validator's task is not handed the result it replaces: that file is held to
    what planning read as it is replaced. Rewritten after the task was built (here by the
    run's own validator, as it runs), it makes the result invalid; the forged bytes go to the
    history as any replaced file does, never into the result."""
    first = build_run(tmp_path, "r1")
    run_validate(scenario(tmp_path / "s", ""), tmp_path / "exp")
    assert result(first)["state"] == "valid"
    forged = first.path / "validation" / "attack.json"
    body = f"""
doc = json.load(open({str(forged)!r}))
doc["metrics"] = {{"blocked": "forged"}}
attempt("forge", lambda: open({str(forged)!r}, "w").write(json.dumps(doc)))
"""
    summary, out = run_validate(scenario(tmp_path / "s", body), tmp_path / "exp", force=True)
    recorded = result(first)
    assert recorded["state"] == "invalid", out
    assert str(forged) in recorded["error"] and "changed during validate" in recorded["error"]
    assert recorded["metrics"] == {} and recorded["reasons"] == {}
    assert recorded["context_digest"] is None  # never reused: the next validate runs it again
    history = (first.path / "validation" / "attack.history.jsonl").read_text().splitlines()
    assert json.loads(history[-1])["metrics"] == {"blocked": "forged"}
    assert summary.exit_code == 1
