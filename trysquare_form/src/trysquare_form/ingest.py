"""``trysquare form ingest``: read a filled form back into each run's results.

Every entry is judged on its own: a refused one (a value that is not true or
false, an id the key does not know, a metric the form does not ask for, a
metric another validator measures) is reported with its reason and the rest
still land. A form fills only what nothing else produces; it never replaces a
measured value, and a corrected manual value keeps its predecessor in the
history.
"""

from __future__ import annotations

import codecs
import datetime
import getpass
import hashlib
import os
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from trysquare import api
from trysquare.api import PIECES, Experiment, Run, RunError, Scenario, UsageError, experiment_lock

from trysquare_form.export import piece_bytes
from trysquare_form.keyfile import FormKey, form_id_of, forms_folder, forms_lock, read_key
from trysquare_form.mode import (
    FormValidation,
    ManualValue,
    form_validation,
    manual_values,
    outcome_for,
)

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


# A form is a human's TOML file: a few kilobytes a run. Anything past this is no form.
MAX_FORM_BYTES = 16 * 1024 * 1024
# A value or a name from the form is shown up to this many characters, then cut with its size.
SHOWN_CHARS = 80


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was (never a 20 MB echo)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def read_form(path: Path) -> dict[str, Any]:
    """The parsed form, or one sentence naming the file and the line that does not parse.

    Read as a regular file only (a FIFO or a device is refused without waiting on it),
    at most :data:`MAX_FORM_BYTES`; a UTF-8 byte-order mark is accepted, any other is named.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such form") from None
    except OSError as error:
        raise UsageError(f"{path}: the form cannot be read ({error.strerror or error})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}
            raise UsageError(
                f"{path}: is {kind.get(stat.S_IFMT(mode), 'a device')}, not a file; a form is "
                "read only from a regular file"
            )
        data = b""
        while len(data) <= MAX_FORM_BYTES:
            chunk = os.read(fd, MAX_FORM_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as error:
        raise UsageError(f"{path}: the form cannot be read ({error.strerror or error})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FORM_BYTES:
        raise UsageError(
            f"{path}: is larger than {MAX_FORM_BYTES // (1024 * 1024)} MiB, too large for a form; "
            "nothing was ingested"
        )
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]  # a UTF-8 byte-order mark some editors write
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise UsageError(
            f"{path}: starts with a UTF-16 byte-order mark; save the form as UTF-8, nothing was ingested"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(
            f"{path}: is not UTF-8 (byte {error.start}); save the form as UTF-8, nothing was ingested"
        ) from None
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
    accept_stale: bool = False,
) -> IngestReport:
    """Merge a filled form into the results of the runs it stands for; rebuild ``measures.json``.

    ``by`` names who filled it (recorded as provenance with ``now``, default the
    current UTC time, and with the form's name, export id and export time). The key
    is read from the experiment folder; the form's validator is the one the key names.
    An answer about pieces that changed since the export, or older than an answer
    recorded since, is refused, unless ``accept_stale``: then it is taken and its
    provenance says why it would have been refused.
    """
    if not by.strip():
        raise UsageError("--by: who filled the form cannot be empty")
    form_path = Path(form_path).absolute()
    document = read_form(form_path)
    form_id = form_id_of(document)
    if forms_folder(experiment.root).is_dir():
        with forms_lock(experiment.root):
            pass  # a killed export's temporary files there go, when no other writer is at work
    key = read_key(experiment.root, form_path, form_id)
    form = form_validation(scenario, key.validation)
    at = (now or datetime.datetime.now(datetime.UTC)).isoformat(timespec="seconds")
    owners = scenario.declared_metrics
    runs_by_id = {run.id: run for run in experiment.runs}
    refused: list[Refusal] = []
    answers: dict[str, dict[str, bool]] = {}  # run id -> metric -> value

    for name in document:
        if name == "form" and form_id is not None:
            continue  # which export this is
        if name != "run":
            refused.append(
                Refusal(cut(name), "outside any [run.<id>] table; write answers inside one")
            )
    tables = document.get("run", {})
    if not isinstance(tables, dict):
        refused.append(Refusal("run", "must hold [run.<id>] tables"))
        tables = {}
    for opaque, table in tables.items():
        where = f"run.{cut(opaque)}"
        entry = key.runs.get(opaque)
        if entry is None:
            refused.append(Refusal(where, "unknown id: this form's key has no such run"))
            continue
        if not isinstance(table, dict):
            refused.append(Refusal(where, "must be a table of answers"))
            continue
        run = runs_by_id.get(entry.id)
        if run is None:
            refused.append(
                Refusal(where, f"the run it stands for is no longer under {experiment.root}")
            )
            continue
        for metric, value in table.items():
            if metric in PIECES:
                continue  # the form's own lines, naming what was read
            reason = _refuse_entry(form, owners, run, metric, value)
            if reason is not None:
                refused.append(Refusal(f"{where}.{cut(metric)}", reason))
            else:
                answers.setdefault(run.id, {})[metric] = value

    merged = pending = unchanged = 0
    written: list[str] = []
    with experiment_lock(experiment.root, experiment.runs, command="form ingest"):
        for opaque in key.order:
            run = runs_by_id.get(key.runs[opaque].id)
            if run is None:
                continue
            previous = api.read_result(run, form.name)
            values = manual_values(previous)
            # Anything recorded without provenance was measured: never replaced.
            measured = {
                m
                for m, v in ((previous or {}).get("metrics") or {}).items()
                if m not in values and v is not None
            }
            changed = False
            merged_before, unchanged_before = merged, unchanged
            given = answers.get(run.id, {})
            moved = _moved_pieces(key, opaque, form, run) if given else None
            for metric, value in given.items():
                if metric in measured:
                    refused.append(
                        Refusal(
                            f"run.{opaque}.{metric}",
                            "already measured for this run; a form never replaces a measured value",
                        )
                    )
                    continue
                recorded = values.get(metric)
                if (
                    recorded is not None
                    and recorded.value == value
                    and type(recorded.value) is bool
                ):
                    unchanged += 1
                    continue
                problems = [moved] if moved else []
                newer = _newer_answer(recorded, key, form_id)
                if newer:
                    problems.append(newer)
                if problems and not accept_stale:
                    refused.append(
                        Refusal(
                            f"run.{opaque}.{metric}",
                            f"{'; '.join(problems)}: not taken (--accept-stale takes it, recorded as such)",
                        )
                    )
                    continue
                values[metric] = ManualValue(
                    value=value,
                    by=by,
                    at=at,
                    form=form_path.name,
                    form_id=form_id or "",
                    exported=key.exported or "",
                    accepted="; ".join(problems),
                )
                changed = True
                merged += 1
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
        rows = api.build_measures(scenario, experiment.runs, current)
        measures = api.write_measures(experiment.root, rows)
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


def _moved_pieces(key: FormKey, opaque: str, form: FormValidation, run: Run) -> str | None:
    """Why the pieces the human read are no longer the run's, or ``None`` when they still are
    (or a key from before pieces were recorded cannot tell)."""
    shown = key.pieces.get(opaque)
    if not shown:
        return None
    try:
        facts = api.gather_facts(run)
        now = {piece: hashlib.sha256(piece_bytes(piece, run, facts)).hexdigest() for piece in shown}
    except (RunError, OSError) as error:
        why = error.message if isinstance(error, RunError) else (error.strerror or str(error))
        return f"the run's pieces cannot be read to check them against the form's ({why})"
    changed = [piece for piece in sorted(shown) if now[piece] != shown[piece]]
    if not changed:
        return None
    return (
        f"the run's {', '.join(changed)} changed since this form was exported ({key.exported}): "
        "the answer is about what the human read then"
    )


def _newer_answer(recorded: ManualValue | None, key: FormKey, form_id: str | None) -> str | None:
    """Why ``recorded`` is newer than this form's export, or ``None``. An answer from this
    same export (the same form ingested again, corrected) is never in the way."""
    if recorded is None or key.exported is None:
        return None
    if form_id is not None and recorded.form_id == form_id:
        return None
    # Newer: it came from a form exported after this one, or it was recorded after this
    # form was exported (so whoever filled this form never saw it).
    try:
        exported = datetime.datetime.fromisoformat(key.exported)
        newer = datetime.datetime.fromisoformat(recorded.at) > exported or bool(
            recorded.exported and datetime.datetime.fromisoformat(recorded.exported) > exported
        )
    except (ValueError, TypeError):
        newer = False  # an answer from before times were comparable
    if not newer:
        return None
    source = f" from {recorded.form}" if recorded.form else ""
    return (
        f"a newer answer is recorded ({_show(recorded.value)} by {recorded.by} at {recorded.at}"
        f"{source}) than this form's export ({key.exported})"
    )


def _refuse_entry(
    form: FormValidation, owners: Mapping[str, Any], run: Run, metric: str, value: Any
) -> str | None:
    """Why one ``metric = value`` line cannot be taken, or ``None`` when it can."""
    if metric not in form.metrics:
        owner = owners.get(metric)
        if owner is None:
            return f"unknown metric: the form '{form.name}' asks for {', '.join(form.metrics)}"
        recorded = (api.read_result(run, owner.name) or {}).get("metrics") or {}
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
    document = api.result_document(
        form,
        outcome,
        digest=form.digest(),
        context_digest=_context_digest(scenario, run, form, previous),
        duration=0.0,
    )
    api.write_result(run, form.name, document, None)  # the replaced result goes to history
    api.observe_outcome(run, form, outcome)  # an observer that raises is a warning


def _context_digest(
    scenario: Scenario, run: Run, form: FormValidation, previous: Mapping[str, Any] | None
) -> str | None:
    """The digest ``validate`` would compute, so that it sees this result as up to date.

    The context is archived as ``validate`` archives it. A run whose facts cannot
    be gathered keeps the previous digest (or none): ``validate`` then runs the
    form again, which keeps every value.
    """
    try:
        facts = api.gather_facts(run)
        context = api.build_context(scenario, run, form, facts)
    except RunError:
        return (previous or {}).get("context_digest")
    text = api.dump_context(context)
    path = api.archive_dir(run, form.name) / "context.json"
    try:
        unchanged = path.read_text(encoding="utf-8") == text
    except OSError:
        unchanged = False
    if not unchanged:
        api.write_text(path, text)
    return api.context_digest(text, context, root=run.dir, validation=form)


def _show(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "unjudged"}[value]
    return repr(value)


def _describe(value: Any) -> str:
    if isinstance(value, str):
        if len(value) > SHOWN_CHARS:
            return f"the string {value[:SHOWN_CHARS]!r}... ({len(value):,} characters)"
        return f"the string {value!r}"
    if isinstance(value, (int, float)):
        try:
            return f"the number {cut(str(value))}"
        except ValueError:  # an integer past Python's 4300-digit conversion limit
            return "a number of more than 4300 digits"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"
