"""``trysquare form export``: write the blind, shuffled form a human fills.

The form holds one ``[run.<opaque id>]`` table per run, in an order and under
ids drawn from a keyed hash of the seed and the run (the key: a secret kept in
``<PATH>/.trysquare/forms/``, never printed), so the same seed over the same
runs with the same secret gives the same bytes back, while the form, the seed
and the run folders' names together say nothing about which table is which run. The pieces a human reads are copied beside the form
(``FORM.d/<opaque id>/``) so that no path names a run or its cell; the key back
to the runs goes under the experiment folder (:mod:`trysquare_form.keyfile`).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import attrs
from trysquare import api
from trysquare.api import (
    Experiment,
    Run,
    RunError,
    RunFacts,
    Scenario,
    UsageError,
    gather_facts,
    read_result,
)

from trysquare_form.keyfile import FormKey, KeyEntry, form_secret, forms_lock, key_path, write_key
from trysquare_form.mode import FormValidation, form_validation, manual_values

__all__ = ["ExportResult", "ExportedRun", "export_form", "pieces_folder"]

# Beside each piece folder, so that a re-export only ever deletes a folder it made.
MARKER = ".trysquare-form"
# What a piece is called beside the form. The prompt is renamed: its original
# name is the run's business, and one name for every run says nothing.
PIECE_FILES = {"diff": "diff.patch", "prompt": "prompt.md", "response": "response.md"}


@attrs.frozen
class ExportedRun:
    """One table of the form: the opaque id, the run behind it, its unfilled metrics."""

    opaque: str
    run: Run
    pending: tuple[str, ...]


@attrs.frozen
class ExportResult:
    form: Path
    pieces: Path  # the FORM.d folder
    key: Path
    seed: int
    validation: str
    runs: tuple[ExportedRun, ...]  # in the form's order
    skipped: tuple[RunError, ...]  # runs whose pieces could not be built
    blinding: str  # one line: blind, or which piece reveals the cell


def pieces_folder(form: Path) -> Path:
    """``FORM.d`` beside ``FORM.toml``."""
    return form.with_name(f"{form.stem}.d")


def export_form(
    scenario: Scenario,
    experiment: Experiment,
    out: Path,
    *,
    seed: int | None = None,
    validation: str | None = None,
    include_filled: bool = False,
    force: bool = False,
) -> ExportResult:
    """Write the form of ``validation`` (default: the scenario's first form) to ``out``.

    Only runs with a metric still unfilled get a table, unless ``include_filled``:
    then every run does, its recorded values shown in comments so they can be
    corrected. ``seed`` defaults to a random one; it is recorded in the key, not
    in the form.
    Refuses (:class:`UsageError`) to replace an existing form unless ``force``,
    since a form may hold a human's unsaved answers.
    """
    form = form_validation(scenario, validation)
    out = Path(out).absolute()
    folder = pieces_folder(out)
    if out.exists() and not force:
        raise UsageError(f"{out} exists already and may hold answers; pass --force to replace it")
    if folder.exists() and not (folder / MARKER).exists() and any(folder.iterdir()):
        raise UsageError(
            f"{folder} exists and was not written by trysquare form export; move it away"
        )

    chosen: list[tuple[Run, tuple[str, ...]]] = []
    for run in sorted(experiment.runs, key=lambda r: r.id):
        filled = manual_values(read_result(run, form.name))
        pending = tuple(m for m in form.metrics if m not in filled)
        if pending or include_filled:
            chosen.append((run, pending))
    if not chosen:
        raise UsageError(
            f"nothing to fill under {experiment.root}: every run has its '{form.name}' metrics "
            "filled (--all exports them again, to correct them)"
        )

    facts: dict[str, RunFacts] = {}
    skipped: list[RunError] = []
    for run, _ in chosen:
        try:
            facts[run.id] = gather_facts(run)
        except RunError as error:
            skipped.append(error)
    chosen = [(run, pending) for run, pending in chosen if run.id in facts]
    if not chosen:
        raise UsageError(f"no run under {experiment.root} could be read to build a form")

    if seed is None:
        seed = secrets.randbelow(2**32)
    with forms_lock(experiment.root):
        secret = form_secret(experiment.root)
        tables = _shuffle(chosen, seed, {run.id for run in experiment.runs}, secret)
        form_id = _form_id(secret, seed, out)
        return _write_export(
            scenario, experiment, form, out, folder, seed, tables, facts, skipped, form_id
        )


def _form_id(secret: bytes, seed: int, out: Path) -> str:
    """This export's own id: its key's name, written in the form. The same seed to the same
    file gives the same id (the same form back); another file, another id, another key."""
    message = f"form\0{seed}\0{out}".encode("utf-8", errors="surrogatepass")
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", out.stem)[:48].lstrip(".") or "form"
    return f"{stem}-{hmac.new(secret, message, hashlib.sha256).hexdigest()[:12]}"


def _write_export(
    scenario: Scenario,
    experiment: Experiment,
    form: FormValidation,
    out: Path,
    folder: Path,
    seed: int,
    tables: list[ExportedRun],
    facts: dict[str, RunFacts],
    skipped: list[RunError],
    form_id: str,
) -> ExportResult:
    out.parent.mkdir(parents=True, exist_ok=True)
    _sweep_beside(out, folder)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{folder.name}."))
    # To the microsecond: of two forms exported within a second, the later is still later.
    exported = datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")
    try:
        (staging / MARKER).write_text("written by trysquare form export\n", encoding="utf-8")
        shown: dict[str, dict[str, str]] = {}
        for table in tables:
            shown[table.opaque] = _copy_pieces(
                form, table.run, facts[table.run.id], staging / table.opaque
            )
        key = key_path(experiment.root, out, form_id)
        write_key(
            key,
            FormKey(
                form=out.name,
                scenario=str(scenario.path),
                validation=form.name,
                seed=seed,
                order=tuple(t.opaque for t in tables),
                runs={
                    t.opaque: KeyEntry(
                        id=t.run.id,
                        dir=_relative(t.run.dir, experiment.root),
                        cell=t.run.cell,
                    )
                    for t in tables
                },
                form_id=form_id,
                exported=exported,
                pieces=shown,
            ),
        )
        _swap_folder(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    # The form last: a form on disk always has its pieces and its key.
    api.write_text(out, render_form(scenario, form, tables, seed, out, facts, form_id=form_id))
    return ExportResult(
        form=out,
        pieces=folder,
        key=key,
        seed=seed,
        validation=form.name,
        runs=tuple(tables),
        skipped=tuple(skipped),
        blinding=blinding_line(form, [t.run for t in tables]),
    )


def _shuffle(
    chosen: Sequence[tuple[Run, tuple[str, ...]]], seed: int, run_ids: set[str], secret: bytes
) -> list[ExportedRun]:
    # A seeded RNG over sorted run ids can be replayed by anyone holding the seed
    # (the old form printed it); an HMAC keyed by the secret cannot. Same secret,
    # seed and runs -> same order and ids.
    def draw(label: str, run: Run) -> str:
        message = f"{label}\0{seed}\0{run.id}".encode("utf-8", errors="surrogatepass")
        return hmac.new(secret, message, hashlib.sha256).hexdigest()

    order = sorted(chosen, key=lambda item: (draw("order", item[0]), item[0].id))
    used: set[str] = set()
    tables = []
    for run, pending in order:
        attempt = 0
        opaque = draw("id", run)[:8]
        while opaque in used or opaque in run_ids:
            attempt += 1
            opaque = draw(f"id{attempt}", run)[:8]
        used.add(opaque)
        tables.append(ExportedRun(opaque=opaque, run=run, pending=pending))
    return tables


def _copy_pieces(form: FormValidation, run: Run, facts: RunFacts, target: Path) -> dict[str, str]:
    """Copy the pieces the human reads; the sha256 of each, as the key records it."""
    target.mkdir(parents=True)
    digests = {}
    for piece in form.pieces:
        data = piece_bytes(piece, run, facts)
        (target / PIECE_FILES[piece]).write_bytes(data)
        digests[piece] = hashlib.sha256(data).hexdigest()
    return digests


def piece_bytes(piece: str, run: Run, facts: RunFacts) -> bytes:
    """The bytes of ``piece`` as a form shows it (a run that left no final response: empty,
    and the form says so)."""
    source = {"diff": facts.diff, "prompt": run.prompt, "response": facts.response}[piece]
    return source.read_bytes() if source is not None else b""


def _sweep_beside(out: Path, folder: Path, *, older_than: float = 60.0) -> None:
    """Remove what a killed export of this form left beside it: a temporary form file, a
    staging or retired pieces folder (one of ours: it holds the marker). Only once a minute
    old: another export of the same form may be writing them now."""
    from trysquare.api import sweep_temps

    sweep_temps(out.parent, of=out.name, older_than=older_than)
    before = time.time() - older_than
    try:
        leftovers = [
            entry
            for entry in out.parent.iterdir()
            if entry.name.startswith(f".{folder.name}.")
            and not entry.is_symlink()
            and entry.is_dir()
        ]
    except OSError:
        return
    for entry in leftovers:
        try:
            if (entry / MARKER).is_file() and entry.stat().st_mtime < before:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue


def _swap_folder(staging: Path, folder: Path) -> None:
    """Put ``staging`` where ``folder`` is, so the old pieces are never half replaced."""
    if folder.exists():
        retired = folder.with_name(f".{folder.name}.old-{os.getpid()}")
        os.replace(folder, retired)
        os.replace(staging, folder)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(staging, folder)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _quote(text: str) -> str:
    # A JSON string without ASCII escaping is a valid TOML basic string.
    return json.dumps(text, ensure_ascii=False)


def render_form(
    scenario: Scenario,
    form: FormValidation,
    tables: Sequence[ExportedRun],
    seed: int,
    out: Path,
    facts: dict[str, RunFacts],
    *,
    form_id: str | None = None,
) -> str:
    """The form's text. Every prose line is a comment, so it parses at any point."""
    folder = pieces_folder(out).name
    example = form.metrics[0]
    lines = [
        f"# trysquare form: the metrics of validator '{form.name}' (scenario '{scenario.name}'),",
        "# filled by hand.",
        "# Exporting the same runs again with the same --seed gives this same form back.",
        "#",
        "# Each [run.<id>] table below is one run, in a shuffled order, under an id that says",
        "# nothing about it. Read the pieces it names (paths relative to this file), then",
        "# answer each metric on a line of its own inside that table, for example:",
        f"#     {example} = true",
        "# Answers are true or false. A metric left out stays pending: fill part of the form,",
        "# ingest it, and come back to the rest later. Leave the piece lines as they are.",
        "#",
        f"# Metrics: {', '.join(form.metrics)}",
        "#",
        f"# Then: trysquare form ingest SCENARIO PATH {out.name} [--by NAME]",
        "",
    ]
    if form_id is not None:
        # Which export this is (its key's name): leave it as it is.
        lines += [f"form = {_quote(form_id)}", ""]
    for table in tables:
        lines.append(f"[run.{table.opaque}]")
        for piece in form.pieces:
            lines.append(f"{piece} = {_quote(f'{folder}/{table.opaque}/{PIECE_FILES[piece]}')}")
        if "response" in form.pieces and facts[table.run.id].response is None:
            lines.append("# (this run left no final response: its response.md is empty)")
        for metric in form.metrics:
            hint = f"# {metric} = true|false"
            if metric not in table.pending:
                recorded = manual_values(read_result(table.run, form.name))[metric].value
                hint += f"    (recorded: {json.dumps(recorded)}; write it to correct it)"
            lines.append(hint)
        lines.append("")
    return "\n".join(lines)


def blinding_line(form: FormValidation, runs: Sequence[Run]) -> str:
    """Whether the pieces let whoever fills the form tell the cells apart.

    Only the prompt is an input of the run: when it differs between cells it
    names the treatment, so the form is only partially blind, and says so.
    """
    cells = sorted({run.cell for run in runs})
    if "prompt" in form.pieces and len(cells) > 1:
        prompts: dict[str, set[bytes]] = {}
        for run in runs:
            prompts.setdefault(run.cell, set()).add(run.prompt.read_bytes())
        if len({frozenset(p) for p in prompts.values()}) > 1:
            return (
                "! form is only partially blind: prompt varies between cells, "
                "so whoever fills the form can identify the treatment"
            )
    count = f"{len(cells)} cell{'s' if len(cells) != 1 else ''}"
    return f"form: blind over {count} (pieces: {', '.join(form.pieces)})"
