"""Property tests: form ingest on arbitrary TOML, and a session log of one huge line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trysquare.errors import TrysquareError
from trysquare.runner import ValidateOptions, validate
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import RunBuilder

from tests.helpers import write_scenario, write_script

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
toml_values = st.recursive(
    st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object, Path, list[str]]:
    from trysquare_form import export_form

    root = tmp_path_factory.mktemp("form-props")
    for index in range(2):
        run = RunBuilder(root / "exp" / "runs" / f"r{index}", cell=f"c{index}")
        run.base({"a.py": "a = 1\n"})
        run.repo.write("a.py", f"a = {index + 2}\n")
        run.finish(response="done\n")
    write_script(
        root / "s", "score.py", "import json; print(json.dumps({'metrics': {'scored': True}}))\n"
    )
    scenario = load_scenario(
        write_scenario(
            root / "s",
            """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["scored"]
        [[validation]]
        mode = "form"
        pieces = ["diff", "response"]
        metrics = ["clear"]
    """,
        )
    )
    experiment = discover([root / "exp"])[0]
    validate(scenario, [experiment], ValidateOptions(progress=False, jobs=2), out=io.StringIO())
    result = export_form(scenario, experiment, root / "form.toml", seed=1)
    return scenario, experiment, result.form, [entry.opaque for entry in result.runs]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_form_ingest_never_raises_on_arbitrary_toml(exported, data: st.DataObject) -> None:
    from trysquare_form import ingest_form

    scenario, experiment, form, opaque_ids = exported
    ids = st.sampled_from(opaque_ids) | st.text(min_size=1, max_size=6)
    metrics = st.sampled_from(["clear", "scored", "diff", "other"]) | st.text(
        min_size=1, max_size=6
    )
    document = data.draw(
        st.one_of(
            st.fixed_dictionaries(
                {
                    "run": st.dictionaries(
                        ids, st.dictionaries(metrics, toml_values, max_size=3), max_size=3
                    )
                }
            ),
            st.dictionaries(st.text(max_size=6), toml_values, max_size=3),
        )
    )
    form.write_text(tomli_w.dumps(document), encoding="utf-8")
    try:
        report = ingest_form(scenario, experiment, form, by="property test")
    except TrysquareError:
        return  # a clean refusal of the whole form is one sentence, not a crash
    assert report.merged + len(report.refused) >= 0
    for run in experiment.runs:  # a measured value is never overwritten by the form
        recorded = json.loads((run.dir / "validation" / "script.json").read_text())
        assert recorded["metrics"]["scored"] is True


def test_a_session_of_one_50_mb_line(cli, tmp_path: Path) -> None:
    run = RunBuilder(tmp_path / "exp" / "runs" / "big")
    run.base({"a.py": "a = 1\n"})
    run.repo.write("a.py", "a = 2\n")
    run.finish(
        session=[
            {
                "type": "message",
                "message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
            },
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "x" * (50 << 20)},
                    ],
                },
            },
        ]
    )
    session = run.path / "session.jsonl"
    assert max(len(line) for line in session.read_bytes().splitlines()) > 50 << 20
    write_script(
        tmp_path / "s",
        "calls.py",
        """
        from trysquare.assay import validator
        @validator
        def evaluate(run):
            return {"calls": len(run.tool_calls()), "said": len(run.response)}
        raise SystemExit(evaluate.cli())
    """,
    )
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        mode = "script"
        command = "calls.py"
        metrics = ["calls", "said"]
    """,
    )
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    recorded = json.loads((run.path / "validation" / "script.json").read_text())
    assert recorded["metrics"] == {"calls": 0, "said": 50 << 20}
