"""``trysquare form ingest``: read a filled form back into each run's results.

Every entry is judged on its own: a refused one (a value that is not true or
false, an id the key does not know, a metric the form does not ask for, a
metric another validator measures) is reported with its reason and the rest
still land. A form fills only what nothing else produces; it never replaces a
measured value, and a corrected manual value keeps its predecessor in the
history.
"""

from __future__ import annotations

import datetime
import getpass
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from trysquare import context as contexts, plugins, results
from trysquare.errors import RunError, UsageError
from trysquare.modes import PIECES
from trysquare.lock import experiment_lock
from trysquare.runs import Experiment, Run
from trysquare.scenario import Scenario
from trysquare_form.keyfile import read_key
from trysquare_form.mode import FormValidation, ManualValue, form_validation, manual_values, outcome_for

__all__ = ["IngestReport", "Refusal", "default_by", "ingest_form", "read_form"]


@attrs.frozen
class Refusal:
    """One entry of the form that was not taken, and why."""

    entry: str  # e.g. "run.3f9a01bc.note_clear"
    reason: str

    def __str__(self) -> str:
        return f"{self.entry}: {self.reason}"


@attrs.frozen
class IngestReport:
    form: Path
    validation: str
    by: str
    merged: int  # values of the form now recorded that were not before (new or corrected)
    pending: int  # metrics of the form's runs still without a value
    refused: tuple[Refusal, ...]
    written: tuple[str, ...]  # ids of the runs whose result changed
    measures: Path
    states: Mapping[str, int]  # run states of the rebuilt measures.json
    unchanged: int = 0  # values of the form recorded already, exactly so (a form ingested again)

    @property
    def summary(self) -> str:
        # Said only when some are: a form ingested twice reads "0 merged, N unchanged".
        unchanged = f", {self.unchanged} unchanged" if self.unchanged else ""
        return f"{self.merged} merged{unchanged}, {self.pending} still pending, {len(self.refused)} refused"

    @property
    def exit_code(self) -> int:
        return 1 if self.refused else 0


def default_by() -> str | None:
    """Who fills the form when ``--by`` is not given: the login name, if the system knows it."""
    try:
        return getpass.getuser() or None
    except (OSError, KeyError, ImportError):
        return None


def read_form(path: Path) -> dict[str, Any]:
    """The parsed form, or one sentence naming the file and the line that does not parse."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such form") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: the form cannot be read ({error})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # tomllib's message ends "(at line N, column M)": the human is pointed at the line.
        raise UsageError(f"{path}: not valid TOML, nothing was ingested: {error}") from None


def ingest_form(
    scenario: Scenario,
    experiment: Experiment,
    form_path: Path,
    *,
    by: str,
    now: datetime.datetime | None = None,
) -> IngestReport:
    """Merge a filled form into the results of the runs it stands for; rebuild ``measures.json``.

    ``by`` names who filled it (recorded as provenance with ``now``, default the
    current UTC time). The key is read from the experiment folder; the form's
    validator is the one the key names.
    """
    if not by.strip():
        raise UsageError("--by: who filled the form cannot be empty")
    form_path = Path(form_path).absolute()
    document = read_form(form_path)
    key = read_key(experiment.root, form_path)
    form = form_validation(scenario, key.validation)
    at = (now or datetime.datetime.now(datetime.UTC)).isoformat(timespec="seconds")
    owners = scenario.declared_metrics
    runs_by_id = {run.id: run for run in experiment.runs}
    refused: list[Refusal] = []
    answers: dict[str, dict[str, bool]] = {}  # run id -> metric -> value

    for name in document:
        if name != "run":
            refused.append(Refusal(name, "outside any [run.<id>] table; write answers inside one"))
    tables = document.get("run", {})
    if not isinstance(tables, dict):
        refused.append(Refusal("run", "must hold [run.<id>] tables"))
        tables = {}
    for opaque, table in tables.items():
        where = f"run.{opaque}"
        entry = key.runs.get(opaque)
        if entry is None:
            refused.append(Refusal(where, "unknown id: this form's key has no such run"))
            continue
        if not isinstance(table, dict):
            refused.append(Refusal(where, "must be a table of answers"))
            continue
        run = runs_by_id.get(entry.id)
        if run is None:
            refused.append(Refusal(where, f"the run it stands for is no longer under {experiment.root}"))
            continue
        for metric, value in table.items():
            if metric in PIECES:
                continue  # the form's own lines, naming what was read
            reason = _refuse_entry(form, owners, run, metric, value)
            if reason is not None:
                refused.append(Refusal(f"{where}.{metric}", reason))
            else:
                answers.setdefault(run.id, {})[metric] = value

    merged = pending = unchanged = 0
    written: list[str] = []
    with experiment_lock(experiment.root, experiment.runs, command="form ingest"):
        for opaque in key.order:
            run = runs_by_id.get(key.runs[opaque].id)
            if run is None:
                continue
            previous = results.read_result(run, form.name)
            values = manual_values(previous)
            # Anything recorded without provenance was measured: never replaced.
            measured = {
                m for m, v in ((previous or {}).get("metrics") or {}).items()
                if m not in values and v is not None
            }
            changed = False
            merged_before, unchanged_before = merged, unchanged
            for metric, value in answers.get(run.id, {}).items():
                if metric in measured:
                    refused.append(Refusal(
                        f"run.{opaque}.{metric}",
                        "already measured for this run; a form never replaces a measured value",
                    ))
                    continue
                recorded = values.get(metric)
                if recorded is None or recorded.value != value or type(recorded.value) is not bool:
                    values[metric] = ManualValue(value=value, by=by, at=at)
                    changed = True
                    merged += 1
                else:
                    unchanged += 1
            pending += sum(1 for m in form.metrics if m not in values)
            if changed:
                try:
                    _record(scenario, run, form, values, previous)
                except OSError as error:
                    # This run's folder refused the write (a symlink, a full disk): its
                    # answers are refused by name, the other runs' are recorded.
                    refused.append(Refusal(f"run.{opaque}", f"not recorded: {error}"))
                    merged, unchanged = merged_before, unchanged_before
                    continue
                written.append(run.id)

        current = {v.name: v.digest() for v in scenario.validations}
        rows = results.build_measures(scenario, experiment.runs, current)
        measures = results.write_measures(experiment.root, rows)
    states = {"valid": 0, "invalid": 0, "pending": 0}
    for row in rows:
        states[row["state"]] = states.get(row["state"], 0) + 1
    return IngestReport(
        form=form_path,
        validation=form.name,
        by=by,
        merged=merged,
        pending=pending,
        refused=tuple(refused),
        written=tuple(written),
        measures=measures,
        states=states,
        unchanged=unchanged,
    )


def _refuse_entry(
    form: FormValidation, owners: Mapping[str, Any], run: Run, metric: str, value: Any
) -> str | None:
    """Why one ``metric = value`` line cannot be taken, or ``None`` when it can."""
    if metric not in form.metrics:
        owner = owners.get(metric)
        if owner is None:
            return f"unknown metric: the form '{form.name}' asks for {', '.join(form.metrics)}"
        recorded = ((results.read_result(run, owner.name) or {}).get("metrics") or {})
        seen = f" (recorded: {_show(recorded[metric])})" if metric in recorded else ""
        return (
            f"'{metric}' is measured by validator '{owner.name}'{seen}; "
            "a form fills only what nothing else produces"
        )
    if not isinstance(value, bool):
        return f"expected true or false, not {_describe(value)}"
    return None


def _record(
    scenario: Scenario,
    run: Run,
    form: FormValidation,
    values: Mapping[str, ManualValue],
    previous: Mapping[str, Any] | None,
) -> None:
    outcome = outcome_for(form, values)
    document = results.result_document(
        form,
        outcome,
        digest=form.digest(),
        context_digest=_context_digest(scenario, run, form, previous),
        duration=0.0,
    )
    results.write_result(run, form.name, document, None)  # the replaced result goes to history
    plugins.observe_outcome(run, form, outcome)  # an observer that raises is a warning


def _context_digest(
    scenario: Scenario, run: Run, form: FormValidation, previous: Mapping[str, Any] | None
) -> str | None:
    """The digest ``validate`` would compute, so that it sees this result as up to date.

    The context is archived as ``validate`` archives it. A run whose facts cannot
    be gathered keeps the previous digest (or none): ``validate`` then runs the
    form again, which keeps every value.
    """
    try:
        facts = contexts.gather_facts(run)
        context = contexts.build_context(scenario, run, form, facts)
    except RunError:
        return (previous or {}).get("context_digest")
    text = contexts.dump_context(context)
    path = results.archive_dir(run, form.name) / "context.json"
    try:
        unchanged = path.read_text(encoding="utf-8") == text
    except OSError:
        unchanged = False
    if not unchanged:
        from trysquare import plugin_api

        plugin_api.write_text(path, text)
    return contexts.context_digest(text, context, root=run.dir, validation=form)


def _show(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "unjudged"}[value]
    return repr(value)


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"
