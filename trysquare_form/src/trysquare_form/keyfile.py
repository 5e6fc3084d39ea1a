"""The key of a form: which run each opaque id stands for.

It lives in ``<PATH>/.trysquare/forms/<form stem>.key.json``, never in the form
nor beside it, so whoever fills the form is not handed it with the form.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import attrs

from trysquare import plugin_api
from trysquare.errors import UsageError

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


def forms_folder(root: Path) -> Path:
    """``<PATH>/.trysquare/forms``: the keys and the secret."""
    return root / ".trysquare" / "forms"


def forms_lock(root: Path) -> AbstractContextManager[None]:
    """Held (shared) by every writer into the forms folder; the first writer to find
    nobody else at work sweeps a killed writer's temporary files there."""
    from trysquare.lock import folder_lock

    return folder_lock(forms_folder(root))


def key_path(root: Path, form: Path) -> Path:
    return forms_folder(root) / f"{form.stem}.key.json"


SECRET_FILE = "secret"


def form_secret(root: Path) -> bytes:
    """The experiment's form secret, beside the keys: made once (0600), never printed.

    The form's order and ids are drawn from it and the seed together, so the
    form plus the run folders' names (plus the seed) cannot give the mapping back.
    """
    import secrets

    path = root / ".trysquare" / "forms" / SECRET_FILE
    try:
        secret = plugin_api.read_bytes(path, root=root)
    except FileNotFoundError:
        secret = plugin_api.create_once(path, secrets.token_hex(32).encode("ascii") + b"\n", root=root)
    except OSError as error:
        raise UsageError(f"{path}: the form secret cannot be read ({error})") from None
    secret = secret.strip()
    if len(secret) < 32:
        raise UsageError(f"{path}: the form secret is damaged (too short); remove it to make a new one")
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
    plugin_api.write_json(path, document, root=path.parents[2])


def read_key(root: Path, form: Path) -> FormKey:
    """The key of ``form`` under experiment ``root``, or a :class:`UsageError` saying why not."""
    path = key_path(root, form)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
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
        )
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise UsageError(f"{path}: the form's key is damaged ({type(error).__name__}: {error})") from None
