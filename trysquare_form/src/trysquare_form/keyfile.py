"""The key of a form: which run each opaque id stands for.

It lives in ``<PATH>/.trysquare/forms/<form id>.key.json``, never in the form
nor beside it, so whoever fills the form is not handed it with the form. The
form id (``<stem>-<12 hex digits>``) is written at the top of the form: each
export has its own key. The key also records when the form was exported and the
sha256 of every piece it shows, so an answer about pieces that changed since, or
older than an answer recorded since, is told apart at ingest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import attrs
from trysquare import api
from trysquare.api import UsageError

__all__ = ["FormKey", "KeyEntry", "form_secret", "key_path", "read_key", "write_key"]

FORMAT = 1


@attrs.frozen
class KeyEntry:
    """The run behind one opaque id."""

    id: str
    dir: str  # the run folder, relative to the experiment folder (POSIX)
    cell: str


@attrs.frozen
class FormKey:
    form: str  # the form's file name, for messages
    scenario: str  # the scenario file it was exported from
    validation: str  # the form validator it fills
    seed: int
    order: tuple[str, ...]  # opaque ids, in the form's order
    runs: dict[str, KeyEntry]
    form_id: str | None = None  # this export's own id, written in the form (None: an older key)
    exported: str | None = None  # when it was exported (UTC, ISO 8601)
    # opaque id -> piece -> sha256 of the bytes the human was shown
    pieces: dict[str, dict[str, str]] = attrs.field(factory=dict)


def forms_folder(root: Path) -> Path:
    """``<PATH>/.trysquare/forms``: the keys and the secret."""
    return root / ".trysquare" / "forms"


def forms_lock(root: Path) -> AbstractContextManager[None]:
    """Held (shared) by every writer into the forms folder; the first writer to find
    nobody else at work sweeps a killed writer's temporary files there."""
    from trysquare.api import folder_lock

    return folder_lock(forms_folder(root))


def key_path(root: Path, form: Path, form_id: str | None = None) -> Path:
    """Where the key of ``form`` is: named after its export's own id (each export has its
    own key, whatever the form's file is called), or after its stem (a form exported
    before forms had ids)."""
    if form_id is not None:
        return forms_folder(root) / f"{form_id}.key.json"
    return forms_folder(root) / f"{form.stem}.key.json"


# The id an export writes at the top of its form: `form = "<stem>-<12 hex digits>"`.
FORM_ID = re.compile(r"[A-Za-z0-9._-]{0,60}-[0-9a-f]{12}\Z")


def form_id_of(document: Mapping[str, Any]) -> str | None:
    """The export id a parsed form carries, ``None`` when it has none that is well-formed."""
    value = document.get("form")
    return (
        value
        if isinstance(value, str) and FORM_ID.match(value) and not value.startswith(".")
        else None
    )


SECRET_FILE = "secret"


def form_secret(root: Path) -> bytes:
    """The experiment's form secret, beside the keys: made once (0600), never printed.

    The form's order and ids are drawn from it and the seed together, so the
    form plus the run folders' names (plus the seed) cannot give the mapping back.
    """
    import secrets

    path = root / ".trysquare" / "forms" / SECRET_FILE
    try:
        secret = api.read_bytes(path, root=root)
    except FileNotFoundError:
        secret = api.create_once(path, secrets.token_hex(32).encode("ascii") + b"\n", root=root)
    except OSError as error:
        raise UsageError(f"{path}: the form secret cannot be read ({error})") from None
    secret = secret.strip()
    if len(secret) < 32:
        raise UsageError(
            f"{path}: the form secret is damaged (too short); remove it to make a new one"
        )
    return secret


def write_key(path: Path, key: FormKey) -> None:
    document: dict[str, Any] = {
        "format": FORMAT,
        "form": key.form,
        "scenario": key.scenario,
        "validation": key.validation,
        "seed": key.seed,
        "order": list(key.order),
        "runs": {opaque: attrs.asdict(entry) for opaque, entry in key.runs.items()},
    }
    if key.form_id is not None:
        document["form_id"] = key.form_id
        document["exported"] = key.exported
        document["pieces"] = key.pieces
    api.write_json(path, document, root=path.parents[2])


def read_key(root: Path, form: Path, form_id: str | None = None) -> FormKey:
    """The key of ``form`` (export ``form_id``) under experiment ``root``, or a
    :class:`UsageError` saying why not."""
    path = key_path(root, form, form_id)
    try:
        # Through no symlink and never a file with another name elsewhere (a hard link).
        document = json.loads(api.read_bytes(path, root=root).decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"{form.name} has no key under {root} (looked for {path}); ingest a form against "
            "the folder it was exported from"
        ) from None
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: the form's key cannot be read ({error})") from None
    try:
        runs = {
            str(opaque): KeyEntry(id=str(e["id"]), dir=str(e["dir"]), cell=str(e["cell"]))
            for opaque, e in document["runs"].items()
        }
        return FormKey(
            form=str(document["form"]),
            scenario=str(document["scenario"]),
            validation=str(document["validation"]),
            seed=int(document["seed"]),
            order=tuple(str(o) for o in document["order"]),
            runs=runs,
            form_id=None if document.get("form_id") is None else str(document["form_id"]),
            exported=None if document.get("exported") is None else str(document["exported"]),
            pieces={
                str(opaque): {str(piece): str(digest) for piece, digest in shown.items()}
                for opaque, shown in (document.get("pieces") or {}).items()
            },
        )
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise UsageError(
            f"{path}: the form's key is damaged ({type(error).__name__}: {error})"
        ) from None
