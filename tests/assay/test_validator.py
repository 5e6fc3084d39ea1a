"""@validator and .cli(): the printed JSON and the error contract."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from trysquare.assay import Assay, Metric, Unjudged, validator

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(write_context: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> Run:
    """Run ``function`` as a validator on a hand-written context: (exit code, stdout, stderr)."""

    def run(function: Callable[[Assay], Any], **keys: Any) -> tuple[int, str, str]:
        context = write_context(**keys)
        code = validator(function).cli(["score.py", str(context)])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_prints_metrics_and_reasons(run_cli: Run) -> None:
    code, out, _ = run_cli(
        lambda run: {
            "in_scope": Metric(False, "also touched README.md"),
            "delivered": True,
            "count": 3,
        },
        declared=["delivered", "in_scope"],
    )
    assert code == 0
    assert json.loads(out) == {
        "metrics": {"count": 3, "delivered": True, "in_scope": False},
        "reasons": {"in_scope": "also touched README.md"},
    }


def test_sets_become_sorted_lists_and_empty_reasons_are_dropped(run_cli: Run) -> None:
    code, out, _ = run_cli(
        lambda run: {"touched": run.touched, "ok": Metric(True, "")},
        touched=["src/b.js", "README.md", "src/a.js"],
    )
    assert code == 0
    assert json.loads(out) == {
        "metrics": {"ok": True, "touched": ["README.md", "src/a.js", "src/b.js"]},
        "reasons": {},
    }


def test_unjudged_prints_null_with_its_reason(run_cli: Run) -> None:
    code, out, _ = run_cli(lambda run: {"probe_kept": Metric.unjudged("no probe was given")})
    assert code == 0
    assert json.loads(out) == {
        "metrics": {"probe_kept": None},
        "reasons": {"probe_kept": "no probe was given"},
    }


def test_a_missing_declared_metric_is_refused_before_anything_is_printed(run_cli: Run) -> None:
    evaluated: list[str] = []

    def expensive() -> bool:
        evaluated.append("tests")
        return True

    code, out, err = run_cli(
        lambda run: {"delivered": True, "tests": expensive},
        declared=["delivered", "in_scope", "tests"],
    )
    assert code == 1
    assert out == ""
    assert "'in_scope'" in err
    assert evaluated == []  # refused before paying for the other metrics


def test_a_callable_metric_is_evaluated_and_its_unjudged_spoils_only_it(run_cli: Run) -> None:
    def uses_the_session(run: Assay) -> bool:
        return bool(run.tool_calls())

    code, out, _ = run_cli(
        lambda run: {
            "opened_skill": lambda: uses_the_session(run),
            "delivered": lambda: True,
            "in_scope": Metric(True),
        },
        session=None,
    )
    assert code == 0
    assert json.loads(out) == {
        "metrics": {"delivered": True, "in_scope": True, "opened_skill": None},
        "reasons": {"opened_skill": "this run has no session log"},
    }


def test_a_callable_may_return_a_metric(run_cli: Run) -> None:
    code, out, _ = run_cli(lambda run: {"m": lambda: Metric(False, "because")})
    assert code == 0
    assert json.loads(out) == {"metrics": {"m": False}, "reasons": {"m": "because"}}


def test_a_callable_that_crashes_fails_the_validator(run_cli: Run) -> None:
    def broken() -> bool:
        raise KeyError("oops")

    code, out, err = run_cli(lambda run: {"ok": True, "broken": broken})
    assert code == 1
    assert out == ""
    assert "'broken'" in err and "KeyError" in err


def test_unjudged_from_the_body_refuses_the_run(run_cli: Run) -> None:
    # Issue 14.1: a valid run at 0/0 would leave its cell publishable with nothing measured.
    def evaluate(run: Assay) -> dict[str, Any]:
        raise Unjudged("the clone is empty")

    code, out, err = run_cli(evaluate, declared=["a", "b"])
    assert code == 1
    assert out == ""
    assert "the clone is empty" in err and "refused" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_an_unjudged_metric_read_as_a_truth_in_the_body_refuses_the_run(run_cli: Run) -> None:
    # `Metric.__bool__` raises Unjudged: read outside a callable, it is the body's.
    code, out, err = run_cli(
        lambda run: {"ok": bool(Metric.unjudged("no suite")) or True}, declared=["ok"]
    )
    assert code == 1 and out == ""
    assert "no suite" in err


def test_a_bug_in_the_body_is_not_a_measurement(run_cli: Run) -> None:
    def evaluate(run: Assay) -> dict[str, Any]:
        return {"ratio": 1 / 0}

    code, out, err = run_cli(evaluate, declared=["ratio"])
    assert code == 1
    assert out == ""
    assert "ZeroDivisionError" in err and "Traceback" in err


def test_a_context_key_a_validator_needs_but_lacks_is_named(run_cli: Run) -> None:
    code, out, err = run_cli(lambda run: {"cell": run.cell}, cell=..., given=...)
    assert code == 1
    assert out == ""
    assert "'cell'" in err and "judge" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("value", "words"),
    [(None, "Metric.unjudged"), (float("nan"), "nan"), (object(), "object")],
)
def test_values_that_are_not_measurements_are_refused(run_cli: Run, value: Any, words: str) -> None:
    code, out, err = run_cli(lambda run: {"m": value})
    assert code == 1
    assert out == ""
    assert words in err


def test_a_function_must_return_a_dict(run_cli: Run) -> None:
    code, out, err = run_cli(lambda run: [("m", True)])
    assert code == 1 and out == ""
    assert "dict" in err


def test_stray_prints_go_to_stderr(run_cli: Run) -> None:
    def evaluate(run: Assay) -> dict[str, Any]:
        print("debugging...")
        return {"m": lambda: print("more") or True}

    code, out, err = run_cli(evaluate)
    assert code == 0
    assert json.loads(out) == {"metrics": {"m": True}, "reasons": {}}
    assert "debugging..." in err and "more" in err


def test_usage_and_unreadable_contexts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evaluate = validator(lambda run: {})
    assert evaluate.cli(["score.py"]) == 2
    assert "usage" in capsys.readouterr().err
    assert evaluate.cli(["score.py", str(tmp_path / "missing.json")]) == 1
    (tmp_path / "bad.json").write_text("[1, 2]", encoding="utf-8")
    assert evaluate.cli(["score.py", str(tmp_path / "bad.json")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "JSON object" in err


def test_the_decorated_function_is_still_callable(write_context: Callable[..., Path]) -> None:
    @validator
    def evaluate(run: Assay) -> dict[str, Any]:
        """Docs."""
        return {"n": len(run.touched)}

    run = Assay.load(write_context(touched=["a", "b"]))
    assert evaluate(run) == {"n": 2}
    assert evaluate.__doc__ == "Docs."


def test_unjudged_from_the_body_makes_the_recorded_run_invalid(
    trysquare_run: Callable[..., Any], run_validator: Callable[..., Any], tmp_path: Path
) -> None:
    # The whole chain, as `validate` records it: the cell must not stay publishable.
    run = trysquare_run(base={"a.py": "x = 1\n"}, changes={"a.py": "x = 2\n"})
    script = tmp_path / "score.py"
    script.write_text(
        f"#!{sys.executable}\n"
        "from trysquare.assay import Unjudged, validator\n"
        "@validator\n"
        "def evaluate(run):\n"
        "    raise Unjudged('no probe was given to this cell')\n"
        "raise SystemExit(evaluate.cli())\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    result = run_validator(run, script=script, metrics=["a", "b"])
    assert result.state == "invalid"
    assert result.metrics == {}
    assert "no probe was given to this cell" in result.stderr
