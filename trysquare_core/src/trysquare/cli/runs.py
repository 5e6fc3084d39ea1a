"""Commands on one run: ``record`` (write its run.toml), ``context`` (what a validator is handed)
and ``session`` (what its session log says).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from trysquare._shown import shown
from trysquare.cli.common import _load
from trysquare.errors import NoRunsError, TrysquareError, UsageError


def _context(args: argparse.Namespace) -> int:
    from trysquare import context as contexts
    from trysquare.runs import RUN_FILE, load_run

    scenario = _load(args.scenario, args.config)
    if not scenario.validations:
        raise UsageError(f"{scenario.path.name} declares no [[validation]]")
    validation = scenario.validation(args.validator) if args.validator else scenario.validations[0]
    if not (args.run_dir / RUN_FILE).is_file():
        raise NoRunsError(
            f"{args.run_dir}: no {RUN_FILE} here (a run is a folder holding {RUN_FILE})"
        )
    run = load_run(args.run_dir / RUN_FILE)
    facts = contexts.gather_facts(run)
    sys.stdout.write(
        contexts.dump_context(contexts.build_context(scenario, run, validation, facts))
    )
    return 0


def _session(args: argparse.Namespace) -> int:
    from trysquare import _atomic, sessions
    from trysquare.errors import RepoError, RunError
    from trysquare.git.changes import changed_files
    from trysquare.runs import RUN_FILE, load_run

    path: Path = args.session_path
    clone: Path | None = args.repo
    session_format: str | None = args.session_format
    touched: list[str] = []
    if (path / RUN_FILE).is_file():
        run = load_run(path / RUN_FILE)
        if run.session is None:
            raise RunError(f"{path / RUN_FILE}: the run names no session log")
        if run.base_commit is not None:
            try:
                touched = sorted(changed_files(run.repo, run.base_commit, run.excluded))
            except RepoError as error:
                raise RunError(f"{path / RUN_FILE}: {error.message}") from None
        path, clone = run.session, clone or run.repo
        session_format = session_format or run.session_format
    elif not path.exists():
        raise UsageError(f"{path}: no such file or folder (give a run folder or a session log)")
    from trysquare.sessions.facts import session_facts

    reading = sessions.open_session(path, format=session_format, repo=clone)
    sys.stdout.write(_atomic.dump_json(session_facts(reading, touched)))
    return 0


def _record(args: argparse.Namespace) -> int:
    from trysquare import _atomic
    from trysquare.context import preflight
    from trysquare.git.refs import missing_at
    from trysquare.runs import RUN_FILE, load_run, run_toml

    target = args.run_dir / RUN_FILE
    if target.exists() and not args.force:
        raise UsageError(f"{target} exists already (use --force to replace it)")
    if args.etalon_checkout and not args.etalon_tag:
        raise UsageError("--etalon-checkout needs --etalon-tag")
    folder = args.run_dir.absolute()
    stored = {
        flag: None if value is None else _relative_to_run(folder, value)
        for flag, value in (
            ("repo", args.repo), ("prompt", args.prompt), ("session", args.session),
            ("trace", args.trace), ("etalon_checkout", args.etalon_checkout),
        )
    }  # fmt: skip
    repo_text = stored["repo"] or "repo"
    clone = folder / repo_text
    # Pinned: `HEAD` now is the commit meant; HEAD later may be another.
    base = _record_base(clone, repo_text, args.base, args.etalon_tag, args.given)
    missing = missing_at(clone, base, args.given) if args.given else []
    if missing:
        raise UsageError(f"--given {missing[0]}: not a file at base {base} in {clone}")
    etalon = None
    if args.etalon_tag:
        etalon = {"tag": args.etalon_tag}
        if stored["etalon_checkout"]:
            etalon["checkout"] = stored["etalon_checkout"]
    text = run_toml(
        {
            "id": args.id,
            "cell": args.cell,
            "repetition": args.repetition,
            "repo": repo_text,
            "base": base,
            "prompt": stored["prompt"],
            "session": stored["session"],
            "session_format": args.session_format,
            "trace": stored["trace"],
            "model": args.model,
            "given": sorted(set(args.given)),
            "excluded": list(dict.fromkeys(args.exclude)) or None,
            "etalon": etalon,
        }
    )
    previous = target.read_bytes() if target.exists() else None
    _atomic.write_text(target, text)
    try:
        run = load_run(target)
        preflight(run)
    except TrysquareError as error:
        # Never leave a run.toml behind that trysquare itself cannot use.
        if previous is None:
            target.unlink()
        else:
            _atomic.write_bytes(target, previous)
        raise UsageError(error.message) from None
    print(shown(f"wrote {target} (run '{run.id}', cell '{run.cell}', base {base[:12]})"))
    return 0


def _relative_to_run(folder: Path, value: str) -> str:
    """A path typed relative to the current directory, as run.toml stores it: relative
    to the run folder (POSIX separators), so the run folder can move as a whole."""
    path = Path(value).expanduser()
    return Path(os.path.relpath(path.absolute(), folder)).as_posix()


def _record_base(
    clone: Path, repo_text: str, base: str | None, tag: str | None, given: list[str]
) -> str:
    """The commit ``record`` pins: ``--base`` as named, else HEAD only when HEAD is the
    etalon's commit or the one commit adding the given files on top of it."""
    from trysquare.errors import RepoError
    from trysquare.git.refs import commits_between, parent_of, paths_between, resolve_commit

    try:
        if base is not None:
            return resolve_commit(clone, base)
        try:
            head = resolve_commit(clone, "HEAD", what="HEAD")
        except RepoError:
            if (clone / ".git").exists():
                raise UsageError(
                    f"--repo {repo_text}: the clone has no commit: commit the base (the tree the "
                    "agent started from) first, or name it with --base"
                ) from None
            raise
        if tag is None:
            raise UsageError(
                f"--base is needed: without --etalon-tag, record cannot tell whether HEAD "
                f"({head[:12]}) of {repo_text} is where the agent started or the agent's own commit"
            )
        try:
            etalon = resolve_commit(clone, tag, what="etalon tag")
        except RepoError:
            raise UsageError(
                f"--etalon-tag {tag}: no tag '{tag}' naming a commit in the clone {repo_text} "
                "(`git tag` in the clone lists its tags)"
            ) from None
    except RepoError as error:
        raise UsageError(f"--repo {repo_text} / --base {base or 'HEAD'}: {error.message}") from None
    if head == etalon:
        return head
    if (
        given
        and parent_of(clone, head) == etalon
        and paths_between(clone, etalon, head) <= set(given)
    ):
        return head  # the harness's commit of the given files, on top of the etalon
    ahead = commits_between(clone, etalon, head)
    raise UsageError(
        f"HEAD of {repo_text} is {ahead} commit{'s' if ahead != 1 else ''} past the etalon "
        f"'{tag}' ({etalon[:12]}) and is not the commit adding the given files: it may hold the "
        "agent's committed work, so record will not guess; name the commit the agent started "
        "from with --base"
    )
