"""The validator author's inner loop: ``trysquare try`` and ``trysquare init``.

``try SCENARIO RUN_DIR --validator NAME`` scores one run with one validator and
records nothing: everything validation writes (the context, ``diff.patch``,
``response.md``, the work record, the result and its stderr) goes into a scratch
copy of the run folder that is deleted afterwards. The measured clone is read
in place, under the same guard and sandbox as ``validate``, so a validator that
writes into it is caught the same way.

``init [DIR]`` writes a scenario, a ``trysquare.assay`` validator and its pytest
test (with the fixtures ``trysquare-core`` ships) that pass as written.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import attrs

from trysquare._shown import shown
from trysquare.errors import NoRunsError, RunError, UsageError

if TYPE_CHECKING:
    from trysquare.modes import Validation
    from trysquare.runs import Run
    from trysquare.scenario import Scenario

__all__ = ["Scored", "add_commands", "init_project", "score_once", "try_validator"]

# What init writes, from the files beside this module, in this order.
INIT_FILES = ("scenario.toml", "validator.py", "test_validator.py")
_TEMPLATES = Path(__file__).with_name("_init_template")


def add_commands(commands: Any) -> None:
    """Add ``try`` and ``init`` to the ``trysquare`` subcommands."""
    attempt = commands.add_parser(
        "try",
        help="run one validator on one run and print its result; records nothing",
        description="Score RUN_DIR with one validator of SCENARIO in a scratch copy of the run "
        "folder and print its metrics, reasons and stderr. Nothing is written into the run "
        "folder. Exit 0 when the validator produced a result (whatever its metrics), 1 when "
        "its result is invalid or the run cannot be read, 2 when the scenario does not load. "
        "Paths are relative to the current directory.",
        epilog="example:\n  trysquare try scenario.toml runs/r1 --validator tests_pass",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    attempt.add_argument(
        "scenario", type=Path, help="the scenario.toml (relative to the current directory)"
    )
    attempt.add_argument(
        "run_dir",
        type=Path,
        help="the run folder holding run.toml (relative to the current directory)",
    )
    attempt.add_argument("--validator", metavar="NAME", help="the validator (default: the first)")
    attempt.add_argument(
        "--config", type=Path, metavar="FILE",
        help="trysquare.toml (default: the nearest above the scenario)",
    )  # fmt: skip
    attempt.add_argument("--json", action="store_true", help="print the result as one JSON object")
    attempt.set_defaults(handler=_try_command)

    init = commands.add_parser(
        "init",
        help="write a scenario, a validator and its pytest test that pass as written",
        description=f"Write {', '.join(INIT_FILES)} into DIR (default: the current directory), "
        "refusing to replace any file. Then: `pytest DIR` and `trysquare check DIR/scenario.toml`.",
        epilog="example:\n  trysquare init my-metrics && cd my-metrics && uv run pytest",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.add_argument(
        "dir", nargs="?", type=Path, default=Path("."),
        help="where to write them (relative to the current directory; default: it)",
    )  # fmt: skip
    kind = init.add_mutually_exclusive_group()
    kind.add_argument(
        "--python", dest="project", action="store_const", const="python",
        help="for a Python project: the suite is unittest (the default)",
    )  # fmt: skip
    kind.add_argument(
        "--node", dest="project", action="store_const", const="node",
        help="for a Node (JavaScript/TypeScript) project: the suite is `node --test`",
    )  # fmt: skip
    init.set_defaults(handler=_init_command, project="python")


# --- try --------------------------------------------------------------------------------------


@attrs.frozen
class Scored:
    """One validator's result on one run, as :func:`score_once` recorded it."""

    document: Mapping[str, Any]  # what validation/<name>.json holds
    context: Mapping[str, Any]  # what the validator was handed
    stderr: str  # validation/<name>.stderr ("" when none was kept)
    # What validation changed in the measured clone (None: nothing, or not looked at)
    clone_changes: str | None


def score_once(scenario: Scenario, run: Run, validation: Validation) -> Scored:
    """Score ``run`` with ``validation`` the way ``validate`` does, writing into ``run.dir``.

    The runner's own path, in process: the facts gathered, the clone checked
    against its recorded work and pictured, the context built and archived, the
    mode's ``evaluate`` run through :func:`trysquare.execute.execute_task`, and the
    clone compared with its picture afterwards (said in ``clone_changes``; the
    document is left as recorded). The caller has made the refusals
    ``validation.check_runs`` makes. Raises :class:`RunError` when the run's
    context cannot be built.
    """
    from trysquare import _atomic, clone_guard, results
    from trysquare import context as contexts
    from trysquare.execute import PlannedTask, execute_task
    from trysquare.modes import ValidationTask

    facts = contexts.gather_facts(run)
    clone_before = clone_guard.picture_clone(run, facts)
    context = contexts.build_context(scenario, run, validation, facts)
    text = contexts.dump_context(context)
    context_path = results.archive_dir(run, validation.name) / "context.json"
    try:
        results.refuse_planted_links(run, validation.name)
        _atomic.write_text(context_path, text, root=run.dir)
    except _atomic.UnsafePath as unsafe:
        raise RunError(f"{run.label}: {unsafe}") from None
    context_digest = contexts.context_digest(text, context, root=run.dir, validation=validation)
    digest = validation.digest()
    previous = results.read_result(run, validation.name)
    recorded = (previous or {}).get("validator")
    task = ValidationTask(
        run=run,
        validation=validation,
        context=context,
        context_path=context_path,
        previous=previous,
        previous_current=previous is not None
        and previous.get("context_digest") == context_digest
        and isinstance(recorded, Mapping)
        and recorded.get("digest") == digest,
        protected_env=frozenset(scenario.protected_env),
        suite_pass_env=scenario.task.pass_env,
        jail=scenario.task.jail,
    )
    planned = PlannedTask(
        task=task,
        digest=digest,
        context_digest=context_digest,
        declared_elsewhere={
            m: v.name for m, v in scenario.declared_metrics.items() if v.name != validation.name
        },
        clone_before=clone_before,
    )
    result = execute_task(planned)
    assert result is not None  # only an interruption records nothing
    document = result.document
    changes = None if clone_before is None else clone_guard.clone_changes(run, clone_before)
    stderr_path = run.validation_dir / f"{validation.name}.stderr"
    try:
        stderr = _atomic.read_bytes(stderr_path, root=run.dir).decode("utf-8", "replace")
    except FileNotFoundError:
        stderr = ""
    return Scored(document=document, context=context, stderr=stderr, clone_changes=changes)


def _scratch_run(run: Run, scratch: Path, name: str) -> Run:
    """``run`` with its folder moved to ``scratch``: trysquare's files there, the clone in place.

    What trysquare already recorded about the run (the pinned base, the work
    record, validator ``name``'s current result, which a form reads its answers
    from) and a ``response.md`` written by whoever ran the agent are copied
    first, without following a symlink, so the run is checked as ``validate``
    would check it.
    """
    from trysquare import _atomic
    from trysquare.clone_guard import WORK_FILE
    from trysquare.context import RESPONSE_FILE
    from trysquare.runs import BASE_PIN

    scratch.mkdir()
    result = Path("validation") / f"{name}.json"
    for relative in (BASE_PIN, WORK_FILE, Path(RESPONSE_FILE), result):
        try:
            data = _atomic.read_bytes(run.dir / relative, root=run.dir)
        except FileNotFoundError:
            continue
        except OSError as error:  # UnsafePath included: a planted symlink
            raise RunError(f"{run.label}: {error}") from None
        _atomic.write_bytes(scratch / relative, data, root=scratch)
    return attrs.evolve(run, dir=scratch)


def try_validator(
    scenario_path: Path,
    run_dir: Path,
    name: str | None = None,
    *,
    config: Path | None = None,
    as_json: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """``trysquare try``: score one run with one validator, print the result, record nothing.

    Returns the exit code: 0 when the validator produced a result (valid or
    pending, whatever its metrics), 1 when its result is invalid. Raises the
    refusal (a :class:`trysquare.errors.TrysquareError`) when it could not run.
    """
    from trysquare.runs import RUN_FILE, load_run
    from trysquare.scenario import load_scenario

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    scenario = load_scenario(scenario_path, config=config)
    if not scenario.validations:
        raise UsageError(f"{scenario.path.name} declares no [[validation]]")
    validation = scenario.validation(name) if name else scenario.validations[0]
    if not (run_dir / RUN_FILE).is_file():
        raise NoRunsError(f"{run_dir}: no {RUN_FILE} here (a run is a folder holding {RUN_FILE})")
    run = load_run(run_dir / RUN_FILE)
    for line in validation.check_runs(scenario, [run]):  # e.g. the judge's blinding line
        err.write(shown(line) + "\n")
    with tempfile.TemporaryDirectory(prefix="trysquare-try-") as folder:
        scratch = Path(folder) / "run"

        def as_run(text: str) -> str:
            # Messages name the scratch copy; the user knows the run by its own folder.
            return text.replace(str(scratch), str(run.dir))

        try:
            scored = score_once(scenario, _scratch_run(run, scratch, validation.name), validation)
        except RunError as error:
            raise RunError(as_run(error.message)) from None
        document = json.loads(as_run(json.dumps(scored.document)))
        if scored.clone_changes is not None:
            # As validate does: a validation that wrote into the clone measured nothing.
            document.update(state="invalid", error=as_run(scored.clone_changes))
        stderr = scored.stderr
    if as_json:
        shown_doc = {key: document.get(key) for key in ("metrics", "reasons", "state", "error")}
        shown_doc.update(validator=validation.name, run=run.id, stderr=stderr, recorded=False)
        out.write(json.dumps(shown_doc, indent=2, sort_keys=True) + "\n")
    else:
        _print_result(out, validation, run, document)
    if stderr and not as_json:
        err.write(f"--- stderr of validator '{shown(validation.name)}' ---\n")
        err.write(shown(stderr, newlines=True).rstrip("\n") + "\n")
    if document["state"] == "invalid":
        err.write(
            shown(
                f"trysquare: validator '{validation.name}' could not score run '{run.id}': "
                f"{document.get('error')}"
            )
            + "\n"
        )
        return 1
    return 0


def _print_result(
    out: TextIO, validation: Validation, run: Run, document: Mapping[str, Any]
) -> None:
    """The result as a person reads it: one metric a line, its reason beside it."""
    out.write(
        shown(
            f"validator '{validation.name}' ({validation.mode}) on run '{run.id}' "
            f"(cell '{run.cell}', repetition {run.repetition}): {document['state']}"
        )
        + "\n"
    )
    metrics: Mapping[str, Any] = document.get("metrics") or {}
    reasons: Mapping[str, str] = document.get("reasons") or {}
    width = max((len(m) for m in metrics), default=0)
    for metric in sorted(metrics, key=lambda m: (m not in validation.metrics, m)):
        value = metrics[metric]
        said = "unjudged" if value is None else json.dumps(value, ensure_ascii=False)
        line = f"  {metric.ljust(width)}  {said}"
        if metric not in validation.metrics:
            line += "  (undeclared: recorded, never scored)"
        more: list[str] = []
        if reasons.get(metric):
            # A reason's own lines (a pytest traceback) stay lines, indented under it;
            # every other control character is still shown escaped.
            first, *more = reasons[metric].split("\n")
            line += f"  -- {first}"
        out.write(shown(line) + "\n")
        out.writelines(f"      {shown(extra)}\n" for extra in more)
    missing = [m for m in validation.metrics if m not in metrics]
    if missing and document["state"] != "invalid":
        out.write(shown(f"  not yet filled: {', '.join(missing)}") + "\n")
    out.writelines(shown(f"  note: {note}") + "\n" for note in document.get("notes") or ())
    out.write(shown(f"nothing was recorded in {run.dir}") + "\n")


def _try_command(args: argparse.Namespace) -> int:
    return try_validator(
        args.scenario, args.run_dir, args.validator, config=args.config, as_json=args.json
    )


# --- init -------------------------------------------------------------------------------------


# Per kind of project: the folder holding its own templates (over the common ones), and
# the file its validator's SCOPE names.
_PROJECTS = {"python": (None, "app.py"), "node": ("node", "src/add.js")}


def init_project(target: Path, project: str = "python") -> list[Path]:
    """Write the starter files into ``target``; refuse (naming it) any file already there.

    ``project`` is ``"python"`` (a unittest suite) or ``"node"`` (``node --test``).
    Nothing is written unless every file can be: a refusal leaves ``target`` as it was.
    """
    if project not in _PROJECTS:
        raise UsageError(f"init knows no {project!r} project (known: {', '.join(_PROJECTS)})")
    own, scoped = _PROJECTS[project]
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a folder")
    paths = [target / name for name in INIT_FILES]
    for path in paths:
        if path.exists() or path.is_symlink():
            raise UsageError(
                f"{path} exists already; init never replaces a file (move it, or name another folder)"
            )
    target.mkdir(parents=True, exist_ok=True)
    for path in paths:
        source = _TEMPLATES / f"{path.name}.txt"
        if own is not None and (_TEMPLATES / own / source.name).is_file():
            source = _TEMPLATES / own / source.name
        text = source.read_text(encoding="utf-8")
        if path.name == "validator.py":
            text = text.replace(
                'SCOPE = frozenset({"app.py"})', f'SCOPE = frozenset({{"{scoped}"}})'
            )
        # Exclusive creation: a file that appeared meanwhile is refused, never replaced.
        with open(path, "x", encoding="utf-8") as handle:
            handle.write(text)
    (target / "validator.py").chmod(0o755)  # a script validator must have its run bit
    return paths


def _init_command(args: argparse.Namespace) -> int:
    written = init_project(args.dir, args.project)
    for path in written:
        print(shown(f"wrote {path}"))
    where = args.dir
    print(
        shown(
            f"next: `pytest {where}` runs the validator's tests; "
            f"`trysquare check {where / 'scenario.toml'}` loads the scenario; "
            f"`trysquare try {where / 'scenario.toml'} RUN_DIR` scores one run"
        )
    )
    return 0
