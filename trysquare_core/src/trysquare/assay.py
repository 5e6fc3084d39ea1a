"""Writing a validator in Python: four names, and the error contract with them.

(It is over 600 lines because a validator imports this one module at every start: what it
reads of a run stays in one file, loaded once, with nothing of the engine.)

>>> from trysquare.assay import Assay, Metric, validator
>>> @validator
... def evaluate(run: Assay) -> dict:
...     work = run.touched - run.artefacts
...     return {"delivered": bool(work), "tests": run.tests}

``evaluate.cli()`` reads the context file named by ``argv[1]``, calls the
function and prints ``{"metrics": {...}, "reasons": {...}}``.

What a validator can say about a metric:

- a value (``bool``, number, string, a set or list of them): the measurement;
- ``Metric(value, reason)``: the same, with the reason it was found (an empty
  reason is dropped, so attach one only where it says something);
- ``Metric.unjudged(reason)``, or ``raise Unjudged(reason)``: this run cannot
  answer the question. It prints as ``null`` with its reason, and is never folded
  into ``False``: a run that could not be judged must not read as a negative;
- a zero-argument callable returning any of the above: evaluated on its own, so
  an ``Unjudged`` raised inside it spoils that metric only.

Unknown inputs raise ``Unjudged`` themselves, so a validator never checks for
``None``: ``run.response`` when no response was recorded ("no response was
recorded"), ``run.first_write(path)`` when no call wrote it ("no call wrote
<path>"). Read inside a callable metric, that metric alone is unjudged; a metric
for which "none" is an answer asks explicitly: ``run.response_or(None)``,
``run.first_write(path, default=None)``.

``Unjudged`` raised from the function body itself refuses the run: ``cli()``
prints one sentence on stderr and exits 1, so the run is *invalid* and its cell
not publishable. Printing every metric as unjudged instead would leave a valid
run at 0/0, a cell that looks publishable while nothing in it was measured; a
metric the run cannot answer is wrapped in a callable (or ``Metric.unjudged``)
so that it alone is unjudged and the others still count. Any other exception is
a bug in the validator, not a measurement: ``cli()`` prints it on stderr and
exits 1, which makes the run invalid rather than quietly wrong.

Import cost matters (it is paid once per validator run), so only ``json``,
``os``, ``sys`` and ``fnmatch`` are loaded here; ``pathlib``, ``subprocess`` and
the session readers wait until something needs them.

Why one module of this length: it is the whole contract a validator author imports,
read as one page (the four names, what a metric may be, how a run is refused), and
every validator run pays its import, one file rather than a package's several. The
printing of results (``_Validator`` and what it calls, the end of the file) is the part
to move out first should it grow.
"""

from __future__ import annotations

import json
import math
import os
import sys
from fnmatch import fnmatchcase

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs more than json
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence
    from pathlib import Path
    from typing import Any, TypeVar

    _T = TypeVar("_T")

__all__ = ["Assay", "Metric", "Unjudged", "validator"]

DEFAULT_TESTS_TIMEOUT = 600.0


class Unjudged(Exception):
    """This run cannot answer the metric being computed; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(_require_reason(reason, "Unjudged"))
        self.reason = reason


class Metric:
    """One metric's value and the reason it was found.

    ``Metric(True)``, ``Metric(False, "also touched README.md")``, or
    ``Metric.unjudged("no probe was given to this cell")`` (value ``None``).

    Its truth is its value's; asking the truth of an unjudged metric raises
    ``Unjudged`` rather than answering ``False``, so ``lambda: run.tests() and
    ...`` stays unjudged when the suite could not be judged.
    """

    __slots__ = ("reason", "value")

    def __init__(self, value: Any, reason: str = "") -> None:
        if not isinstance(reason, str):
            raise TypeError(f"a metric's reason is a string, not {type(reason).__name__}")
        if value is None and not reason.strip():
            raise ValueError("a metric with no value needs a reason: use Metric.unjudged(reason)")
        if isinstance(value, Metric) or callable(value):
            raise TypeError(f"a Metric holds a plain value, not {type(value).__name__}")
        self.value = value
        self.reason = reason

    @classmethod
    def unjudged(cls, reason: str) -> Metric:
        """A metric this run cannot answer; printed as ``null`` with ``reason``."""
        return cls(None, _require_reason(reason, "Metric.unjudged"))

    @property
    def judged(self) -> bool:
        """False for an unjudged metric."""
        return self.value is not None

    def __bool__(self) -> bool:
        if self.value is None:
            raise Unjudged(self.reason)
        return bool(self.value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Metric):
            return NotImplemented
        return (self.value, self.reason) == (other.value, other.reason)

    def __hash__(self) -> int:
        return hash((Metric, _hashable(self.value), self.reason))

    def __repr__(self) -> str:
        if self.value is None:
            return f"Metric.unjudged({self.reason!r})"
        if self.reason:
            return f"Metric({self.value!r}, {self.reason!r})"
        return f"Metric({self.value!r})"


def _require_reason(reason: object, where: str) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(f"{where}() needs a reason: say why this run cannot be judged")
    return reason


def _hashable(value: Any) -> Any:
    if isinstance(value, (set, list)):
        return frozenset(value) if isinstance(value, set) else tuple(value)
    if isinstance(value, dict):
        return tuple(sorted(value.items(), key=repr))
    return value


# Unknown inputs: the reason a metric reading them is unjudged with.
NO_RESPONSE = "no response was recorded"


class _Raise:
    """``first_write``'s default default: raise ``Unjudged`` rather than return a value."""

    def __repr__(self) -> str:
        return "<raise Unjudged>"


_RAISE = _Raise()


class _MissingContext(LookupError):
    """A validator asked for something its context does not carry."""


# Why a key may legitimately be absent, for the message naming it.
_ABSENT_BECAUSE = {
    "cell": "a judge's context never carries the cell",
    "given": "a judge's context never carries what was given",
}


class Etalon:
    """The reference side: its tag, and a folder holding its files (never read through git)."""

    __slots__ = ("checkout", "tag")

    def __init__(self, tag: str | None, checkout: Path | None) -> None:
        self.tag = tag
        self.checkout = checkout

    def __repr__(self) -> str:
        return f"Etalon(tag={self.tag!r}, checkout={self.checkout!r})"


def _path(value: str) -> Path:
    from pathlib import Path  # lazy: see the module docstring

    return Path(value)


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _matches_artefact(path: str, pattern: str) -> bool:
    """Whether ``path`` (repo-relative POSIX) is a by-product named by ``pattern``.

    A pattern matches the whole path as a glob, or any leading part of it (so
    ``build`` and ``build/*`` both cover ``build/x/y.o``), or any single path
    component (so ``__pycache__`` covers ``src/__pycache__/a.pyc``). A trailing
    ``/`` restricts it to directories; a leading ``/`` or ``./`` anchors it at the
    root (no component match), as in ``.gitignore``.
    """
    directory_only = pattern.endswith("/")
    pattern = pattern.rstrip("/")
    # A leading "/" (or "./") anchors the pattern at the root, as in .gitignore.
    anchored = pattern.startswith(("/", "./"))
    while pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.lstrip("/")
    if not pattern:
        return False
    parts = path.split("/")
    # Directories are the leading parts; the last one is a directory only for a
    # pattern without a trailing slash (it is the file itself otherwise).
    last = len(parts) if not directory_only else len(parts) - 1
    candidates = [pattern]
    if pattern.startswith("**/"):
        candidates.append(pattern[3:])  # "**/x" also names a top-level x
    for candidate in candidates:
        for end in range(1, last + 1):
            if fnmatchcase("/".join(parts[:end]), candidate):
                return True
        if "/" not in candidate and not anchored:
            for part in parts[:last]:
                if fnmatchcase(part, candidate):
                    return True
    return False


class Assay:
    """A finished run as the ``context.json`` handed to a validator describes it.

    Sets of paths (``touched``, ``files``, ``given``, ``artefacts``) are
    frozensets of repo-relative POSIX strings. A key the context lacks (a judge's
    context has no ``cell`` nor ``given``) is an error only when asked for.
    """

    def __init__(self, context: Mapping[str, Any], *, source: str | None = None) -> None:
        try:
            self._context: dict[str, Any] = dict(context)
        except (TypeError, ValueError):
            raise TypeError(f"a context is a JSON object, not {type(context).__name__}") from None
        self.source = source  # the context file, when read from one
        self._cache: dict[str, Any] = {}
        self._session_reads = 0  # process-metric reads, so their reasons carry the session's notes

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Assay:
        """Read a context file (the validator's ``argv[1]``)."""
        name = os.fspath(path)
        with open(name, encoding="utf-8") as handle:
            context = json.load(handle)
        if not isinstance(context, dict):
            raise ValueError(f"{name}: a context is a JSON object, not {type(context).__name__}")
        return cls(context, source=name)

    # --- the raw context -------------------------------------------------------------

    @property
    def context(self) -> dict[str, Any]:
        """The whole context, plugin-added keys included (a copy)."""
        return dict(self._context)

    def _get(self, key: str) -> Any:
        try:
            return self._context[key]
        except KeyError:
            why = _ABSENT_BECAUSE.get(key, "the harness that built it did not provide it")
            where = f" ({self.source})" if self.source else ""
            raise _MissingContext(f"this context{where} has no {key!r}: {why}") from None

    def _paths(self, key: str) -> frozenset[str]:
        cached = self._cache.get(key)
        if cached is None:
            value = self._get(key)
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise TypeError(f"context key {key!r} must be a list of paths")
            cached = self._cache[key] = frozenset(value)
        return cached

    def _text(self, key: str) -> str:
        cached = self._cache.get("text:" + key)
        if cached is None:
            location = self._get(key)
            if location is None:
                raise _MissingContext(f"this run has no {key} file")
            cached = self._cache["text:" + key] = _read_text(location)
        return cached

    # --- what the harness computed ---------------------------------------------------

    @property
    def touched(self) -> frozenset[str]:
        """Every path whose existence, content or mode differs between base and the tree."""
        return self._paths("touched")

    @property
    def files(self) -> frozenset[str]:
        """The working tree's files (tracked and untracked-not-ignored)."""
        return self._paths("files")

    @property
    def given(self) -> frozenset[str]:
        """The files a ``files`` brick put in the tree before the agent began (may be empty)."""
        return self._paths("given")

    @property
    def declared(self) -> frozenset[str]:
        """The metrics this validator is contracted for."""
        return self._paths("declared") if "declared" in self._context else frozenset()

    @property
    def artefacts(self) -> frozenset[str]:
        """The subset of ``touched`` matching the scenario's by-product patterns.

        Subtract it before scoring: ``work = run.touched - run.artefacts``.
        ``touched`` itself is never reduced.
        """
        cached = self._cache.get("artefacts")
        if cached is None:
            patterns = self._context.get("artefacts") or []
            if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                raise TypeError("context key 'artefacts' must be a list of patterns")
            cached = self._cache["artefacts"] = frozenset(
                path
                for path in self.touched
                if any(_matches_artefact(path, pattern) for pattern in patterns)
            )
        return cached

    # --- the run ---------------------------------------------------------------------

    @property
    def repo(self) -> Path:
        """The measured clone (read it; never write into it)."""
        return _path(self._get("repo"))

    @property
    def base(self) -> str:
        """The commit the agent started from (``git show <base>:<path>`` is a given file's original)."""
        return self._get("base")

    @property
    def cell(self) -> str:
        return self._get("cell")

    @property
    def repetition(self) -> int:
        return self._get("repetition")

    @property
    def etalon(self) -> Etalon | None:
        """``.tag`` and ``.checkout`` (a folder), or ``None`` when the run has no etalon."""
        value = self._get("etalon")
        if value is None:
            return None
        checkout = value.get("checkout")
        return Etalon(value.get("tag"), None if checkout is None else _path(checkout))

    @property
    def prompt(self) -> str:
        """The task's text, as the agent was given it."""
        return self._text("prompt")

    @property
    def response(self) -> str:
        """The agent's final prose (``""`` only when its last message really was empty).

        Unknown (no ``response.md`` and no session, or a session whose last message
        could not be read) raises ``Unjudged("no response was recorded")``: a metric
        reading it in a callable (``lambda: len(run.response.split()) >= 5``) is
        unjudged with that reason, with no ``None`` check to forget; read in the
        validator's body, it refuses the run. :meth:`response_or` asks for a value
        in its place explicitly.
        """
        location = self._get("response")
        if location is None or not os.path.exists(location):
            raise Unjudged(NO_RESPONSE)
        return self._text("response")

    def response_or(self, default: _T) -> str | _T:
        """The agent's final prose, or ``default`` when no response was recorded.

        For a metric that means something when there is none: ``run.response_or(None)
        is None``. Every other use reads :attr:`response`, which is unjudged instead.
        """
        try:
            return self.response
        except Unjudged:
            return default

    @property
    def diff(self) -> str:
        """What the agent changed, as a patch from base to the working tree."""
        return self._text("diff")

    @property
    def session(self) -> Path | None:
        """The agent's own log (a file or a folder), or ``None``."""
        value = self._get("session") if "session" in self._context else None
        return None if value is None else _path(value)

    @property
    def trace(self) -> Path | None:
        value = self._context.get("trace")
        return None if value is None else _path(value)

    @property
    def test_command(self) -> str | None:
        """The declared suite as the scenario wrote it; ``None`` when it declares none."""
        return self._context.get("test_command")

    @property
    def prepare(self) -> list[str]:
        return list(self._context.get("prepare") or [])

    def sources_at_etalon(self, pattern: str) -> dict[str, str]:
        """Text of the etalon's files matching ``pattern`` (``src/*.js``, ``**/*.py``), by path.

        Read from the ``etalon.checkout`` folder, never through git. ``*`` stays
        within a directory, ``**`` crosses them; ``.git`` is skipped. A run with no
        etalon raises ``Unjudged``: the reference side cannot be compared.
        """
        etalon = self.etalon
        if etalon is None:
            raise Unjudged("this run has no etalon to compare against")
        if etalon.checkout is None:
            raise _MissingContext("the etalon has no checkout folder in this context")
        root = etalon.checkout
        if not root.is_dir():
            raise FileNotFoundError(f"the etalon checkout {root} is not a folder")
        found: dict[str, str] = {}
        for path in sorted(root.glob(pattern.lstrip("/"))):
            rel = path.relative_to(root).as_posix()
            if ".git" in rel.split("/") or not path.is_file():
                continue
            found[rel] = path.read_text(encoding="utf-8", errors="replace")
        return found

    def tests(self, *, timeout: float = DEFAULT_TESTS_TIMEOUT) -> Metric:
        """Run ``prepare`` then ``test_command`` in a throwaway copy of the repo.

        ``True`` when the suite passes, ``False`` with the tail of its output when
        it fails, unjudged when ``prepare`` fails, anything times out (``timeout``
        seconds for the whole) or the suite reports zero tests. The first call's
        verdict is kept: asking twice does not run the suite twice.

        A scenario that declares no suite is refused, never guessed (no ``npm test``):
        the repository's own scripts are inside what the measured agent may edit.
        """
        cached = self._cache.get("tests")
        if cached is not None:
            return cached
        if "test_command" not in self._context:
            where = f" (context {self.source})" if self.source else ""
            raise _MissingContext(
                f"the scenario declares no test_command, so run.tests() has no suite to run"
                f"{where}: declare `test_command` under [task] in the scenario; trysquare "
                "never falls back to a command read from the repository such as `npm test`"
            )
        command = self._context["test_command"]
        if not isinstance(command, (str, list)) or not command:
            raise ValueError("the scenario's test_command is empty: there is no suite to run")
        from trysquare import _suiteslot  # lazy, and light: a reused outcome costs next to nothing

        # Under `trysquare validate` the runner runs the suite (in the jail) and answers;
        # this process, confined, never runs the agent's code itself.
        try:
            answer = _suiteslot.ask_runner(timeout)
        except _suiteslot.RunnerUnreachable as error:
            answer = {"value": None, "reason": f"the suite was not run: {error}"}
        if answer is not None:
            value, reason = answer["value"], str(answer["reason"])
            verdict = Metric.unjudged(reason) if value is None else Metric(value, reason)
        else:
            from trysquare._suite import run_suite  # lazy: subprocess and friends
            from trysquare.jail import policy_from_context

            # Started by hand: this process runs the suite in the jail itself. Secret-looking
            # variables the scenario lets the suite see are handed on; nothing else.
            passed = [n for n in self._context.get("pass_env") or () if isinstance(n, str)]
            found = run_suite(
                self.repo,
                command,
                self.prepare,
                timeout=timeout,
                pass_env=passed,
                jail=policy_from_context(self._context),
                base=str(self._context["base"]) if self._context.get("base") else None,
            )
            verdict = (
                Metric.unjudged(found.reason)
                if found.value is None
                else Metric(found.value, found.reason)
            )
        self._cache["tests"] = verdict
        return verdict

    # --- the session (process metrics) -----------------------------------------------

    def _session(self) -> Any:
        cached = self._cache.get("session")
        if cached is None:
            location = self._context.get("session")
            if location is None:
                # Unjudged, not an error: a run without a log cannot answer a
                # process metric, and that says nothing against the agent.
                raise Unjudged("this run has no session log")
            from trysquare.sessions import open_session  # lazy: readers are heavier

            cached = self._cache["session"] = open_session(
                _path(location),
                format=self._context.get("session_format"),
                repo=self.repo if "repo" in self._context else None,
            )
        return cached

    def tool_calls(self) -> list[Any]:
        """Every tool call the agent made, in order (read from the session on first use).

        Raises ``Unjudged`` when the run has no session log, or when the log
        contradicts itself (a reused entry id, results that disagree).
        """
        self._session_reads += 1
        cached = self._cache.get("tool_calls")
        if cached is None:
            cached = self._cache["tool_calls"] = list(self._session().tool_calls())
        return list(cached)

    def first_write(self, path: str, default: int | None | _Raise = _RAISE) -> int | None:
        """The index of the first call that *wrote* ``path``.

        ``path`` is repo-relative, or absolute inside the repo. A failed call never
        wrote; a shell command that visibly writes the file counts (``>``, ``tee``,
        ``sed -i``, ``cp``/``mv`` onto it; a deletion is a write).

        When no call wrote it, raises ``Unjudged("no call wrote <path>")``, so a
        metric reading it in a callable is unjudged with that reason; or returns
        ``default`` when one is given: ``run.first_write(path, default=None) is None``
        asks "did any call write it?" explicitly. Raises ``Unjudged`` in every case
        when the run has no session log, or when a call before any write may have
        written the file and the reader cannot tell (an unknown tool, a subagent):
        the reason names that call.
        """
        self._session_reads += 1
        # The session reader owns what "wrote" means for its agent's tools.
        index = self._session().first_write(self._relative(path))
        if index is not None:
            return index
        if isinstance(default, _Raise):
            raise Unjudged(f"no call wrote {path}")
        return default

    @property
    def skills_expanded(self) -> frozenset[str]:
        """Skills whose body arrived in the prompt (``/skill:<name>``): nothing left to read."""
        self._session_reads += 1
        cached = self._cache.get("skills_expanded")
        if cached is None:
            cached = self._cache["skills_expanded"] = frozenset(self._session().skills_expanded())
        return cached

    @property
    def session_notes(self) -> tuple[str, ...]:
        """What the session log says against itself, one sentence each (empty when nothing).

        Lines that could not be read, results that answer no call, recorded work the
        active branch leaves out... ``@validator`` adds them to the reason of every
        metric whose computation read the session (a callable metric: while it ran;
        a plain value: while the function's body ran).
        """
        if self._context.get("session") is None:
            return ()
        return tuple(getattr(self._session(), "notes", ()))

    def _session_noted(self, reason: str, read: bool) -> str:
        """``reason`` with the session's notes added, when the metric read the session."""
        if not read or self._context.get("session") is None:
            return reason
        try:
            notes = [note for note in self.session_notes if note not in reason]
        except Exception:  # noqa: BLE001 - an unreadable log already spoke through the metric
            return reason
        if not notes:
            return reason
        said = "session: " + "; ".join(notes)
        return f"{reason} ({said})" if reason else said

    def _relative(self, path: str | os.PathLike[str]) -> str:
        text = os.fspath(path).replace(os.sep, "/")
        repo = self._context.get("repo")
        if repo and os.path.isabs(text):
            rel = os.path.relpath(text, repo).replace(os.sep, "/")
            if not rel.startswith("../"):
                return rel
        while text.startswith("./"):
            text = text[2:]
        return text

    def __repr__(self) -> str:
        where = self.source or self._context.get("repo")
        return f"Assay({where!r})"


# --- turning what a validator returned into the printed JSON -------------------------


class _ValidatorBug(Exception):
    """A validator produced something that is not a measurement."""


class _RunRefused(Exception):
    """The validator's body raised ``Unjudged``: the whole run cannot be judged."""


def _json_value(name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _ValidatorBug(f"metric {name!r} is {value}, which JSON cannot carry")
        return value
    if isinstance(value, (set, frozenset)):
        items = [_json_value(name, item) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, (list, tuple)):
        return [_json_value(name, item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json_value(name, item) for key, item in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise _ValidatorBug(
        f"metric {name!r} has a value of type {type(value).__name__}, which is not a measurement "
        "(use a bool, a number, a string, a set or list of them, or a Metric)"
    )


def _resolve(name: str, value: Any) -> tuple[Any, str]:
    """One metric as (JSON value, reason); a callable is evaluated here, on its own."""
    if callable(value) and not isinstance(value, type):
        try:
            value = value()
        except Unjudged as unjudged:
            return None, unjudged.reason
        except _MissingContext as error:
            raise _MissingContext(f"metric {name!r}: {error}") from None
        except Exception as error:
            raise _ValidatorBug(
                f"metric {name!r} raised {type(error).__name__}: {error}"
            ) from error
    if isinstance(value, Metric):
        return _json_value(name, value.value), value.reason
    if value is None:
        raise _ValidatorBug(
            f"metric {name!r} is None: say why with Metric.unjudged(reason) "
            "(a bare None would read as unjudged for no reason)"
        )
    if callable(value):
        raise _ValidatorBug(f"metric {name!r} returned a callable instead of a value")
    return _json_value(name, value), ""


def _misspelt(
    missing: Sequence[str], returned: Mapping[Any, Any], declared: Collection[str]
) -> str:
    """``"; it returned undeclared 'added_test' (did you mean 'added_tset'?)"`` for each
    undeclared name returned that is one typo from a missing one; empty otherwise."""
    import difflib

    said = []
    extra = [name for name in returned if isinstance(name, str) and name not in declared]
    for name in extra:
        close = difflib.get_close_matches(name, missing, n=1, cutoff=0.75)
        if close:
            said.append(f"; it returned undeclared {name!r} (did you mean {close[0]!r}?)")
    return "".join(said)


class _Validator:
    """What ``@validator`` makes of a function: callable as before, plus ``.cli()``."""

    def __init__(self, function: Callable[[Assay], Mapping[str, Any]]) -> None:
        self.function = function
        self.name = getattr(function, "__name__", "validator")
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    def __call__(self, run: Assay) -> Mapping[str, Any]:
        return self.function(run)

    def evaluate(self, run: Assay) -> tuple[dict[str, Any], dict[str, str]]:
        """Call the function and resolve every metric: ``(metrics, reasons)``.

        Raises ``_ValidatorBug`` for a bug (a declared metric missing included),
        ``_RunRefused`` for an ``Unjudged`` raised from the body, or the function's
        own exception.
        """
        try:
            returned = self.function(run)
        except Unjudged as unjudged:
            # Raised from the body, not from one metric: the run answered nothing, and
            # that is a refused run (invalid), never a valid run scoring 0/0.
            raise _RunRefused(
                f"{self.name}() raised Unjudged outside any metric, so the run is refused: "
                f"{unjudged.reason} (wrap a metric the run cannot answer in a callable "
                "to leave only that metric unjudged)"
            ) from None
        if not isinstance(returned, dict):
            raise _ValidatorBug(
                f"{self.name}() returned {type(returned).__name__}, not a dict of metrics"
            )
        # Checked before any callable runs: a forgotten metric is refused without
        # paying for the others (a suite, a session read).
        missing = sorted(run.declared - returned.keys())
        if missing:
            listed = ", ".join(repr(m) for m in missing)
            typos = _misspelt(missing, returned, run.declared)
            raise _ValidatorBug(
                f"{self.name}() did not return the declared metric"
                f"{'s' if len(missing) > 1 else ''} {listed}{typos}"
            )
        metrics: dict[str, Any] = {}
        reasons: dict[str, str] = {}
        body_read = run._session_reads > 0
        for name, value in returned.items():
            if not isinstance(name, str) or not name:
                raise _ValidatorBug(f"{self.name}() returned a metric named {name!r}")
            reads = run._session_reads
            metrics[name], reason = _resolve(name, value)
            lazy = callable(value) and not isinstance(value, type)
            reason = run._session_noted(reason, run._session_reads > reads if lazy else body_read)
            if reason:
                reasons[name] = reason
        return metrics, reasons

    def cli(self, argv: Sequence[str] | None = None) -> int:
        """Run as a script-mode validator: ``argv[1]`` is the context file.

        Prints ``{"metrics": ..., "reasons": ...}`` and returns 0, or says what went
        wrong on stderr and returns 1 (2 for a wrong command line) having printed
        nothing on stdout.
        """
        args = list(sys.argv if argv is None else argv)
        program = os.path.basename(args[0]) if args else self.name
        if len(args) != 2:
            print(f"usage: {program} CONTEXT.json", file=sys.stderr)
            return 2
        try:
            run = Assay.load(args[1])
        except (OSError, ValueError) as error:
            print(f"{program}: cannot read the context {args[1]}: {error}", file=sys.stderr)
            return 1
        stdout = sys.stdout
        # Stray print()s from the validator go to stderr: stdout carries the verdict only.
        sys.stdout = sys.stderr
        try:
            metrics, reasons = self.evaluate(run)
        except (_MissingContext, _RunRefused) as error:
            print(f"{program}: {error}", file=sys.stderr)
            return 1
        except _ValidatorBug as error:
            print(f"{program}: {error}", file=sys.stderr)
            if error.__cause__ is not None:
                _print_traceback(error.__cause__)
            return 1
        except Exception as error:  # noqa: BLE001 - a bug must not read as a measurement
            _print_traceback(error)
            print(
                f"{program}: {self.name}() failed: {type(error).__name__}: {error}", file=sys.stderr
            )
            return 1
        finally:
            sys.stdout = stdout
        text = json.dumps({"metrics": metrics, "reasons": reasons}, sort_keys=True)
        stdout.write(text + "\n")
        stdout.flush()
        return 0


def _print_traceback(error: BaseException) -> None:
    import traceback

    traceback.print_exception(error, file=sys.stderr)


def validator(function: Callable[[Assay], Mapping[str, Any]]) -> _Validator:
    """Make ``function(run) -> {metric: value}`` a script-mode validator (``.cli()``)."""
    return _Validator(function)
