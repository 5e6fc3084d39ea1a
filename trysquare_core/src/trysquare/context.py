"""The context a validator is handed: built once per run, archived per validator.

The facts every mode shares — ``touched``, ``files``, ``diff.patch`` and
``response.md`` — are computed here and nowhere else; ``touched`` itself comes
from :func:`trysquare.git.changes.changed_files`.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from trysquare import _atomic
from trysquare._digests import sha256
from trysquare._lazy_pattern import LazyPattern
from trysquare.errors import RepoError, RunError
from trysquare.jail import JailPolicy
from trysquare.modes import Validation
from trysquare.runs import Run
from trysquare.scenario import Scenario

if TYPE_CHECKING:
    from trysquare._run_facts import RunFacts

__all__ = [
    "CORE_KEYS",
    "RunFacts",
    "build_context",
    "context_digest",
    "diff_size",
    "dump_context",
    "gather_facts",
    "preflight",
    "write_session_facts",
]

DIFF_FILE = "diff.patch"
RESPONSE_FILE = "response.md"
SESSION_FACTS_FILE = "session.json"  # in the validator's archive folder

CORE_KEYS = frozenset(
    {
        "repo",
        "etalon",
        "prompt",
        "session",
        "trace",
        "cell",
        "repetition",
        "test_command",
        "prepare",
        "artefacts",
        "touched",
        "files",
        "given",
        "declared",
        "base",
        "response",
        "diff",
        "jail",
        "session_facts",
    }
)


def __getattr__(name: str) -> Any:
    # RunFacts is built when first asked for (trysquare._run_facts): a replay gathers none.
    if name == "RunFacts":
        from trysquare._run_facts import RunFacts

        return RunFacts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def gather_facts(run: Run) -> RunFacts:
    """Compute ``touched``, ``files``, ``diff.patch``, ``response.md`` and the etalon folder.

    Writes only into the run folder (never into the measured clone). Raises
    :class:`RunError` naming the run when git or the session cannot be read.
    """
    from trysquare._run_facts import RunFacts
    from trysquare.git.patch import context_facts  # the git layer: a fresh context only

    if run.base_commit is None:
        raise RunError(f"{run.label}: loaded for --replay, so its context cannot be rebuilt")
    base_commit = run.base_commit  # narrowed to str, for the lambda below
    etalon_commit, etalon_tree = _preflight(run)
    diff_path = run.dir / DIFF_FILE
    walked: list[tuple[frozenset[str], frozenset[str]]] = []
    try:
        # Streamed to disk: a 2 GB file in the clone must not become 2 GB of memory.
        _atomic.write_stream(
            diff_path,
            lambda out: walked.append(context_facts(run.repo, base_commit, out, run.excluded)),
            root=run.dir,
        )
        ((touched, files),) = walked
        checkout = None
        if run.etalon is not None:
            checkout = run.etalon.checkout or _etalon_of(run, etalon_commit, etalon_tree)
    except RepoError as error:
        raise RunError(f"{run.dir / 'run.toml'}: {error.message}") from None
    except _atomic.UnsafePath as unsafe:
        raise RunError(f"{run.label}: {unsafe}") from None
    _pin_base(run, etalon_commit)
    return RunFacts(
        touched=tuple(sorted(touched)),
        files=tuple(sorted(files)),
        diff=diff_path,
        response=_response(run),
        etalon_checkout=checkout,
    )


# Contexts are built side by side: the runs sharing an etalon wait for its first
# checkout and then find it in the cache, rather than each writing it again.
_MATERIALISING = threading.Lock()


def _etalon_of(run: Run, commit: str | None, tree: str | None = None) -> Path:
    """The etalon checkout: from the commit the tag named when preflight resolved it (the
    same tree, without reading the clone's refs a second time); found by the tree preflight
    read on the way when it was written before (every run after the first)."""
    from trysquare.git.etalon import materialise_etalon, materialised

    assert run.etalon is not None
    found = None if tree is None else materialised(tree)
    if found is not None:
        return found
    with _MATERIALISING:
        return materialise_etalon(run.repo, commit or run.etalon.tag)


def _pin_base(run: Run, etalon_commit: str | None = None) -> None:
    """Record the base commit at first measurement (``.trysquare/base.json``).

    ``run.toml`` may name ``base`` by a tag or branch, which the agent can move;
    :func:`trysquare.runs.load_run` refuses the run once it resolves elsewhere.
    """
    from trysquare.git.refs import resolve_commit
    from trysquare.runs import BASE_PIN, read_pinned_base

    if read_pinned_base(run.dir) is None:
        pin: dict[str, Any] = {"base": run.base_commit, "rev": run.base}
        if run.etalon is not None and run.etalon.checkout is None:
            pin["etalon"] = etalon_commit or resolve_commit(
                run.repo, run.etalon.tag, what="etalon tag"
            )
            pin["etalon_tag"] = run.etalon.tag
        try:
            _atomic.write_json(run.dir / BASE_PIN, pin, root=run.dir)
        except _atomic.UnsafePath as unsafe:
            raise RunError(f"{run.label}: {unsafe}") from None


def diff_size(facts: RunFacts) -> int:
    """The size of ``diff.patch`` in bytes, without reading it (judge caps use it)."""
    return facts.diff.stat().st_size


def preflight(run: Run) -> None:
    """Refuse, writing nothing, a run whose context could not be built.

    ``check SCENARIO PATH`` calls it to spend nothing; :func:`gather_facts`
    calls it first, so both refuse the same runs with the same sentence.
    """
    _preflight(run)


def _preflight(run: Run) -> tuple[str | None, str | None]:
    """:func:`preflight`; the commit the etalon tag names now, when it is read from the clone,
    and that commit's tree when it was read on the way."""
    from trysquare.git.etalon import resolve_etalon

    etalon: str | None = None
    tree: str | None = None
    where = run.dir / "run.toml"
    if run.etalon is not None:
        if run.etalon.checkout is not None:
            if not run.etalon.checkout.is_dir():
                raise RunError(f"{where}: etalon checkout {run.etalon.checkout} is not a folder")
        else:
            try:
                etalon, tree = resolve_etalon(run.repo, run.etalon.tag)
            except RepoError as error:
                raise RunError(f"{where}: {error.message}") from None
            _check_pinned_etalon(run, etalon)
    if run.session is not None:
        from trysquare import sessions

        try:
            sessions.open_session(run.session, format=run.session_format, repo=run.repo)
        except RunError as error:
            raise RunError(f"{where}: {error.message}") from None
    return etalon, tree


def _check_pinned_etalon(run: Run, etalon: str) -> None:
    """A moved etalon tag would change the reference the run is compared with."""
    from trysquare.runs import BASE_PIN, read_pinned_base

    pinned = read_pinned_base(run.dir)
    tag = run.etalon.tag if run.etalon is not None else None
    if pinned is None or pinned.get("etalon_tag") != tag or pinned.get("etalon") in (None, etalon):
        return
    raise RunError(
        f"{run.dir / 'run.toml'}: etalon tag '{tag}' now names {etalon}, but it was "
        f"{pinned['etalon']} at first measurement ({run.dir / BASE_PIN})"
    )


def _response(run: Run) -> Path | None:
    """``response.md``: used as it is when present, else read from the session once.

    ``None`` (the context's ``response`` is null) when no response was recorded: no
    session, or a session whose last message is missing or could not be read. An
    empty file is written only for a last message that really was empty. Lone
    surrogates in the session's text become U+FFFD, so the file is always UTF-8.
    """
    path = run.dir / RESPONSE_FILE
    if path.is_symlink():
        # Whatever it points at (/etc/passwd) would be read as the agent's answer.
        raise RunError(f"{run.label}: {_atomic.UnsafePath(path)}")
    if path.exists():
        return path
    if run.session is None:
        return None
    from trysquare import sessions

    text = sessions.final_response(run.session, format=run.session_format, repo=run.repo)
    if text is None:
        return None
    _atomic.write_text(path, _LONE_SURROGATE.sub("\ufffd", text), root=run.dir)
    return path


_LONE_SURROGATE = LazyPattern("[\ud800-\udfff]")


def build_context(
    scenario: Scenario, run: Run, validation: Validation, facts: RunFacts
) -> dict[str, Any]:
    """The exact JSON ``validation`` is handed for ``run``."""
    task = scenario.task
    context: dict[str, Any] = {
        "repo": str(run.repo),
        "etalon": None
        if run.etalon is None
        else {"tag": run.etalon.tag, "checkout": str(facts.etalon_checkout)},
        "prompt": str(run.prompt),
        "session": None if run.session is None else str(run.session),
        "trace": None if run.trace is None else str(run.trace),
        "cell": run.cell,
        "repetition": run.repetition,
        "prepare": list(task.prepare),
        "artefacts": list(task.artefacts),
        "touched": list(facts.touched),
        "files": list(facts.files),
        "given": list(run.given),
        "declared": list(validation.metrics),
        "base": run.base_commit,
        "response": None if facts.response is None else str(facts.response),
        "diff": str(facts.diff),
    }
    if task.test_command is not None:  # absent is a different fact from empty
        context["test_command"] = task.test_command
    if task.pass_env:  # present only when declared, so older contexts stay current
        context["pass_env"] = list(task.pass_env)
    if task.test_command is not None and task.jail != JailPolicy():
        # The jail's keys, for a validator run by hand (run.tests() then jails the suite
        # itself); present only when set, so contexts under the default jail stay current.
        context["jail"] = attrs.asdict(task.jail)
    if validation.wants_session_facts and run.session is not None:
        # A path, written when the validator starts (write_session_facts): reading a
        # session costs, and planning builds every run's context on every validate.
        context["session_facts"] = str(run.validation_dir / validation.name / SESSION_FACTS_FILE)
    context.update(_plugin_keys(run, validation, context))
    for key in validation.withheld_context_keys:
        context.pop(key, None)
    return context


_FACTS_KEPT: dict[tuple[Any, ...], dict[str, Any]] = {}
_FACTS_LOCK = threading.Lock()


def write_session_facts(run: Run, context: Mapping[str, Any]) -> None:
    """Write the session's reading where the context's ``session_facts`` says, if it says.

    The same answers :mod:`trysquare.assay` gives (one reader, one place: see
    :func:`trysquare.sessions.facts.session_facts`), for a validator in any language.
    Raises :class:`RunError` naming the run when the log cannot be read or the file
    cannot be written.
    """
    target = context.get("session_facts")
    if not isinstance(target, str) or run.session is None:
        return
    from trysquare import sessions
    from trysquare.sessions.facts import session_facts

    try:
        touched = context.get("touched")
        paths = tuple(str(path) for path in touched) if isinstance(touched, list) else ()
        # Two script validators of one run read the same log: it is read once per process.
        files = sessions.session_files(run.session)
        stamps = tuple((file.stat().st_size, file.stat().st_mtime_ns) for file in files)
        key = (str(run.session), run.session_format, str(run.repo), paths, stamps)
        # Held while reading: a second validator of the run waits for the first one's answer
        # (reading is Python work under the GIL, so runs read in turn lose little).
        with _FACTS_LOCK:
            facts = _FACTS_KEPT.get(key)
            if facts is None:
                reading = sessions.open_session(
                    run.session, format=run.session_format, repo=run.repo
                )
                facts = _FACTS_KEPT[key] = session_facts(reading, paths)
                while len(_FACTS_KEPT) > 4:
                    _FACTS_KEPT.pop(next(iter(_FACTS_KEPT)))
        _atomic.write_json(Path(target), facts, root=run.dir)
    except RunError as error:
        raise RunError(f"{run.dir / 'run.toml'}: {error.message}") from None
    except _atomic.UnsafePath as unsafe:
        raise RunError(f"{run.label}: {unsafe}") from None
    except OSError as error:
        raise RunError(f"{run.label}: {target}: cannot be written ({error.strerror})") from None


def with_scenario(
    context: Mapping[str, Any], scenario: Scenario, validation: Validation
) -> dict[str, Any]:
    """An archived context with what the scenario says as it is now (``--replay``).

    A replay reuses the run's facts (paths, touched, files, base, the agent's
    response and diff); what the scenario contracts for — the declared metrics, the
    suite, ``prepare``, ``artefacts``, ``pass_env`` — is the scenario's now, so a
    fixed scenario is replayed as fixed.
    """
    task = scenario.task
    fresh = dict(context)
    fresh["declared"] = list(validation.metrics)
    fresh["prepare"] = list(task.prepare)
    fresh["artefacts"] = list(task.artefacts)
    suite: tuple[tuple[str, Any], ...] = (
        ("test_command", task.test_command),
        ("pass_env", list(task.pass_env) or None),
    )
    for key, value in suite:
        if value is None:
            fresh.pop(key, None)
        else:
            fresh[key] = value
    for key in validation.withheld_context_keys:
        fresh.pop(key, None)
    return fresh


def _plugin_keys(run: Run, validation: Validation, context: Mapping[str, Any]) -> dict[str, Any]:
    from trysquare import plugins

    added: dict[str, Any] = {}
    added_by: dict[str, str] = {}
    for plugin_name, caller in plugins.hook_callers("trysquare_build_context"):
        # Each plugin on its own: the one that raises is named, and only this run
        # is skipped (its context would lack keys its validators may need).
        try:
            answers = caller(run=run, validation=validation, context=dict(context))
        except Exception as error:  # noqa: BLE001 - a broken plugin skips this run, not the matrix
            raise RunError(
                f"{run.label}: plugin '{plugin_name}': trysquare_build_context failed: "
                f"{type(error).__name__}: {error}"
            ) from None
        for answer in answers:
            for key, value in (answer or {}).items():
                if key in CORE_KEYS:
                    raise RunError(
                        f"{run.label}: plugin '{plugin_name}''s context key '{key}' would replace a core key"
                    )
                if key in added:
                    raise RunError(
                        f"{run.label}: plugins '{added_by[key]}' and '{plugin_name}' both add "
                        f"the context key '{key}'"
                    )
                added[key], added_by[key] = value, plugin_name
    return added


_SURROGATE = LazyPattern("[\ud800-\udfff]")


def dump_context(context: Mapping[str, Any]) -> str:
    """``context.json``'s text. A path that is not UTF-8 (``caf\\xe9.py``) is carried
    losslessly: its undecodable bytes are lone surrogates (:func:`os.fsdecode`),
    written as ``\\udcXX`` JSON escapes, so ``os.fsencode(json.load(...)[...])``
    gives the file's real name back.
    """
    text = _atomic.dump_json(context)
    # Surrogates occur only inside JSON strings: escaping them there is exact.
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def context_digest(
    context_text: str,
    context: Mapping[str, Any],
    *,
    root: Path | None = None,
    validation: Validation | None = None,
) -> str:
    """What the validator saw, wherever the experiment folder lives: a result recorded
    with the same digest (and validator digest) is reused.

    ``validation``'s own :meth:`~trysquare.modes.Validation.context_identity` when it
    has one (the judge: what it is shown); else the context with every path below the
    run folder ``root``, the clone and the etalon checkout written relative to them,
    and the content of the files it names (diff, response, prompt). A copied or moved
    experiment folder keeps every digest. Without ``root``: the context's text as it
    is (:func:`located_context_digest`, how results were identified before).
    """
    if validation is not None:
        own = validation.context_identity(context)
        if own is not None:
            return own
    if root is None:
        return located_context_digest(context_text, context)
    # Where the session's reading is written says nothing the session does not: left
    # out, so results recorded before the key existed stay current.
    context = {key: value for key, value in context.items() if key != "session_facts"}
    places = [(str(root), "<run>")]
    if isinstance(context.get("repo"), str):
        places.append((context["repo"], "<repo>"))
    etalon = context.get("etalon")
    if isinstance(etalon, Mapping) and isinstance(etalon.get("checkout"), str):
        places.append((etalon["checkout"], "<etalon>"))
    places.sort(key=lambda place: len(place[0]), reverse=True)  # the clone inside the run first
    relocated = _atomic.dump_json(_relocated(context, places))
    return _digest_with_files("relocated\0" + relocated, context)


def is_current(recorded: Any, digest: str, context_text: str, context: Mapping[str, Any]) -> bool:
    """Whether a result recorded with context digest ``recorded`` is current for ``digest``:
    equal, or equal to the digest of the same context where it lies, which results
    recorded before digests were relocatable carry (so none is paid for again)."""
    if not isinstance(recorded, str):
        return False
    return recorded == digest or recorded == located_context_digest(context_text, context)


def _relocated(value: Any, places: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for place, name in places:
            if value == place or value.startswith(place + "/"):
                return name + value[len(place) :]
        return value
    if isinstance(value, Mapping):
        return {key: _relocated(item, places) for key, item in value.items()}
    if isinstance(value, list):
        return [_relocated(item, places) for item in value]
    return value


def located_context_digest(context_text: str, context: Mapping[str, Any]) -> str:
    """The context's text as it is (absolute paths included), and the files it names."""
    return _digest_with_files(context_text, context)


def _digest_with_files(context_text: str, context: Mapping[str, Any]) -> str:
    hasher = sha256(context_text.encode("utf-8"))
    for key in ("diff", "response", "prompt"):
        value = context.get(key)
        hasher.update(f"\0{key}\0".encode())
        if isinstance(value, str):
            try:
                hasher.update(_file_digest(Path(value)))
            except OSError:
                hasher.update(b"<missing>")
    return "sha256:" + hasher.hexdigest()


def _file_digest(path: Path) -> bytes:
    """sha256 of a file read in blocks: diff.patch can be gigabytes, never held whole.

    Read with bare reads sized by the file (a diff, a response, a prompt: every run's
    digest reads three): a buffered file object adds three system calls to each and a
    megabyte buffer to each read.
    """
    digest = sha256()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        regular = stat.S_ISREG(info.st_mode)
        want = min(info.st_size + 1, _DIGEST_BLOCK)
        while block := os.read(fd, want):
            digest.update(block)
            if len(block) < want and regular:
                break  # a regular file's read comes short at its end alone: no read for it
            if len(block) == want:
                want = _DIGEST_BLOCK  # larger than its size said, or large: on in blocks
    finally:
        os.close(fd)
    return digest.digest()


_DIGEST_BLOCK = 1 << 20


def load_archived(path: Path, *, root: Path) -> tuple[dict[str, Any], str]:
    """An archived ``context.json`` and its text, for ``--replay``; read below the run folder
    ``root`` through no symlink and only when it has one link (see :mod:`trysquare._atomic`)."""
    try:
        text = _atomic.read_bytes(path, root=root).decode("utf-8")
        value = json.loads(text)
    except FileNotFoundError:
        raise RunError(
            f"{path}: no archived context to replay (validate once without --replay)"
        ) from None
    except (OSError, ValueError) as error:
        raise RunError(f"{path}: the archived context cannot be read ({error})") from None
    if not isinstance(value, dict):
        raise RunError(f"{path}: the archived context is not a JSON object")
    return value, text
