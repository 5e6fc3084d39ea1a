"""pytest fixtures for validator authors, shipped with ``trysquare-core``.

Installed with trysquare-core (entry point ``pytest11``, plugin name
``trysquare``; ``-p no:trysquare`` turns it off), it gives every test suite two
fixtures:

- ``trysquare_run(run_id="r1", base={...}, changes={...}, ...)`` builds a finished
  run under ``tmp_path``: a real git clone whose etalon commit holds ``base``, the
  agent's uncommitted ``changes`` on top, a prompt, optionally a response and a
  session log (:func:`trysquare.testing.builders.build_run`).
- ``run_validator(run, script=..., metrics=[...])`` or
  ``run_validator(run, scenario=..., validator=NAME)`` scores that run through
  trysquare's own path — the scenario loaded with its load-time refusals, the
  facts gathered, the context built and archived, the mode's ``evaluate``, the
  result recorded in ``validation/<name>.json`` — and returns the parsed
  :class:`ValidatorResult`.

In process, not through ``trysquare validate`` in a subprocess: the code path is
the runner's own (``execute_task``), at a fraction of the start-up cost, and a
failing test shows the validator's stderr.

```python
def test_my_validator(trysquare_run, run_validator):
    run = trysquare_run(base={"a.py": "x = 1\\n"}, changes={"a.py": "x = 2\\n"})
    result = run_validator(run, script="validator.py", metrics=["in_scope"])
    assert result.metrics == {"in_scope": True}
```

Imports of trysquare's runtime are deferred to the fixtures, so merely having
trysquare-core installed costs a pytest session nothing.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest

if TYPE_CHECKING:
    from trysquare.modes import Mode
    from trysquare.testing.builders import RunBuilder

__all__ = ["ValidatorResult", "run_validator", "trysquare_run", "validate_run"]


@attrs.frozen
class ValidatorResult:
    """One validator's result on one run, as trysquare recorded it."""

    metrics: Mapping[str, Any]
    reasons: Mapping[str, str]
    state: str  # "valid" | "invalid" | "pending"
    error: str | None
    stderr: str  # what the validator left as evidence (validation/<name>.stderr)
    document: Mapping[str, Any]  # the whole validation/<name>.json
    context: Mapping[str, Any]  # what the validator was handed
    clone_changes: str | None  # what validation changed in the measured clone (None: nothing)

    @property
    def valid(self) -> bool:
        return self.state == "valid"


def validate_run(
    run: RunBuilder | Path | str,
    *,
    script: Path | str | None = None,
    metrics: Sequence[str] | None = None,
    scenario: Path | str | None = None,
    validator: str | None = None,
    test_command: str | None = None,
    prepare: Sequence[str] = (),
    artefacts: Sequence[str] = (),
    timeout: float | None = None,
    modes: Mapping[str, Mode] | None = None,
    workdir: Path | None = None,
) -> ValidatorResult:
    """Score ``run`` with one validator the way ``trysquare validate`` does; return its result.

    Either ``script`` (an executable; its ``metrics`` declared, and the ``[task]``
    keys ``test_command``, ``prepare``, ``artefacts`` when it calls ``run.tests()``)
    or ``scenario`` (a ``scenario.toml``; ``validator`` names one of its
    ``[[validation]]`` tables, default the first). ``modes`` replaces the installed
    modes (a mode under development, not installed yet). A scenario that does not
    load raises :class:`trysquare.errors.ScenarioError`, as ``trysquare check``
    would refuse it. ``workdir`` keeps the scenario written for ``script``.
    """
    if (script is None) == (scenario is None):
        raise TypeError("give either script=... or scenario=...")
    if script is not None:
        if not metrics:
            raise TypeError("script=... needs metrics=[...]: the metrics the script declares")
        with tempfile.TemporaryDirectory(prefix="trysquare-scenario-") as scratch:
            folder = Path(workdir) if workdir is not None else Path(scratch)
            path = _script_scenario(
                folder, Path(script), metrics, test_command, prepare, artefacts, timeout
            )
            return _validate(run, path, validator, modes)
    assert scenario is not None
    return _validate(run, Path(scenario), validator, modes)


def _script_scenario(
    folder: Path,
    script: Path,
    metrics: Sequence[str],
    test_command: str | None,
    prepare: Sequence[str],
    artefacts: Sequence[str],
    timeout: float | None,
) -> Path:
    import tomli_w

    task: dict[str, Any] = {"prepare": list(prepare), "artefacts": list(artefacts)}
    if test_command is not None:
        task["test_command"] = test_command
    table: dict[str, Any] = {
        "mode": "script",
        "command": str(script.absolute()),
        "metrics": list(metrics),
    }
    if timeout is not None:
        table["timeout"] = timeout
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scenario.toml"
    path.write_text(tomli_w.dumps({"task": task, "validation": [table]}), encoding="utf-8")
    return path


def _validate(
    built: RunBuilder | Path | str,
    scenario_path: Path,
    name: str | None,
    modes: Mapping[str, Mode] | None,
) -> ValidatorResult:
    import json

    from trysquare.authoring import score_once
    from trysquare.runs import load_run
    from trysquare.scenario import load_scenario
    from trysquare.testing.builders import RunBuilder

    folder = built.path if isinstance(built, RunBuilder) else Path(built)
    run_file = folder if folder.name == "run.toml" else folder / "run.toml"
    scenario = load_scenario(scenario_path, modes)
    validation = scenario.validation(name) if name is not None else scenario.validations[0]
    run = load_run(run_file)
    validation.check_runs(scenario, [run])  # the refusals `check SCENARIO PATH` makes
    scored = score_once(scenario, run, validation)
    document = scored.document
    return ValidatorResult(
        metrics=document["metrics"],
        reasons=document["reasons"],
        state=document["state"],
        error=document["error"],
        stderr=scored.stderr,
        document=json.loads(json.dumps(document)),
        context=scored.context,
        clone_changes=scored.clone_changes,
    )


@pytest.fixture
def trysquare_run(tmp_path: Path) -> Callable[..., RunBuilder]:
    """Build a finished run under ``tmp_path/trysquare/runs/<run_id>``; returns its builder.

    Keywords are :func:`trysquare.testing.builders.build_run`'s: ``base`` (the
    etalon's files, required), ``changes``, ``deleted``, ``given``, ``commit``,
    ``response``, ``session``, ``cell``, ``repetition``, ``prompt``, ``model``.
    The run folder is ``.path``, the clone ``.repo.path``.
    """
    from trysquare.testing.builders import build_run

    def make(run_id: str = "r1", **options: Any) -> RunBuilder:
        return build_run(tmp_path / "trysquare" / "runs" / run_id, **options)

    return make


@pytest.fixture
def run_validator(tmp_path: Path) -> Callable[..., ValidatorResult]:
    """Score a built run with one validator: :func:`validate_run` (see its keywords)."""

    def run(built: RunBuilder | Path | str, **options: Any) -> ValidatorResult:
        options.setdefault("workdir", tmp_path / "trysquare" / "scenario")
        return validate_run(built, **options)

    return run
