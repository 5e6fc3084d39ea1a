"""Crash-clean: a killed run's temporary files go, the history never doubles, a full disk stops cleanly."""

from __future__ import annotations

import errno
import io
import json
import os
import time
from pathlib import Path

import pytest
from trysquare import _atomic, results
from trysquare.runner import ValidateOptions, validate
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._atomic", "trysquare.lock")


SCORE = """\
import json, sys
sys.stderr.write("working\\n")
print(json.dumps({"metrics": {"scored": True}}))
"""


def matrix(tmp_path: Path, count: int = 1) -> tuple[Path, Path]:
    exp = tmp_path / "exp"
    for index in range(count):
        build_run(
            exp / "runs" / f"r{index}",
            base={"a.py": "a = 1\n"},
            changes={"a.py": f"a = {index + 2}\n"},
            response="ok\n",
            repetition=index + 1,
        )
    write_script(tmp_path / "s", "score.py", SCORE)
    return exp, write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["scored"]
    """,
    )


def run(scenario: Path, exp: Path, *, force: bool = False, jobs: int = 2):
    return validate(
        load_scenario(scenario),
        discover([exp]),
        ValidateOptions(progress=False, jobs=jobs, force=force),
        out=io.StringIO(),
    )


def test_temp_files_of_a_killed_run_are_removed_by_the_next_start(tmp_path: Path) -> None:
    exp, scenario = matrix(tmp_path)
    folder = exp / "runs" / "r0"
    run(scenario, exp)
    # What a kill during a write leaves: ours (mkstemp's old names and the new ones)...
    litter = [
        folder / "validation" / ".score.stderr.k2j3h4l5.tmp",
        folder / "validation" / ".score.json.0123456789ab.tmp",
        folder / "validation" / "score" / ".context.json.abcdef.tmp",
        folder / ".diff.patch.q1w2e3r4.tmp",
    ]
    for path in litter:
        path.write_bytes(b"x" * 1000)
    # ...and files that are not ours, which stay.
    kept = [folder / "notes.tmp", folder / "validation" / "score.tmp"]
    for path in kept:
        path.write_bytes(b"agent")
    assert run(scenario, exp).exit_code == 0
    assert [p for p in litter if p.exists()] == []
    assert all(p.exists() for p in kept)


def test_temp_files_of_a_killed_writer_in_the_experiment_folder_are_removed_by_the_next_start(
    tmp_path: Path,
) -> None:
    exp, scenario = matrix(tmp_path, count=2)
    run(scenario, exp)
    # A writer of measures.json killed before its rename.
    litter = [exp / ".measures.json.k2j3h4l5.tmp", exp / ".measures.json.0123456789ab.tmp"]
    for path in litter:
        path.write_bytes(b"[" * 1000)
        os.utime(path, (time.time() - 120, time.time() - 120))  # left two minutes ago
    kept = [
        exp / "notes.tmp",
        exp / ".report.md.k2j3h4l5.tmp",
    ]  # not ours, or not written under the lock
    # A second old: perhaps a `report` writing it now (it takes no lock), so it stays.
    kept.append(exp / ".measures.json.fresh1.tmp")
    for path in kept:
        path.write_bytes(b"mine")
    assert run(scenario, exp).exit_code == 0
    assert [p for p in litter if p.exists()] == []
    assert all(p.exists() for p in kept)


def test_temp_files_of_a_killed_form_export_are_removed_by_the_next_export(tmp_path: Path) -> None:
    from trysquare_form import export_form

    exp, scenario_path = matrix(tmp_path)
    with scenario_path.open("a", encoding="utf-8") as scenario_file:
        scenario_file.write(
            '\n[[validation]]\nname = "human"\nmode = "form"\npieces = ["diff"]\n'
            'metrics = ["clear"]\n'
        )
    scenario = load_scenario(scenario_path)
    (experiment,) = discover([exp])
    export_form(scenario, experiment, tmp_path / "one.toml", seed=1)
    forms = exp / ".trysquare" / "forms"
    litter = [forms / ".one.key.json.k2j3h4l5.tmp", forms / ".secret.abcdef.tmp"]
    for path in litter:
        path.write_bytes(b"{")
    # Beside the form: a killed export's temporary form and staging folder (a minute old).
    beside = [tmp_path / ".one.toml.k2j3h4l5.tmp", tmp_path / ".one.d.ab12cd34"]
    beside[0].write_text("[run.")
    beside[1].mkdir()
    (beside[1] / ".trysquare-form").write_text("written by trysquare form export\n")
    for path in beside:
        os.utime(path, (time.time() - 120, time.time() - 120))
    export_form(scenario, experiment, tmp_path / "two.toml", seed=2)
    assert [p for p in litter if p.exists()] == []
    export_form(scenario, experiment, tmp_path / "one.toml", seed=1, force=True)
    assert [p for p in beside if p.exists()] == []
    assert len(list(forms.glob("one-*.key.json"))) == 1 and (forms / "secret").is_file()


def test_kill_between_history_append_and_result_replace_never_duplicates_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp, scenario = matrix(tmp_path)
    validation = exp / "runs" / "r0" / "validation"
    run(scenario, exp)
    first = json.loads((validation / "score.json").read_text(encoding="utf-8"))

    real_write = _atomic.Folder.write

    def killed(self: _atomic.Folder, name: str, data: bytes) -> None:
        if name == "score.json":
            raise SystemExit(
                "killed"
            )  # as SIGKILL would: after the history append, before the replace
        real_write(self, name, data)

    monkeypatch.setattr(_atomic.Folder, "write", killed)
    with pytest.raises(SystemExit):
        run(scenario, exp, force=True, jobs=1)
    monkeypatch.setattr(_atomic.Folder, "write", real_write)

    history = validation / "score.history.jsonl"
    assert [json.loads(line) for line in history.read_text(encoding="utf-8").splitlines()] == [
        first
    ]
    assert run(scenario, exp, force=True).exit_code == 0
    lines = [json.loads(line) for line in history.read_text(encoding="utf-8").splitlines()]
    assert lines == [first], "the result the killed run left was appended twice"
    run(scenario, exp, force=True)
    assert len(history.read_text(encoding="utf-8").splitlines()) == 2


def test_torn_history_line_is_not_taken_for_the_last_line(tmp_path: Path) -> None:
    exp, scenario = matrix(tmp_path)
    validation = exp / "runs" / "r0" / "validation"
    run(scenario, exp)
    with open(validation / "score.history.jsonl", "ab") as handle:
        handle.write(b'{"torn": ')  # a kill mid-append
    assert run(scenario, exp, force=True).exit_code == 0
    assert (validation / "score.json").exists()


def test_full_disk_makes_the_task_invalid_and_stops_the_matrix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp, scenario = matrix(tmp_path, count=4)
    real_write = _atomic.Folder.write

    def full(self: _atomic.Folder, name: str, data: bytes) -> None:
        if self.path.name == "validation" and name.endswith(".json"):
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path / name))
        real_write(self, name, data)

    monkeypatch.setattr(_atomic.Folder, "write", full)
    summary = run(scenario, exp, jobs=1)
    assert summary.exit_code == 1
    assert "no space left" in summary.closing_line()
    assert summary.executed < 4, "the matrix went on after the disk filled up"
    rows = json.loads((exp / "measures.json").read_text(encoding="utf-8"))
    failed = [r for r in rows if r["state"] == "invalid"]
    assert failed and "no space left on device" in failed[0]["errors"][0]["error"]
    assert not any(
        (exp / "runs" / f"r{i}" / "validation" / "score.json").exists() for i in range(4)
    )


def test_full_disk_on_the_cli_exits_1_without_a_traceback(cli_process, tmp_path: Path) -> None:
    # RLIMIT_FSIZE is EFBIG, not ENOSPC, and no tmpfs is at hand unprivileged: a
    # sitecustomize makes the result writer meet a full disk in the real process
    # (a real process is the point: sitecustomize runs at interpreter start).
    exp, scenario = matrix(tmp_path, count=2)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import errno\n"
        "from trysquare import _atomic\n"
        "_real = _atomic.Folder.write\n"
        "def _full(self, name, data):\n"
        "    if name == 'score.json':\n"
        "        raise OSError(errno.ENOSPC, 'No space left on device', str(self.path / name))\n"
        "    _real(self, name, data)\n"
        "_atomic.Folder.write = _full\n",
        encoding="utf-8",
    )
    done = cli_process(
        "validate", scenario, exp, "--no-progress", "--jobs", "1", env={"PYTHONPATH": str(site)}
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert "no space left on device" in done.stdout
    assert results.MEASURES_FILE in {p.name for p in exp.iterdir()}


def test_file_size_limit_in_a_real_process_spoils_only_that_run(tmp_path: Path) -> None:
    import os
    import resource
    import signal
    import subprocess
    import sys

    # RLIMIT_FSIZE makes a write fail (EFBIG, SIGXFSZ ignored) in the real
    # process: the run whose stderr is too big is invalid, named; the other is recorded.
    exp, _ = matrix(tmp_path, count=2)
    write_script(
        tmp_path / "s",
        "score.py",
        """\
        import json, sys
        sys.stderr.write("e" * (200_000 if "/r1/" in open(sys.argv[1]).read() else 10))
        print(json.dumps({"metrics": {"scored": True}}))
    """,
    )
    limit = 100_000

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trysquare",
            "validate",
            str(tmp_path / "s" / "scenario.toml"),
            str(exp),
            "--no-progress",
            "--jobs",
            "1",
        ],
        capture_output=True,
        text=True,
        preexec_fn=limited,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "c")},
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    rows = {r["id"]: r for r in json.loads((exp / "measures.json").read_text(encoding="utf-8"))}
    assert rows["r0"]["state"] == "valid"
    assert rows["r1"]["state"] == "invalid"
    assert "File too large" in rows["r1"]["errors"][0]["error"]
    assert str(exp / "runs" / "r1") in rows["r1"]["errors"][0]["error"]
