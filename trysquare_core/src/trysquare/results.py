"""What trysquare records beside each run, and ``measures.json`` rebuilt from it.

(It is over 600 lines because a result is written, signed, verified and read back into
``measures.json`` by the one module that knows its file.)

``validation/<name>.json`` holds the current result; every result it replaced
is appended to ``validation/<name>.history.jsonl``, so nothing is ever lost.

Only what trysquare wrote counts. Every result carries a ``signature``: an
HMAC-SHA256, with this machine's key (:mod:`trysquare._signing`, kept outside every
run), over the whole document and the run it belongs to (id, cell, repetition) and
the validator's name. A history line is a replaced result as it was, signature
included. A result whose signature does not verify here — planted before the first
validate, edited between two, copied from another run or from another machine — is
never reused and never read as a measurement: :func:`load_result` refuses it
(:class:`UnsignedResult`), naming the run and the validator.
"""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from trysquare import _atomic, _signing
from trysquare._digests import sha256
from trysquare._measure_rows import Shapes
from trysquare.errors import RunError
from trysquare.modes import Outcome, Validation
from trysquare.runs import RUN_FILE, Run
from trysquare.scenario import Scenario

__all__ = [
    "MEASURES_FILE",
    "REPLACING_ANY",
    "SIGNATURE",
    "Identified",
    "ReplacedChanged",
    "UnreadableResult",
    "UnsignedResult",
    "adopt_result",
    "build_measures",
    "hold_measures",
    "iter_measures",
    "load_result",
    "read_result",
    "result_path",
    "sign_result",
    "signature_problem",
    "unsigned_sentence",
    "unusable_row",
    "write_result",
    "write_result_digested",
]

MEASURES_FILE = "measures.json"
SIGNATURE = "signature"  # the key of a result's MAC (DESIGN §9: results are signed)


def result_path(run: Run, name: str) -> Path:
    return run.validation_dir / f"{name}.json"


def archive_dir(run: Run, name: str) -> Path:
    """``validation/<name>/``: where validator ``name`` keeps its evidence and context."""
    return run.validation_dir / name


class UnreadableResult(Exception):
    """A result file exists but cannot be trusted: it is never read as a measurement."""

    # What the user does about it: a damaged file is replaced by the next validate;
    # a planted symlink must go first.
    remedy = "run validate again"


class UnsignedResult(UnreadableResult):
    """A well-formed result whose signature does not verify here: trysquare did not write it
    (on this machine, for this run). Never reused, never a measurement; named."""

    remedy = "run validate to compute it again"


class Identified(Protocol):
    """Whose result it is, as a signature binds it: a :class:`~trysquare.runs.Run`, or a
    ``measures.json`` row's ``id``, ``cell`` and ``repetition`` (the viewer's)."""

    @property
    def id(self) -> str: ...
    @property
    def cell(self) -> str: ...
    @property
    def repetition(self) -> int | None: ...


def _signed_part(run: Identified, name: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """What a result's MAC covers: every key but the signature, and whose result it is."""
    return {
        "kind": "trysquare result",
        "run": {"id": run.id, "cell": run.cell, "repetition": run.repetition},
        "validator": name,
        "result": {k: v for k, v in document.items() if k != SIGNATURE},
    }


def _signed_text(run: Identified, name: str, body_text: str) -> str:
    """:func:`_signing.canonical` of :func:`_signed_part` for a document whose canonical text
    (signature left out) is ``body_text``: the same text, the body not encoded again (sorted
    keys: ``kind``, ``result``, ``run``, ``validator``)."""
    canonical = _signing.canonical
    whose = canonical({"id": run.id, "cell": run.cell, "repetition": run.repetition})
    return (
        f'{{"kind":"trysquare result","result":{body_text},"run":{whose},'
        f'"validator":{canonical(name)}}}'
    )


def sign_result(run: Identified, name: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` with this machine's signature for ``run``'s result of validator ``name``
    (any signature it held is replaced). The same document always gets the same signature.
    """
    body = {k: v for k, v in document.items() if k != SIGNATURE}
    text = _signing.canonical(body)
    # The signing key is never written where it could be read back (a reason quoting it).
    # Its text (hex) is in the canonical text wherever a string holds it: scrubbed then.
    if _signing.names_the_key(text):
        body = _signing.scrub(body)
        text = _signing.canonical(body)
    mac = _signing.mac_text(_signed_text(run, name, text))
    return {**body, SIGNATURE: {"key": _signing.fingerprint(), "mac": mac}}


def signature_problem(run: Identified, name: str, document: Mapping[str, Any]) -> str | None:
    """Why ``document`` is not a result trysquare wrote here for ``run`` × ``name``; ``None`` if
    its signature verifies."""
    found = document.get(SIGNATURE)
    if not isinstance(found, dict) or not isinstance(found.get("mac"), str):
        return "it carries no signature"
    if found.get("key") != _signing.fingerprint():
        return "it was signed with another key: on another machine, or before this key was made"
    if not _signing.verifies(found["mac"], _signed_part(run, name, document)):
        return "it was changed after trysquare wrote it, or written for another run"
    return None


def unsigned_sentence(run: Run, name: str, why: str) -> str:
    """One sentence naming the run and the validator of a result not signed here."""
    return f"{run.label}: the result of validator '{name}' is not signed here ({why})"


def adopt_result(run: Run, name: str) -> str | None:
    """Sign ``run``'s result of validator ``name`` here if it is a well-formed result that is not
    (``trysquare trust``: the user vouches trysquare wrote it, elsewhere or before signing);
    return why it was not signed here, or ``None`` when it was (or there is none).

    The result as it was goes to the history, as any replaced result does.
    :class:`UnreadableResult` when it is damaged (nothing to vouch for).
    """
    try:
        load_result(run, name)
    except UnsignedResult:
        pass
    else:
        return None
    raw = _atomic.read_bytes(result_path(run, name), root=run.dir)
    document = parse_result(raw, result_path(run, name))
    why = signature_problem(run, name, document)
    if why is not None:
        write_result(run, name, document, None)
    return why


def read_result(run: Run, name: str) -> dict[str, Any] | None:
    """The recorded result, or ``None`` when there is none or it cannot be trusted.

    A damaged file reads as no result here, so that ``validate`` runs that
    validator again (the damaged file goes to the history); :func:`run_row`
    reports it.
    """
    try:
        return load_result(run, name)
    except UnreadableResult:
        return None


def load_result(run: Run, name: str) -> dict[str, Any] | None:
    """The recorded result (its signature checked and left out); ``None`` when there is none;
    :class:`UnreadableResult` when damaged, :class:`UnsignedResult` when trysquare did not sign
    it here."""
    validation = run.validation_dir
    path = validation / f"{name}.json"  # result_path(run, name)
    try:
        # The run folder as the parent of the path just made: a run keeps its folder as text,
        # and a report reads every run's results (no second path parsed a result).
        raw = _atomic.read_bytes(path, root=validation.parent)
    except FileNotFoundError:
        return None
    except _atomic.UnsafePath as unsafe:
        # Never read through the agent's symlink (a result pointing at /etc/passwd).
        refused = UnreadableResult(str(unsafe))
        refused.remedy = "remove the link, then run validate again"
        raise refused from None
    except OSError as error:
        raise UnreadableResult(f"{path} cannot be read ({type(error).__name__})") from None
    document = parse_result(raw, path)
    why = signature_problem(run, name, document)
    if why is not None:
        raise UnsignedResult(unsigned_sentence(run, name, why))
    document.pop(SIGNATURE)  # checked: what it says is what readers want
    return document


def parse_result(raw: bytes, path: Path) -> dict[str, Any]:
    """A result file's bytes as a result; :class:`UnreadableResult` (naming ``path``) when damaged."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise UnreadableResult(f"{path} cannot be read ({type(error).__name__})") from None
    problem = _shape_problem(value)
    if problem:
        raise UnreadableResult(f"{path} is not a trysquare result ({problem})")
    return value


def _shape_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "not a JSON object"
    if value.get("state") not in ("valid", "invalid", "pending"):
        return "no state valid, invalid or pending"
    if not isinstance(value.get("metrics"), dict):
        return "'metrics' is not an object"
    reasons = value.get("reasons", {})
    if not isinstance(reasons, dict) or not all(isinstance(r, str) for r in reasons.values()):
        return "'reasons' is not an object of strings"
    return None


def result_document(
    validation: Validation,
    outcome: Outcome,
    *,
    digest: str,
    context_digest: str | None,
    duration: float,
) -> dict[str, Any]:
    """The result file's document for ``outcome`` (unsigned: :func:`write_result` signs it)."""
    document: dict[str, Any] = {
        "metrics": dict(outcome.metrics),
        "reasons": dict(outcome.reasons),
        "state": outcome.state,
        "error": outcome.error,
        "validator": {"name": validation.name, "mode": validation.mode, "digest": digest},
        "context_digest": context_digest,
        "duration": round(duration, 6),
    }
    if outcome.provenance is not None:
        document["provenance"] = {k: dict(v) for k, v in outcome.provenance.items()}
    if outcome.notes:
        document["notes"] = list(outcome.notes)
    if outcome.usage is not None:
        document["usage"] = dict(outcome.usage)
    if outcome.kept_after is not None:
        document["kept_after"] = outcome.kept_after
    return document


def write_result(
    run: Run, name: str, document: Mapping[str, Any], stderr: bytes | None
) -> dict[str, Any]:
    """Record ``document`` signed (:func:`sign_result`), moving the result it replaces into the
    history first; return the document as written.

    Nothing is read or written through a symlink inside the run folder
    (:class:`trysquare._atomic.UnsafePath`, an ``OSError``, names the path). A
    kill between the history append and the replacement leaves the old result
    in place *and* as the history's last line; the next write sees that line
    and does not append it again, so the history never holds a duplicate.
    A ``stderr`` the file holds already is not written again.
    """
    return write_result_digested(run, name, document, stderr)[0]


class ReplacedChanged(Exception):
    """The result file a task was to replace is not the one planning read: something other
    than trysquare wrote it during validate (nothing was written)."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} was changed during validate by something other than trysquare")


REPLACING_ANY = b""  # ``replacing``: whatever the file holds is replaced (no sha256 is empty)


def write_result_digested(
    run: Run,
    name: str,
    document: Mapping[str, Any],
    stderr: bytes | None,
    *,
    replacing: bytes | None = REPLACING_ANY,
) -> tuple[dict[str, Any], bytes]:
    """:func:`write_result`, and the sha256 of the bytes the result file was given (what
    :class:`trysquare.result_guard.ResultWatch` holds the file to, not computed twice).

    ``replacing``: the sha256 the result file's bytes must have (``None``: there must be
    none), checked on the very bytes moved to the history; :class:`ReplacedChanged`, and
    nothing written, when they differ.
    """
    signed = sign_result(run, name, document)
    if stderr is not None:
        stderr = _signing.scrub_bytes(stderr)
    data = _atomic.encode(_atomic.dump_json(signed))
    # One walk to validation/ for the four files: this runs once per task.
    with _atomic.folder(run.validation_dir, root=run.dir) as folder:
        replaced = _read_if_there(folder, f"{name}.json")
        if replacing != REPLACING_ANY and replacing != (
            None if replaced is None else sha256(replaced).digest()
        ):
            raise ReplacedChanged(result_path(run, name))
        if replaced is not None:
            _append_once(folder, f"{name}.history.jsonl", replaced)
        if stderr is not None and not folder.holds(f"{name}.stderr", stderr):
            folder.write(f"{name}.stderr", stderr)
        folder.write(f"{name}.json", data)
    return signed, sha256(data).digest()


def write_with_history(
    path: Path, document: Any, history: Path, *, root: Path, compact: bool = False
) -> None:
    """Write ``document`` as JSON to ``path``, first appending the one it replaces to ``history``.

    Used for results and for a judge's transcripts; public as
    :func:`trysquare.api.write_with_history`. ``compact``: one line, not indented.
    """
    path, history = Path(path), Path(history)
    if history.parent == path.parent:
        with _atomic.folder(path.parent, root=root) as folder:
            _move_to_history(folder, path.name, history.name)
            folder.write(path.name, _atomic.encode(_atomic.dump_json(document, compact=compact)))
        return
    with _atomic.folder(path.parent, root=root) as folder:
        raw = _read_if_there(folder, path.name)
    if raw is not None:
        with _atomic.folder(history.parent, root=root) as elsewhere:
            _append_once(elsewhere, history.name, raw)
    _atomic.write_json(path, document, root=root, compact=compact)


def _move_to_history(folder: _atomic.Folder, name: str, history: str) -> None:
    """Append the file ``name`` holds (if any) to ``history``, both in ``folder``."""
    raw = _read_if_there(folder, name)
    if raw is not None:
        _append_once(folder, history, raw)


def _read_if_there(folder: _atomic.Folder, name: str) -> bytes | None:
    try:
        return folder.read(name)
    except FileNotFoundError:
        return None


def _append_once(folder: _atomic.Folder, history: str, raw: bytes) -> None:
    """Append the replaced document ``raw`` to ``history`` unless it is its last line already."""
    try:
        previous: Any = json.loads(raw)
    except (ValueError, RecursionError):
        previous = {"unreadable": raw.decode("utf-8", errors="replace")}
    # A kill between the append and the replacement leaves this line last already.
    folder.append_once(history, _atomic.json_line(previous))


def refuse_planted_links(run: Run, name: str) -> None:
    """Raise :class:`trysquare._atomic.UnsafePath` if a file ``name`` records is a symlink
    or a hard link (a file with another name elsewhere: a history line appended to it
    would land in that file).

    Checked before a validator runs, so a planted link costs no run (nor a paid
    verdict); the readers and the append refuse it again at write time whatever happens
    meanwhile.
    """
    for path in (
        result_path(run, name),
        run.validation_dir / f"{name}.history.jsonl",
        run.validation_dir / f"{name}.stderr",
    ):
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            raise _atomic.UnsafePath(path)
        _atomic.refuse_hard_link(info, path)


def run_row(
    scenario: Scenario, run: Run, current_digests: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """One row of ``measures.json``, from the run's recorded results."""
    return _read_row(scenario, run, current_digests, None)


def _read_row(
    scenario: Scenario, run: Run, current_digests: Mapping[str, str] | None, shapes: Shapes | None
) -> Any:
    """:func:`run_row`'s row; with ``shapes`` (a report's), held small (its containers may
    be shared with other rows: see :mod:`trysquare._measure_rows`)."""
    metrics: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    errors: list[dict[str, str]] = []
    pending: list[str] = []
    stale: list[str] = []
    spent: dict[str, dict[str, Any]] = {}
    invalid = False
    for validation in scenario.validations:
        try:
            result = load_result(run, validation.name)
        except UnreadableResult as damaged:
            # Never a measurement, never quietly pending: the run cannot be trusted as it is.
            invalid = True
            errors.append({"validator": validation.name, "error": f"{damaged}; {damaged.remedy}"})
            continue
        if result is None:
            pending.extend(validation.metrics)  # not validated yet
            continue
        usage = usage_of(result)
        if usage is not None:  # an invalid result's spending counts too
            spent[validation.name] = usage
        state = result.get("state")
        if state == "invalid":
            invalid = True
            errors.append({"validator": validation.name, "error": str(result.get("error"))})
            continue
        recorded = result["metrics"]
        # Metric names are kept once for all rows (a report holds 10,000 of them).
        for metric, value in recorded.items():
            metrics[sys.intern(metric)] = value
        for metric, reason in result.get("reasons", {}).items():
            reasons[sys.intern(metric)] = reason
        pending.extend(m for m in validation.metrics if m not in recorded)
        if current_digests is not None:
            digest = (result.get("validator") or {}).get("digest")
            if digest != current_digests.get(validation.name):
                stale.append(validation.name)
    state = "invalid" if invalid else ("pending" if pending else "valid")
    if shapes is not None and not stale and not spent:
        pending.sort()
        return shapes.row(
            run.id, run.cell, run.repetition, state, metrics, reasons, errors, pending
        )
    row = {
        "id": run.id,
        "cell": run.cell,
        "repetition": run.repetition,
        "state": state,
        "metrics": metrics,
        "reasons": reasons,
        "errors": errors,
        "pending": sorted(pending),
    }
    if stale:
        row["stale"] = sorted(stale)
    if spent:
        row["usage"] = spent
    return row


USAGE_COUNTS = ("requests", "input_tokens", "output_tokens", "cached_tokens")
USAGE_PRICES = ("price_input", "price_output")


def usage_of(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """A result's ``usage`` (what a paid validator spent), each value checked, or ``None``.

    trysquare writes it from what the provider reported; a value of the wrong
    kind (a damaged or planted file) reads as unknown (``None``), never as a
    count or a price, and never stops the report.
    """
    usage = result.get("usage")
    if not isinstance(usage, dict):
        return None
    clean: dict[str, Any] = {}
    for key in USAGE_COUNTS:
        value = usage.get(key)
        clean[key] = value if type(value) is int and value >= 0 else None
    for key in USAGE_PRICES:
        value = usage.get(key)
        # A bool is an int to Python, never a price; NaN fails the comparison too.
        if (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and 0 <= value < float("inf")
        ):
            clean[key] = float(value)
        else:
            clean[key] = None
    for key in ("provider", "model"):
        value = usage.get(key)
        clean[key] = value if isinstance(value, str) else None
    if usage.get("batch") is True:  # bought through a batch API, at its price
        clean["batch"] = True
    return clean


def unusable_row(error: RunError) -> dict[str, Any] | None:
    """The row of a run folder that names its cell but could not be used, or ``None``.

    Such a run is *invalid* in its cell, with the reason it could not be used:
    skipped silently, it would leave its cell's counts and "2 runs (2 invalid)"
    would hide a third (issue 14.7). A ``run.toml`` that does not even name a
    cell belongs to no cell; it is only reported as unreadable.
    """
    if error.run_dir is None:
        return None
    from trysquare._convert import read_toml

    try:  # read as discovery reads it: never through a FIFO or a device in a file's place
        data = read_toml(error.run_dir / RUN_FILE, error=RunError)
    except RunError:
        return None
    cell = data.get("cell")
    if not isinstance(cell, str) or not cell.strip():
        return None
    repetition = data.get("repetition")
    if not isinstance(repetition, int) or isinstance(repetition, bool):
        repetition = None
    run_id = (
        data.get("id") if isinstance(data.get("id"), str) and data.get("id") else error.run_dir.name
    )
    return {
        "id": run_id,
        "cell": cell,
        "repetition": repetition,
        "state": "invalid",
        "metrics": {},
        "reasons": {},
        "errors": [{"validator": None, "error": f"the run folder cannot be used: {error.message}"}],
        "pending": [],
        "unusable": True,
    }


def build_measures(
    scenario: Scenario,
    runs: Iterable[Run],
    current_digests: Mapping[str, str] | None = None,
    *,
    unusable: Iterable[RunError] = (),
) -> list[dict[str, Any]]:
    """Every run's row; ``unusable`` run folders that name a cell count there as invalid."""
    return list(iter_measures(scenario, runs, current_digests, unusable=unusable))


def iter_measures(
    scenario: Scenario,
    runs: Iterable[Run],
    current_digests: Mapping[str, str] | None = None,
    *,
    unusable: Iterable[RunError] = (),
) -> Iterator[dict[str, Any]]:
    """The rows of :func:`build_measures`, in its order, each read when it is reached.

    The order (cell, repetition, id) is known from the runs themselves, so no row
    is held to sort them: 10,000 runs are written as 1,000 are.
    """
    return _ordered_rows(scenario, runs, current_digests, unusable, None)


def hold_measures(
    scenario: Scenario,
    runs: Iterable[Run],
    current_digests: Mapping[str, str] | None = None,
    *,
    unusable: Iterable[RunError] = (),
) -> list[dict[str, Any]]:
    """The rows of :func:`build_measures` as a report holds them: the same dicts, each in
    about a quarter of the memory (:mod:`trysquare._measure_rows`), to be read, never
    changed: their containers may be shared from row to row."""
    return list(_ordered_rows(scenario, runs, current_digests, unusable, Shapes()))


def _ordered_rows(
    scenario: Scenario,
    runs: Iterable[Run],
    current_digests: Mapping[str, str] | None,
    unusable: Iterable[RunError],
    shapes: Shapes | None,
) -> Iterator[Any]:
    extra = [row for row in map(unusable_row, unusable) if row is not None]
    # Runs first, then unusable folders' rows, ordered by (cell, repetition, id) in three
    # stable sorts, the least significant key first: the order one sort of key tuples gives
    # (ties kept as they came, as build_measures' always were), but each pass's keys are
    # objects the runs already hold, where key tuples would make a tuple and an index a run,
    # all at once, while a report holds every run.
    entries: list[Run | dict[str, Any]] = [*runs, *extra]
    entries.sort(key=_id_key)
    entries.sort(key=_repetition_of)
    entries.sort(key=_cell_key)
    for entry in entries:
        yield (
            entry
            if isinstance(entry, dict)
            else _read_row(scenario, entry, current_digests, shapes)
        )


def _cell_key(entry: Run | dict[str, Any]) -> Any:
    return entry["cell"] if isinstance(entry, dict) else entry.cell


def _id_key(entry: Run | dict[str, Any]) -> Any:
    return entry["id"] if isinstance(entry, dict) else entry.id


def _repetition_of(entry: Run | dict[str, Any]) -> int:
    if isinstance(entry, dict):
        return _repetition_key(entry)
    return entry.repetition if isinstance(entry.repetition, int) else -1


def _repetition_key(row: Mapping[str, Any]) -> int:
    repetition = row.get("repetition")
    return repetition if isinstance(repetition, int) else -1


def write_measures(root: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``measures.json`` from ``rows`` as they come (the file :func:`_atomic.dump_json`
    would write for their list), replacing it atomically once all are written."""
    path = root / MEASURES_FILE

    def fill(handle: BinaryIO) -> None:
        first = True
        for row in rows:
            item = _atomic.dump_json(row).rstrip("\n").replace("\n", "\n  ")
            handle.write(_atomic.encode(("[\n  " if first else ",\n  ") + item))
            first = False
        handle.write(b"[]\n" if first else b"\n]\n")

    _atomic.write_stream(path, fill)
    return path
