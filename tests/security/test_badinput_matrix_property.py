"""Property: whatever one hostile run folder holds, ``validate`` finishes and every good run is validated.

Hypothesis draws a hostile run (an odd folder name, non-UTF-8 bytes included; a
big or deeply nested file; bad session lines; a bad ``run.toml``) and puts it in
a matrix beside good runs. Bounded to a few seconds; derandomized on CI (see
tests/conftest.py).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trysquare.runner import ValidateOptions, validate
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import build_run

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.runner", "trysquare.runs")


GOOD = ("good1", "good2")

names = st.one_of(
    st.text(
        alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)),
        min_size=1,
        max_size=12,
    ).filter(lambda n: n not in (".", "..") and not n.startswith(".")),
    st.binary(min_size=1, max_size=8)
    .filter(
        lambda b: (
            b"/" not in b and b"\x00" not in b and b not in (b".", b"..") and not b.startswith(b".")
        )
    )
    .map(os.fsdecode),
)
session_lines = st.lists(
    st.one_of(
        st.sampled_from(
            [
                b"\xff\xfe not utf-8",
                b"[" * 3000,
                b"{" * 3000,
                b'{"type": "message"}',
                b"null",
                b"",
                (
                    b'{"type":"message","id":"x","parentId":null,"message":{"role":"assistant",'
                    b'"content":[{"type":"text","text":"Done \\ud83d"}]}}'
                ),
            ]
        ),
        st.binary(max_size=40),
    ),
    max_size=5,
)
run_tomls = st.one_of(
    st.sampled_from(
        [
            b"",
            b"cell = " + b"[" * 5000 + b"]" * 5000,
            b'cell = "caf\xe9"',
            b"cell = 1\nrepetition = 'x'",
            b'cell = "c"\nrepetition = -1\nprompt = "p"',
            b'cell = "c"\nrepetition = 1\nprompt = "../../../etc/passwd"',
        ]
    ),
    st.binary(max_size=60),
)
hostile = st.fixed_dictionaries(
    {
        "name": names,
        "file_size": st.sampled_from([0, 1, 70_000]),
        "depth": st.integers(min_value=0, max_value=40),
        "file_name": names,
        "session": st.none() | session_lines,
        "run_toml": st.none() | run_tomls,
    }
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hostile-matrix")
    exp = root / "exp"
    for index, name in enumerate(GOOD):
        build_run(
            exp / "runs" / name,
            base={"a.py": "a = 1\n"},
            changes={"a.py": f"a = {index + 2}\n"},
            response="done\n",
            repetition=index + 1,
        )
    write_script(
        root / "s",
        "score.py",
        """\
        import json, sys
        context = json.load(open(sys.argv[1], encoding="utf-8"))
        print(json.dumps({"metrics": {"touched": len(context["touched"])}}))
    """,
    )
    write_scenario(
        root / "s",
        """
        [[validation]]
        name = "score"
        mode = "script"
        command = "score.py"
        metrics = ["touched"]
    """,
    )
    return exp, root / "s" / "scenario.toml"


def build_hostile(folder: Path, spec: dict) -> None:
    session = [
        {
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        }
    ]
    run = build_run(
        folder,
        base={"a.py": "a = 1\n"},
        response=None,
        session=session,
        repetition=len(GOOD) + 1,
        cell="hostile",
    )
    nested = run.repo.path.joinpath(*(["d"] * spec["depth"])) / spec["file_name"]
    nested.parent.mkdir(parents=True, exist_ok=True)
    nested.write_bytes(b"x" * spec["file_size"])
    if spec["session"] is not None:
        with open(folder / "session.jsonl", "ab") as handle:
            handle.write(b"\n".join(spec["session"]) + b"\n")
    if spec["run_toml"] is not None:
        (folder / "run.toml").write_bytes(spec["run_toml"])


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=hostile)
def test_one_hostile_run_never_stops_the_matrix(world: tuple[Path, Path], spec: dict) -> None:
    exp, scenario_path = world
    folder = exp / "runs" / spec["name"]
    if spec["name"] in GOOD or folder.exists():
        return
    try:
        build_hostile(folder, spec)
    except (OSError, RuntimeError):
        shutil.rmtree(folder, ignore_errors=True)
        return  # the file system (or git) would not let even the agent make it
    try:
        scenario = load_scenario(scenario_path)
        summary = validate(
            scenario, discover([exp]), ValidateOptions(progress=False, jobs=2), out=io.StringIO()
        )
        rows = json.loads((exp / "measures.json").read_text(encoding="utf-8"))
        for name in GOOD:
            good = next(r for r in rows if r["id"] == name)
            assert good["state"] == "valid" and good["metrics"] == {"touched": 1}, good
        hostile_rows = [r for r in rows if r["id"] not in GOOD]
        # The hostile run is judged, or named as one that could not be read: never silently gone.
        assert hostile_rows or summary.skipped_runs
    finally:
        shutil.rmtree(folder, ignore_errors=True)
