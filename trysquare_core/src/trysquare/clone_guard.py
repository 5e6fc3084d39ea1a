"""The clone guard: the agent's work is frozen at its first measurement, and checked.

At a run's first measurement trysquare records in ``<run>/.trysquare/work.json``
what the agent's work was: every touched path with a hash of its content, a hash
of every file of the clone's ``.git`` except its objects and index (config, HEAD,
refs, hooks, info), and a stat picture of the whole clone — ignored files and
``.git`` included, objects and index left out — (inode, size, mtime, ctime, mode
per path). Before every validation the clone is compared with that record; after
it, with the picture taken before. Any difference makes the run invalid and names
the paths, and the record is not updated from a clone that changed: what a
validator (or a process it left behind) wrote is never read as the agent's work.

The record is compared, never trusted as a source: the touched set always comes
from :mod:`trysquare.git`, so a ``work.json`` the agent planted can only make its
run invalid. No process is started for the check: it is a stat walk and a few
hashes.

Where the kernel allows it, :mod:`trysquare.sandbox` prevents the writes in the
first place; this module detects them everywhere.

The picture after validation is taken under Landlock as well, though Landlock already
refuses writes beneath the clone: what it refuses is not all a validator can change there.
Landlock handles a file's content and a folder's entries, never a file's metadata, so a
confined validator can still ``chmod`` a file of the clone (its executable bit is part of the
agent's work as git sees it), set its times or extended attributes; only the picture sees
those (each moves the file's ctime). And the archive folder a validator may write lies in the
run folder, which is the agent's: a hard link left there to a file of the clone, or a
``repo`` in ``run.toml`` pointing into the run's ``validation/`` folder, gives a confined
validator the clone to write. Skipping the walk where every validation ran confined would
let these through, so it is never skipped (``tests/security/test_guard_under_landlock.py``).
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import attrs

from trysquare import _atomic
from trysquare._digests import sha256
from trysquare._shown import shown
from trysquare.clone_picture import ClonePicture, Entry
from trysquare.runs import Run

if TYPE_CHECKING:
    from trysquare.context import RunFacts

__all__ = [
    "WORK_FILE",
    "ClonePicture",
    "clone_changes",
    "clone_problem",
    "picture_clone",
    "spoil",
    "stat_picture",
]

WORK_FILE = Path(".trysquare") / "work.json"
_VERSION = 1
# Inside .git: objects only ever grow and say nothing by themselves (a ref or the
# config must name them); the index is never read as the agent's work.
_GIT_SKIPPED = frozenset({"objects", "index", "index.lock"})


def _key(name: str) -> str:
    # A file name that is not UTF-8 still gets a stable, JSON-safe key.
    if name.isascii():
        return name  # the common case, at the cost of one check per path
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def stat_picture(
    clone: Path,
    skip: Iterable[Path] = (),
    known: Mapping[str, Entry] | None = None,
    known_taken_ns: int = 0,
) -> dict[str, Entry]:
    """Every path in ``clone`` (symlinks not followed) with its inode, size, mtime, ctime, mode.

    ``.git/objects`` and ``.git/index`` are left out, and so is any folder in ``skip``
    (known by its device and inode, whatever path leads there; one outside the clone
    is never met).

    ``known``: a picture of the same clone taken earlier by this process (never one read
    from a run folder), its walk begun at ``known_taken_ns`` (``time.time_ns()``). A folder
    whose entry is as ``known`` has it, and whose ctime is older than that by a second,
    still holds the names it held then: its names are looked at one by one, not listed
    again. A name made, removed or renamed in a folder moves its ctime to the clock's
    time, which no unprivileged process can set back; that time may lag by a clock tick
    (kernels before 6.13 give no finer one), so a folder changed just before the walk
    could change again after it with the very same ctime, and is listed. The clone's own
    folder is always listed.
    """
    skipped = set()
    for folder in skip:
        try:
            found = os.stat(folder)
        except OSError:
            continue
        skipped.add((found.st_dev, found.st_ino))
    entries: dict[str, Entry] = {}
    before: Mapping[str, Entry] = known or {}
    known_names = _names_by_folder(before, known_taken_ns - _SETTLED_NS) if before else {}
    todo: list[tuple[str, str, list[str] | None]] = [(os.fspath(clone), "", None)]
    is_dir = stat.S_ISDIR
    lstat = os.lstat
    while todo:
        folder_path, prefix, names = todo.pop()
        if names is not None:
            # Unchanged since ``known``: the same names, each looked at again.
            for name in names:
                try:
                    st = lstat(f"{folder_path}/{name}")
                except OSError:
                    continue  # gone: said as deleted
                mode = st.st_mode
                if is_dir(mode) and skipped and (st.st_dev, st.st_ino) in skipped:
                    continue
                rel = prefix + name
                entry = entries[rel] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, mode)
                if is_dir(mode):
                    again = known_names.get(rel) if before[rel] == entry else None
                    todo.append((f"{folder_path}/{name}", rel + "/", again))
            continue
        try:
            scanner = os.scandir(folder_path)
        except OSError:
            continue
        in_git = prefix == ".git/"
        with scanner:
            for item in scanner:
                if in_git and item.name in _GIT_SKIPPED:
                    continue
                try:
                    st = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                mode = st.st_mode
                if is_dir(mode) and skipped and (st.st_dev, st.st_ino) in skipped:
                    continue
                rel = prefix + item.name
                key = _key(rel)
                entry = entries[key] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, mode)
                if is_dir(mode):
                    again = (
                        known_names.get(key) if key == rel and before.get(key) == entry else None
                    )
                    todo.append((item.path, rel + "/", again))
    return entries


# How long before a walk a folder must have last changed for its names to be taken as known.
_SETTLED_NS = 1_000_000_000


def _names_by_folder(known: Mapping[str, Entry], settled_ns: int) -> dict[str, list[str]]:
    """The names ``known`` pictured in each of its folders (by its path in the clone), for
    the folders last changed before ``settled_ns`` whose names are all plain ASCII without a
    backslash: any other folder is listed again (its keys may be escaped names, not the
    names on disk)."""
    names: dict[str, list[str]] = {}
    escaped: list[str] = []
    recent: list[str] = []
    is_dir = stat.S_ISDIR
    for rel, entry in known.items():
        folder, _, name = rel.rpartition("/")
        if folder in names:
            names[folder].append(name)
        else:
            names[folder] = [name]
        if is_dir(entry[4]):
            if entry[3] >= settled_ns:
                recent.append(rel)
            elif rel not in names:
                names[rel] = []  # a folder pictured empty is known too (its names come later)
        if "\\" in name or not name.isascii():  # a name _key escaped has a backslash
            escaped.append(folder)
    for folder in escaped + recent:
        names.pop(folder, None)
    return names


def _hash_path(path: Path) -> str:
    """What a path holds: a content hash, a link target, or that it is absent or a folder."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return "absent"
    except OSError as error:
        return f"unreadable:{error.strerror}"
    if stat.S_ISLNK(st.st_mode):
        return "link:" + _key(os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        return "folder"
    if not stat.S_ISREG(st.st_mode):
        return f"special:{stat.S_IFMT(st.st_mode)}"
    hasher = sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                hasher.update(chunk)
    except OSError as error:
        return f"unreadable:{error.strerror}"
    exec_bit = "x" if st.st_mode & 0o111 else "-"
    return f"sha256:{hasher.hexdigest()}:{exec_bit}"


def _git_fingerprint(
    clone: Path,
    entries: Mapping[str, Entry],
    known: Mapping[str, str] | None = None,
    pictured: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """A hash of every file the picture saw under ``.git`` (config, HEAD, refs, hooks, info...).

    A file whose stat entry (inode, size, mtime, ctime, mode) is the one ``pictured``
    in the recorded work keeps its ``known`` hash instead of being read again: any
    write moves its ctime, which no unprivileged process can set back.
    """
    found = {}
    for rel, entry in entries.items():
        if not (rel == ".git" or rel.startswith(".git/")) or stat.S_ISDIR(entry[4]):
            continue
        if (
            known is not None
            and pictured is not None
            and rel in known
            and pictured.get(rel) == entry
        ):
            found[rel] = known[rel]
        else:
            found[rel] = _hash_path(clone / rel)
    return found


def _work_path(run: Run) -> Path:
    return run.dir / WORK_FILE


def _skip(run: Run) -> list[Path]:
    # An old layout may keep the run folder inside the clone: trysquare's own
    # files there are not the clone's. (Known by its inode: no path to resolve.)
    return [run.dir]


def _record(
    run: Run, touched: Iterable[str], entries: Mapping[str, Entry], root: tuple[int, int]
) -> dict[str, Any]:
    return {
        "version": _VERSION,
        "base": run.base_commit,
        "touched": {_key(p): _hash_path(run.repo / p) for p in sorted(touched)},
        "git": _git_fingerprint(run.repo, entries),
        "root": list(root),
        "picture": {rel: list(entry) for rel, entry in entries.items()},
    }


def picture_clone(run: Run, facts: RunFacts | None = None) -> ClonePicture | None:
    """Check the clone against its recorded work and picture it for the check after validation.

    ``facts`` carries the touched set just computed (none with ``--replay``: the
    recorded touched paths are hashed again instead). The first measurement
    writes ``<run>/.trysquare/work.json``. ``None`` when the clone is not there
    to look at (a --replay once it is gone).
    """
    picture = _picture_clone(run, facts)
    etalon = None if facts is None else facts.etalon_checkout
    if picture is None or etalon is None:
        return picture
    return attrs.evolve(picture, etalon=etalon, etalon_entries=stat_picture(etalon))


def _picture_clone(run: Run, facts: RunFacts | None) -> ClonePicture | None:
    clone = run.repo
    try:
        root_stat = clone.stat()
    except OSError:
        return None
    if not stat.S_ISDIR(root_stat.st_mode):  # what is_dir() would ask with a second stat
        return None
    root = (root_stat.st_dev, root_stat.st_ino)
    taken = time.time_ns()  # before the walk: no change it saw is newer (see stat_picture)
    entries = stat_picture(clone, _skip(run))
    path = _work_path(run)
    try:
        # Never through a symlink: the run folder is the agent's.
        text = _atomic.read_bytes(path, root=run.dir).decode("utf-8")
    except FileNotFoundError:
        if facts is None:
            return ClonePicture(
                entries, root, taken_ns=taken
            )  # nothing recorded and no touched set: detect only
        _atomic.write_text(
            path, _atomic.dump_json(_record(run, facts.touched, entries, root)), root=run.dir
        )
        return ClonePicture(entries, root, taken_ns=taken)
    except (OSError, UnicodeDecodeError) as error:
        return ClonePicture(
            entries, root, f"its recorded work {path} cannot be read ({error})", taken_ns=taken
        )
    try:
        recorded = json.loads(text)
        if not isinstance(recorded, dict) or recorded.get("version") != _VERSION:
            raise ValueError("not a trysquare work record")
        problem = _compare(run, recorded, facts, entries, root)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as error:
        return ClonePicture(
            entries, root, f"its recorded work {path} cannot be read ({error})", taken_ns=taken
        )
    if problem is not None:
        return ClonePicture(entries, root, problem, taken_ns=taken)
    # Same work: the picture is refreshed (a moved folder gets new inodes).
    if recorded.get("root") != list(root) or recorded.get("picture") != {
        r: list(e) for r, e in entries.items()
    }:
        _atomic.write_text(
            path,
            _atomic.dump_json(
                {
                    **recorded,
                    "root": list(root),
                    "picture": {r: list(e) for r, e in entries.items()},
                }
            ),
            root=run.dir,
        )
    return ClonePicture(entries, root, taken_ns=taken)


def _compare(
    run: Run,
    recorded: Mapping[str, Any],
    facts: RunFacts | None,
    entries: Mapping[str, Entry],
    root: tuple[int, int],
) -> str | None:
    """What differs between the clone now and its recorded work, said by path; None if nothing."""
    if run.base_commit is not None and recorded.get("base") not in (None, run.base_commit):
        return (
            f"the measured clone's base is {run.base_commit} but its work was recorded "
            f"against {recorded['base']} ({_work_path(run)})"
        )
    # The recorded stat picture, where it applies (the same clone folder, not a copy):
    # a path whose entry is unchanged holds what was hashed, and is not read again.
    pictured: dict[str, Entry] = {}
    if recorded.get("root") == list(root):
        pictured = {rel: tuple(entry) for rel, entry in recorded["picture"].items()}
    was_touched: Mapping[str, str] = recorded["touched"]
    # Keys are JSON-safe names; the file system wants the names as they are.
    raw = {rel: rel for rel in was_touched}
    if facts is not None:
        raw.update({_key(p): p for p in facts.touched})
    now_touched = set(was_touched) if facts is None else {_key(p) for p in facts.touched}
    changed: list[str] = []
    added: list[str] = []
    deleted: list[str] = []
    for rel in sorted(set(was_touched) | now_touched):
        if rel not in was_touched:
            added.append(rel)
        elif rel not in now_touched:
            changed.append(rel)  # back as it was at base: still a change of the agent's work
        elif rel in entries and pictured.get(rel) == entries[rel]:
            continue  # not written since it was hashed
        elif _hash_path(run.repo / raw[rel]) != was_touched[rel]:
            gone = not (run.repo / raw[rel]).exists() and not (run.repo / raw[rel]).is_symlink()
            (deleted if gone else changed).append(rel)
    was_git: Mapping[str, str] = recorded["git"]
    now_git = _git_fingerprint(run.repo, entries, was_git, pictured)
    for rel in sorted(set(was_git) | set(now_git)):
        if rel not in was_git:
            added.append(rel)
        elif rel not in now_git:
            deleted.append(rel)
        elif now_git[rel] != was_git[rel]:
            changed.append(rel)
    # The picture holds what content hashes cannot see cheaply (ignored files,
    # untouched files). Compared only in the same folder: a copied or moved
    # clone has new inodes, and then the hashes above are what holds.
    if recorded.get("root") == list(root):
        a, c, d = _differences(pictured, entries)
        seen = set(added) | set(changed) | set(deleted)
        added += [p for p in a if p not in seen]
        changed += [p for p in c if p not in seen]
        deleted += [p for p in d if p not in seen]
    said = _said(sorted(set(added)), sorted(set(changed)), sorted(set(deleted)))
    if said is None:
        return None
    return f"the measured clone changed since its work was recorded at first measurement ({said})"


def _differences(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[list[str], list[str], list[str]]:
    if before == after:
        # What almost every check finds: one comparison in C, no sets built and sorted.
        return [], [], []
    added = sorted(set(after) - set(before))
    deleted = sorted(set(before) - set(after))
    changed = []
    for rel in sorted(set(before) & set(after)):
        old, new = before[rel], after[rel]
        if old == new:
            continue
        # A folder's own times move when an entry inside it comes or goes; the
        # entry is named instead, unless the folder itself was replaced.
        if stat.S_ISDIR(new[4]) and stat.S_ISDIR(old[4]) and old[0] == new[0]:
            continue
        changed.append(rel)
    return added, changed, deleted


def _said(added: Sequence[str], changed: Sequence[str], deleted: Sequence[str]) -> str | None:
    parts = [
        f"{word} {', '.join(shown(p) for p in paths)}"
        for word, paths in (("deleted", deleted), ("added", added), ("changed", changed))
        if paths
    ]
    return "; ".join(parts) or None


def clone_changes(run: Run, before: ClonePicture) -> str | None:
    """Say what changed in the measured clone since ``before``, by path; or ``None``.

    Validation must write nothing there: a file added, deleted or written (also
    one the agent had already changed, an ignored one, or anything in ``.git``
    but its objects) is named here.
    """
    if before.problem is not None:
        return None  # already refused before validation, for that reason
    try:
        root_stat = run.repo.stat()
    except OSError as error:
        return f"the measured clone can no longer be read after validation ({error.strerror})"
    # Walked knowing the picture before: a folder no name came to or left is not listed again.
    after = stat_picture(run.repo, _skip(run), before.entries, before.taken_ns)
    added, changed, deleted = _differences(before.entries, after)
    if (root_stat.st_dev, root_stat.st_ino) != before.root:
        return "the measured clone changed during validation (the clone folder itself was replaced)"
    said = _said(added, changed, deleted)
    problems = [] if said is None else [f"the measured clone changed during validation ({said})"]
    if before.etalon is not None:
        etalon_after = stat_picture(
            before.etalon, known=before.etalon_entries, known_taken_ns=before.taken_ns
        )
        etalon_said = _said(*_differences(before.etalon_entries, etalon_after))
        if etalon_said is not None:
            problems.append(
                f"the etalon checkout {before.etalon} changed during validation ({etalon_said})"
            )
    return "; ".join(problems) or None


def spoil(run: Run, names: Iterable[str], problem: str, out: TextIO) -> None:
    """A validation that wrote into the measured clone spoils its run's results, by path."""
    from trysquare import results

    # The problem names files the clone holds: the agent chose those names.
    print(f"trysquare: {shown(run.label)}: {shown(problem)}", file=out)
    for name in names:
        try:
            document = results.read_result(run, name)
            if document is None:
                continue
            # No context digest: a spoiled result is never reused as it is.
            document = {**document, "state": "invalid", "error": problem, "context_digest": None}
            results.write_result(run, name, document, None)
        except (OSError, results.UnreadableResult) as error:
            # One run's folder refusing a write never stops the others being spoiled.
            print(f"trysquare: {shown(run.label)}: {shown(str(error))}", file=out)


def clone_problem(run: Run, before: ClonePicture | None) -> str | None:
    """What validation changed in ``run``'s clone since ``before``; None if nothing."""
    return None if before is None else clone_changes(run, before)
