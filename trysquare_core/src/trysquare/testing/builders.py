"""Small builders for real git repositories and finished runs."""

from __future__ import annotations

import atexit
import copy
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import tomli_w

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "trysquare tests",
    "GIT_AUTHOR_EMAIL": "tests@trysquare.invalid",
    "GIT_COMMITTER_NAME": "trysquare tests",
    "GIT_COMMITTER_EMAIL": "tests@trysquare.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


class GitRepo:
    """A real git repository in ``path``, driven with plain git commands."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def init(cls, path: Path, files: Mapping[str, str] | None = None) -> GitRepo:
        """Create a repository; with ``files``, write and commit them as the base."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        repo = cls(path)
        skeleton = _empty_git_dir()
        if (path / ".git").exists() or skeleton is None:
            repo.git("init", "-q", "-b", "main")
            # What `git config commit.gpgsign false` writes, without a second process.
            with open(path / ".git" / "config", "a", encoding="utf-8") as config:
                config.write("[commit]\n\tgpgsign = false\n")
        else:
            shutil.copytree(skeleton, path / ".git", symlinks=True)
        if files:
            repo.write_files(files)
            repo.commit("base")
        return repo

    def git(self, *args: str) -> str:
        env = {**os.environ, **_GIT_ENV, "HOME": os.environ.get("HOME", "/tmp")}
        done = subprocess.run(
            ["git", *args], cwd=self.path, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def write(self, rel: str, text: str | bytes, *, mode: int | None = None) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_text(text, encoding="utf-8")
        if mode is not None:
            target.chmod(mode)
        return target

    def write_files(self, files: Mapping[str, str | bytes]) -> None:
        for rel, text in files.items():
            self.write(rel, text)

    def delete(self, rel: str) -> None:
        (self.path / rel).unlink()

    def stage(self, *paths: str) -> None:
        self.git("add", "--", *(paths or (".",)))

    def commit(self, message: str = "change", *, all: bool = True) -> str:
        if all:
            self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self._loose_head() or self.head()

    def tag(self, name: str) -> None:
        self.git("tag", name)

    def rename(self, old: str, new: str) -> None:
        self.git("mv", old, new)

    def ignore(self, *patterns: str) -> None:
        with open(self.path / ".gitignore", "a", encoding="utf-8") as handle:
            handle.write("".join(f"{p}\n" for p in patterns))

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def _loose_head(self) -> str | None:
        """HEAD read from its loose ref file, as git would (None when it is elsewhere)."""
        try:
            head = (self.path / ".git" / "HEAD").read_text(encoding="utf-8").strip()
            if not head.startswith("ref: refs/"):
                return head if len(head) in (40, 64) else None
            value = (
                (self.path / ".git" / head.removeprefix("ref: "))
                .read_text(encoding="utf-8")
                .strip()
            )
        except OSError:
            return None
        return value if len(value) in (40, 64) else None


_SKELETON: list[Path | None] = []
_SKELETON_LOCK = threading.Lock()


def _empty_git_dir() -> Path | None:
    """A ``.git`` as ``git init -b main`` leaves it, made once per process and copied after.

    Made by git itself (its own probes of the file system decide ``core.*``), from an
    empty template plus the empty ``hooks/`` and ``info/`` folders a clone has: git's
    default template adds a dozen ``hooks/*.sample`` scripts and a ``description`` that
    no test reads, but that every copy of a run, and every look of trysquare's guard
    at the clone's ``.git``, paid for. None when git cannot make one (the caller runs
    ``git init`` in place).
    """
    with _SKELETON_LOCK:
        if not _SKELETON:
            root = Path(tempfile.mkdtemp(prefix="trysquare-empty-git-"))
            atexit.register(shutil.rmtree, root, ignore_errors=True)
            (root / "template").mkdir()
            try:
                GitRepo(root).git(
                    "init", "-q", "-b", "main", "--template", str(root / "template"), "repo"
                )
            except RuntimeError:
                _SKELETON.append(None)
            else:
                skeleton = root / "repo" / ".git"
                for folder in ("hooks", "info"):
                    (skeleton / folder).mkdir(exist_ok=True)
                # What `git config commit.gpgsign false` writes, without a second process.
                with open(skeleton / "config", "a", encoding="utf-8") as config:
                    config.write("[commit]\n\tgpgsign = false\n")
                _SKELETON.append(skeleton)
        return _SKELETON[0]


def write_pi_session(path: Path, events: Iterable[Mapping[str, Any]], *, cwd: str) -> Path:
    """Write a minimal pi (v3) session log: a header, then ``events`` chained by id."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": "s",
            "cwd": cwd,
            "timestamp": "2026-01-01T00:00:00Z",
        }
    ]
    parent = None
    for number, event in enumerate(events):
        entry = {
            "id": f"e{number}",
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:00Z",
            **event,
        }
        parent = entry["id"]
        lines.append(entry)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


class RunBuilder:
    """A finished run: a clone with a base commit, the agent's changes, a prompt, a run.toml.

    With ``tmp`` an empty folder:

    >>> run = RunBuilder(tmp / "runs" / "a1", cell="rule", repetition=1)
    >>> base_commit = run.base({"counter.py": "..."})
    >>> changed = run.repo.write("counter.py", "fixed")
    >>> (run.finish() / "run.toml").is_file()
    True
    """

    def __init__(
        self,
        path: Path,
        *,
        cell: str = "default",
        repetition: int = 1,
        prompt: str = "Fix the counter.",
        model: str | None = None,
        etalon_tag: str | None = "etalon-v1",
    ) -> None:
        self.path = Path(path)
        self.cell = cell
        self.repetition = repetition
        self.prompt = prompt
        self.model = model
        self.etalon_tag = etalon_tag
        self.repo = GitRepo.init(self.path / "repo")
        self.base_commit: str | None = None
        self.given: list[str] = []
        self.extra: dict[str, Any] = {}

    def _moved(self, path: Path) -> RunBuilder:
        """This builder's state for a copy of its run folder at ``path``."""
        moved = copy.copy(self)
        moved.path = path
        moved.repo = GitRepo(path / "repo")
        moved.given = list(self.given)
        moved.extra = dict(self.extra)
        return moved

    def base(self, files: Mapping[str, str | bytes], given: Mapping[str, str] | None = None) -> str:
        """Commit the etalon (tagged), then the given files on top: that commit is ``base``."""
        recipe = _recipe(files, given, {"etalon_tag": self.etalon_tag})
        if self._fresh_clone():
            copied = _TEMPLATES.copy_clone(recipe, self.repo.path)
            if copied is not None:
                self.base_commit, self.given = copied, sorted(given or ())
                return copied
        else:
            recipe = ""
        self.repo.write_files(files)
        head = self.repo.commit("etalon")
        if self.etalon_tag:
            self.repo.tag(self.etalon_tag)
        if given:
            self.repo.write_files(given)
            head = self.repo.commit("given")
            self.given = sorted(given)
        self.base_commit = head
        if recipe:
            _TEMPLATES.keep_clone(recipe, self.repo.path, head)
        return self.base_commit

    def _fresh_clone(self) -> bool:
        """Whether the clone is as ``git init`` left it (no file, no commit yet)."""
        try:
            entries = [entry.name for entry in os.scandir(self.repo.path)]
            heads = os.listdir(self.repo.path / ".git" / "refs" / "heads")
        except OSError:
            return False
        return (
            entries == [".git"]
            and not heads
            and not (self.repo.path / ".git" / "packed-refs").exists()
        )

    def finish(
        self, *, response: str | None = None, session: Sequence[Mapping[str, Any]] | None = None
    ) -> Path:
        """Write prompt, optional response/session, and run.toml; return the run folder."""
        (self.path / "prompt.txt").write_text(self.prompt, encoding="utf-8")
        doc: dict[str, Any] = {
            "cell": self.cell,
            "repetition": self.repetition,
            "repo": "repo",
            "base": self.base_commit or "HEAD",
            "prompt": "prompt.txt",
            "given": self.given,
        }
        if self.model:
            doc["model"] = self.model
        if response is not None:
            (self.path / "response.md").write_text(response, encoding="utf-8")
        if session is not None:
            write_pi_session(self.path / "session.jsonl", session, cwd=str(self.repo.path))
            doc["session"] = "session.jsonl"
        if self.etalon_tag:
            doc["etalon"] = {"tag": self.etalon_tag}
        doc.update(self.extra)
        (self.path / "run.toml").write_text(tomli_w.dumps(doc), encoding="utf-8")
        return self.path


def run_from_folders(
    path: Path,
    base: Path,
    change: Path | None = None,
    *,
    given: Path | None = None,
    commands: Sequence[Sequence[str]] = (),
    **options: Any,
) -> RunBuilder:
    """A finished run built from folders of plain files (fixtures carry no ``.git``).

    ``base``'s files are committed as the etalon (tagged), ``given``'s on top of it
    (that commit is the run's base), then ``change``'s files are written over the
    working tree as the agent's uncommitted work, and each of ``commands`` runs in
    the clone the way the agent ran it (a suite it ran to check itself leaves its
    by-products there). ``options`` go to ``RunBuilder``; the run is finished.
    """

    def read(folder: Path) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for item in sorted(Path(folder).rglob("*")):
            rel = item.relative_to(folder)
            # Bytecode left in a fixture folder by running it in place is not part of it.
            if item.is_file() and "__pycache__" not in rel.parts and item.suffix != ".pyc":
                files[rel.as_posix()] = item.read_bytes()
        return files

    run = RunBuilder(path, **options)
    run.base(read(base), given={k: v.decode() for k, v in read(given).items()} if given else None)
    if change is not None:
        run.repo.write_files(read(change))
    # Python's own by-products are part of what the agent left: let them be written.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    for argv in commands:
        subprocess.run(list(argv), cwd=run.repo.path, env=env, capture_output=True, check=False)
    run.finish()
    return run


def build_run(
    path: Path,
    *,
    base: Mapping[str, str | bytes],
    changes: Mapping[str, str | bytes] | None = None,
    deleted: Sequence[str] = (),
    given: Mapping[str, str] | None = None,
    commit: bool = False,
    response: str | None = None,
    session: Sequence[Mapping[str, Any]] | None = None,
    **options: Any,
) -> RunBuilder:
    """A finished run in one call: the etalon ``base``, then the agent's ``changes``.

    ``given`` files are committed on top of the etalon (that commit is the run's
    base); ``changes`` are written and ``deleted`` removed in the working tree,
    left uncommitted unless ``commit`` (an agent that commits its work). A
    ``response`` is written as ``response.md``; ``session`` events as a pi log.
    ``options`` go to :class:`RunBuilder` (``cell``, ``repetition``, ``prompt``...).
    """
    path = Path(path)
    recipe = None
    # A session log names the clone's absolute path: such a run is always built in place.
    if session is None and not (path.exists() and any(path.iterdir())):
        recipe = _recipe(base, changes, deleted, given, commit, response, options)
        copied = _TEMPLATES.copy(
            recipe, path, options.get("cell", "default"), options.get("repetition", 1)
        )
        if copied is not None:
            return copied
    run = RunBuilder(path, **options)
    run.base(base, given=given)
    run.repo.write_files(changes or {})
    for rel in deleted:
        run.repo.delete(rel)
    if commit:
        run.repo.commit("agent")
    run.finish(response=response, session=session)
    if recipe is not None:
        _TEMPLATES.keep(recipe, run)
    return run


def _recipe(*parts: Any) -> str:
    """What decides a built run's content but its cell and repetition, as one key."""
    *content, options = parts
    kept = {k: v for k, v in options.items() if k not in ("cell", "repetition")}
    canonical = repr(
        [sorted(p.items()) if isinstance(p, Mapping) else p for p in content]
        + [sorted(kept.items())]
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class _Templates:
    """Runs, and clones at their base commit, built once per process and copied after (a
    copy of a real run is a real run).

    Building one costs five git processes; tests build the same run again and again
    (the same etalon and changes in another cell, another test, a parametrized case).
    A copy differs only in the clone's inode numbers and ctimes, which git re-checks
    against the content, so ``git status`` and every check see the same run.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.root: Path | None = None
        self.kept: dict[str, RunBuilder] = {}
        self.heads: dict[str, str] = {}

    def keep(self, recipe: str, run: RunBuilder) -> None:
        with self.lock:
            if recipe in self.kept:
                return
            target = self._folder() / recipe
            shutil.copytree(run.path, target, symlinks=True)
            self.kept[recipe] = run._moved(target)

    def copy(self, recipe: str, path: Path, cell: str, repetition: int) -> RunBuilder | None:
        with self.lock:
            template = self.kept.get(recipe)
        if template is None or not template.path.is_dir():
            return None
        shutil.copytree(template.path, path, symlinks=True, dirs_exist_ok=True)
        _set_cell(path, cell, repetition)
        copied = template._moved(path)
        copied.cell, copied.repetition = cell, repetition
        return copied

    def keep_clone(self, recipe: str, clone: Path, head: str) -> None:
        """Keep a clone just after its base commits (``head``), for :meth:`copy_clone`."""
        with self.lock:
            if recipe in self.heads:
                return
            target = self._folder() / f"clone-{recipe}"
            shutil.copytree(clone, target, symlinks=True)
            self.heads[recipe] = head

    def copy_clone(self, recipe: str, clone: Path) -> str | None:
        """Replace a fresh clone by the kept one of ``recipe``; its base commit (None: none kept)."""
        with self.lock:
            head = self.heads.get(recipe)
        if head is None or self.root is None:
            return None
        shutil.rmtree(clone / ".git")
        shutil.copytree(self.root / f"clone-{recipe}", clone, symlinks=True, dirs_exist_ok=True)
        return head

    def _folder(self) -> Path:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="trysquare-built-runs-"))
            atexit.register(shutil.rmtree, self.root, ignore_errors=True)
        return self.root


_TEMPLATES = _Templates()


# A run's own content in a matrix: a mapping for every run alike, or one per (id, cell, repetition).
PerRun = Callable[[str, str, int], Any]


def build_matrix(
    experiment: Path,
    runs: Iterable[tuple[str, str, int]],
    *,
    base: Mapping[str, str | bytes],
    changes: Mapping[str, str | bytes] | PerRun = MappingProxyType({}),
    response: str | PerRun | None = None,
    template: Path | None = None,
    **options: Any,
) -> dict[str, Path]:
    """Finished runs ``experiment/runs/<id>``, one per ``(id, cell, repetition)``; their folders by id.

    When ``changes`` and ``response`` are the same for every run, one real run is
    built (at ``template`` when given and absent, else as the first run) and copied:
    the copies differ only in cell and repetition, so 10,000 runs cost one
    ``git init``. When either is a callable of ``(id, cell, repetition)``, each run
    is built with real git from its own content. ``options`` go to :class:`RunBuilder`.
    """
    folders: dict[str, Path] = {}
    per_run = callable(changes) or callable(response)
    for run_id, cell, repetition in runs:
        target = experiment / "runs" / run_id
        if per_run:
            build_run(
                target, base=base, cell=cell, repetition=repetition,
                changes=changes(run_id, cell, repetition) if callable(changes) else changes,
                response=response(run_id, cell, repetition) if callable(response) else response,
                **options,
            )  # fmt: skip
        else:
            if template is None:
                template = target
            if not (template / "run.toml").exists():
                build_run(template, base=base, changes=changes, response=response, **options)  # type: ignore[arg-type]
            if target != template:
                copy_run(template, target)
            _set_cell(target, cell, repetition)
        folders[run_id] = target
    return folders


def copy_run(source: Path, target: Path) -> Path:
    """A copy of a finished run (its clone and ``.git`` too), links kept as links."""
    shutil.copytree(source, target, symlinks=True)
    return target


def _set_cell(run_dir: Path, cell: str, repetition: int) -> None:
    path = run_dir / "run.toml"
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    if (doc.get("cell"), doc.get("repetition")) != (cell, repetition):
        doc.update(cell=cell, repetition=repetition)
        path.write_text(tomli_w.dumps(doc), encoding="utf-8")


def write_result(
    run_dir: Path, name: str, document: Mapping[str, Any], *, signed: bool = True
) -> Path:
    """Write ``validation/<name>.json`` of the run in ``run_dir`` by hand, as a test sets one up.

    ``signed`` (the default): signed with this machine's key as trysquare signs what it
    records, so that it reads as a result trysquare wrote. ``signed=False`` writes it as
    the measured agent would (a planted or edited result): trysquare never counts it.
    """
    from trysquare import results
    from trysquare.runs import RUN_FILE, load_run

    run = load_run(Path(run_dir) / RUN_FILE, replay=True)
    body = results.sign_result(run, name, document) if signed else dict(document)
    path = results.result_path(run, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
