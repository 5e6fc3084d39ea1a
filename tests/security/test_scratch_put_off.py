"""A scratch folder awaiting its emptying while the next validator runs: that validator can
neither write into it nor have it handed to a later task once it tampered with it.

In ``validate``'s worker a script validator's scratch folder is looked at and emptied once the
next validator has started (``trysquare._scratch``), so for a moment the earlier folder, with
what its validator left in it, lies beside the running one. The attack: the next validator
finds it (its path is in the earlier run's archive folder, readable to it), tries to plant a
file there for a later task to meet, and opens the folder up (``chmod`` is no write to
Landlock). The plant must fail at the write (EACCES), and the opened-up folder must be removed,
never handed out again: the task after gets a folder of its own, empty.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from trysquare import sandbox

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._scratch", "trysquare._start_first", "trysquare.sandbox")

pytestmark = pytest.mark.skipif(not sandbox.sandbox_enabled(), reason="needs Landlock")

# run0 leaves litter and says where its folder is; run1 attacks that folder; run2 reports
# the folder it was given.
ATTACKER = """
import json, os, sys
from pathlib import Path
context = Path(sys.argv[1])
me = context.parents[2].name
archive = context.parent
said = {"cwd": os.getcwd(), "found": sorted(os.listdir("."))}
if me == "run0":
    (archive / "cwd.txt").write_text(os.getcwd())
    Path("left.txt").write_text("run0's leftovers")
elif me == "run1":
    earlier = (context.parents[3] / "run0" / "validation" / archive.name / "cwd.txt").read_text()
    said["earlier"] = earlier
    try:
        with open(os.path.join(earlier, "planted.txt"), "w") as planted:
            planted.write("for the next task")
        said["plant"] = "written"
    except PermissionError as error:
        said["plant"] = f"refused (errno {error.errno})"
    os.chmod(earlier, 0o777)
    said["opened up"] = True
sys.stderr.write(json.dumps(said))
print(json.dumps({"metrics": {"changed": True}}))
"""


def test_the_next_validator_can_neither_plant_in_nor_keep_a_folder_awaiting_its_emptying(
    tmp_path: Path, cli, make_run
) -> None:
    for index in range(3):
        run = make_run(f"run{index}", cell="c", repetition=index)
        run.base({"counter.py": "x = 1\n"})
        run.repo.write("counter.py", f"x = {index + 2}\n")
        run.finish()
    experiment = tmp_path / "exp"
    folder = tmp_path / "s"
    write_script(folder, "score.py", ATTACKER)
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["changed"]
        warm = false
        """,
    )
    done = cli("validate", scenario, experiment, "--jobs", "1", "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    said = [
        json.loads((experiment / "runs" / f"run{i}" / "validation" / "script.stderr").read_text())
        for i in range(3)
    ]
    first, attacker, later = said
    assert attacker["earlier"] == first["cwd"] != attacker["cwd"]
    assert attacker["plant"] == "refused (errno 13)" and attacker["opened up"] is True
    # Opened up: removed, never handed to a later task, which got a folder of its own, empty.
    assert later["cwd"] != first["cwd"] and later["found"] == []
    assert not os.path.lexists(first["cwd"])
    assert all(s["found"] == [] for s in said)


def test_a_kept_folder_opened_up_written_and_shut_again_is_never_handed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same attack done to the end: the folder opened up, written by someone else, and
    shut again (mode 0700 once more) before it is handed out. Its change time gives it away."""
    import time

    from trysquare import _scratch
    from trysquare.api import scratch_folder

    monkeypatch.setattr(_scratch, "_free", {})
    with scratch_folder("attack-") as first:
        pass  # kept, emptied, for the next task
    time.sleep(0.05)  # past a coarse clock tick: the change below gets a time of its own
    os.chmod(first, 0o777)
    Path(first, "planted.txt").write_text("for the next task")
    os.chmod(first, 0o700)
    with scratch_folder("attack-") as second:
        assert second != first and os.listdir(second) == []
    assert not os.path.lexists(first)
    _scratch.remove_kept()
