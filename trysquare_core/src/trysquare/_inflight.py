"""Validations in flight: one run's code never ends the matrix for good.

Before a validator starts on a run, trysquare writes a marker in the experiment's own
``.trysquare/inflight/`` folder (one small signed entry per run × validator); when the
validator has exited (and all it started with it), the marker goes. Each entry is written
into a slot file of this ``validate`` (one per validation running at once, made when first
needed and removed at the end), emptied when the validator exits and written again for the
next validation: making a file costs the kernel far more than writing one, and this happens
for every task. A marker found by the next ``validate`` therefore says
that trysquare ended — killed by anything, SIGKILL included, or interrupted — while that
validation ran. That ``validate`` names the run, runs the rest of the matrix first, and
then that validation alone (with a local executor), so that if trysquare ends again, that
run is the one that ended it. A validation during which trysquare ended twice is recorded
invalid, with why, instead of being retried for ever; ``--force`` (``--rejudge`` for a
judge) tries it again.

An entry is written into its empty slot in one ``write`` (a kill cannot tear it: it is
whole or absent), so it survives a kill -9 of trysquare; markers are signed with trysquare's key (:mod:`trysquare._signing`), so one planted by the agent
(the experiment folder may be a run folder) is never believed: it is named and removed.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from trysquare import _atomic, _signing, _start_first
from trysquare._shown import shown
from trysquare.execute import PlannedTask
from trysquare.runs import Experiment, Run

if TYPE_CHECKING:  # built only when a marker is found: loaded then, not on every validate
    from trysquare._inflight_marker import Marker

__all__ = ["ENDS_ALLOWED", "FOLDER", "Deferred", "InFlight", "Marker"]

FOLDER = Path(".trysquare") / "inflight"
_KIND = "trysquare validation in flight"
ENDS_ALLOWED = 2  # trysquare ending this many times during one validation makes it invalid


def __getattr__(name: str) -> Any:
    if name == "Marker":  # kept importable from here (it lives where it is loaded lazily)
        from trysquare._inflight_marker import Marker

        return Marker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _key(run: Run, name: str) -> tuple[Path, str]:
    return run.dir, name


class InFlight:
    """The markers of one ``validate``: read when it begins, written as tasks start,
    removed as their results come back."""

    def __init__(self, experiments: Sequence[Experiment], names: Sequence[str]) -> None:
        self._names = set(names)
        # A run's markers live in its experiment's folder: the deepest one holding it (a
        # folder named inside another holds the runs found there first). Found from the
        # run's path as a task starts, not kept per run: validate holds every run.
        self._roots = sorted({experiment.root for experiment in experiments if experiment.runs})
        self._deepest_first = sorted(
            ((root, os.fspath(root)) for root in self._roots), key=lambda item: -len(item[1])
        )
        self.found: dict[tuple[Path, str], Marker] = {}
        self.refused: list[str] = []  # markers trysquare did not write, named
        self._running: dict[tuple[Path, str], int] = {}
        # Validations whose validator has exited, result not yet recorded: no marker now.
        self._exited: dict[tuple[Path, str], int] = {}
        # The markers found that a task of this validate took over (only those: see close()).
        self._started: set[tuple[Path, str]] = set()
        # Markers made ahead (prepare), by validation: the task they were made for and the bytes.
        self._prepared: dict[tuple[Path, str], tuple[PlannedTask, tuple[Path, bytes]]] = {}
        self._changed = threading.Condition()
        # Where each marker found lies (a slot file of an earlier validate, or a marker file).
        self._found_at: dict[tuple[Path, str], tuple[Path, Path]] = {}
        # This validate's slot files: per experiment folder, the folder's fd and the idle
        # slots; per validation running, the slot holding its marker.
        self._folders: dict[Path, int] = {}
        self._idle: dict[Path, list[_Slot]] = {}
        self._held: dict[tuple[Path, str], list[_Slot]] = {}
        self._slots: list[_Slot] = []
        runs = _RunsByPlace(experiments)
        for root in self._roots:
            self._read(root, runs)

    def _where(self, run: Run) -> tuple[Path, str] | None:
        """``run``'s experiment folder and its folder's path from there (None: in none)."""
        text = run.dir_text
        for root, root_text in self._deepest_first:
            if text == root_text:
                return root, "."
            below = root_text.rstrip(os.sep) + os.sep
            if text.startswith(below):
                return root, text[len(below) :]  # as _relative says it (a posix path)
        return None

    # -- what the last validate left --------------------------------------------------

    def _read(self, root: Path, runs: _RunsByPlace) -> None:
        folder = root / FOLDER
        try:
            if folder.is_symlink() or not folder.is_dir():
                return
            names = sorted(os.listdir(folder))
        except OSError:
            return
        for file_name in names:
            if not file_name.endswith(".json"):
                continue
            path = folder / file_name
            marker = self._marker(root, path, runs)
            if marker is not None:
                self.found[_key(marker.run, marker.name)] = marker
                self._found_at[_key(marker.run, marker.name)] = (path, root)

    def _marker(self, root: Path, path: Path, runs: _RunsByPlace) -> Marker | None:
        try:
            raw = _atomic.read_bytes(path, root=root)
        except OSError:
            raw = None
        if raw == b"":
            # An idle slot of a validate that ended (killed) while no validation ran in it.
            _remove(path, root)
            return None
        try:
            entry = json.loads(raw) if raw is not None else None
        except (ValueError, RecursionError):
            entry = None
        if not isinstance(entry, dict) or not _signing.verifies(entry.get("mac"), _signed(entry)):
            self.refused.append(f"{path} was not written by trysquare here: removed, not believed")
            _remove(path, root)
            return None
        run = runs.get((root, str(entry.get("run"))))
        if run is None or entry.get("validator") not in self._names:
            return None  # another run or validator than this validate's: left as it is
        ended = entry.get("ended")
        if type(ended) is not int or ended < 1:
            return None
        context_digest = entry.get("context_digest")
        from trysquare._inflight_marker import Marker

        return Marker(
            run=run,
            name=str(entry["validator"]),
            ended=ended,
            digest=str(entry.get("digest")),
            context_digest=context_digest if isinstance(context_digest, str) else None,
        )

    def suspect(self, task: PlannedTask) -> bool:
        """Whether trysquare ended while ``task``'s validation last ran."""
        return _key(task.run, task.validation.name) in self.found

    def ended_too_often(self) -> list[Marker]:
        """The validations during which trysquare ended :data:`ENDS_ALLOWED` times."""
        return [m for m in self.found.values() if m.ended >= ENDS_ALLOWED]

    def say(self, out: TextIO) -> None:
        """Name every marker found: what trysquare did not write, and each run in flight."""
        for refused in self.refused:
            print(f"trysquare: {shown(refused)}", file=out)
        for marker in self.found.values():
            if marker.ended >= ENDS_ALLOWED:
                said = (
                    f"validator '{marker.name}' was running each of the last {marker.ended} times "
                    "trysquare ended (killed or interrupted): marked invalid, not retried"
                )
            else:
                said = (
                    f"validator '{marker.name}' was running when trysquare last ended (killed or "
                    "interrupted): validated again after the other runs, alone"
                )
            print(f"trysquare: {shown(marker.run.label)}: {shown(said)}", file=out)
        if self.refused or self.found:
            out.flush()  # said now: the same run may end this trysquare too

    def settle(self, marker: Marker) -> None:
        """The marker of a validation now recorded invalid goes."""
        self._drop_found(_key(marker.run, marker.name))
        self.found.pop(_key(marker.run, marker.name), None)

    # -- this validate's own ------------------------------------------------------------

    def prepare(self, task: PlannedTask) -> None:
        """Make ``task``'s marker ahead, in the thread that builds the tasks while a validator
        runs: :meth:`start` then only writes it (encoding and signing it are not on the way
        from one validator's exit to the next one's start). Its ``at`` says when it was made.
        Not for a validation found in flight: its count is read as it starts."""
        key = _key(task.run, task.validation.name)
        if key in self.found:
            return
        made = self._marker_bytes(task, ended=1)
        if made is not None:
            with self._changed:
                self._prepared[key] = (task, made)

    def _marker_bytes(self, task: PlannedTask, *, ended: int) -> tuple[Path, bytes] | None:
        """``task``'s marker as written (signed JSON) and its experiment folder; ``None`` for
        a run in no experiment folder of this validate."""
        run = task.run
        where = self._where(run)
        if where is None:
            return None
        root, relative = where
        entry: dict[str, Any] = {
            "kind": _KIND,
            "run": relative,
            "id": run.id,
            "validator": task.validation.name,
            "ended": ended,
            "digest": task.digest,
            "context_digest": task.context_digest,
            "pid": os.getpid(),
            # time's own UTC calendar: the same text as datetime's, without importing it
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        entry["mac"] = _signing.mac(_signed(entry))
        return root, _atomic.encode(json.dumps(entry, sort_keys=True))

    def start(self, task: PlannedTask) -> None:
        """Say that ``task``'s validator is about to start: written before it does."""
        run, name = task.run, task.validation.name
        key = _key(run, name)
        earlier = self.found.get(key)
        made: tuple[Path, bytes] | None = None
        if earlier is None:
            with self._changed:
                ready = self._prepared.pop(key, None)
            # Made ahead for this very task (another task of the same run and validator, as a
            # test may plan, is made afresh).
            if ready is not None and ready[0] is task:
                made = ready[1]
        if made is None:
            made = self._marker_bytes(task, ended=(earlier.ended if earlier is not None else 0) + 1)
        if made is None:
            return
        root, data = made
        # Every use of a slot's fd is made holding the lock, so none outlives close().
        with self._changed:
            self._running[key] = self._running.get(key, 0) + 1
            if key in self.found:
                self._started.add(key)
            slot = self._slot(root)
            written = slot is not None and slot.write(data)
            if slot is not None and written:
                self._held.setdefault(key, []).append(slot)
            elif slot is not None and slot.empty():
                # No marker: this validation is simply retried if trysquare ends now.
                self._idle.setdefault(root, []).append(slot)
        if earlier is not None and written:
            # Its count now lies in this validate's slot: the earlier file goes.
            self._drop_found(key)

    def _slot(self, root: Path) -> _Slot | None:
        """An idle slot file of this validate in ``root``'s folder (made if none is idle);
        ``None`` when none can be made (no marker: the validation is simply retried if
        trysquare ends now). Called holding ``_changed``."""
        idle = self._idle.setdefault(root, [])
        if idle:
            return idle.pop()
        try:
            folder = self._folders.get(root)
            if folder is None:
                with _atomic.folder(root / FOLDER, root=root) as opened:
                    folder = self._folders[root] = os.dup(opened.fd)
            slot = _Slot.make(folder, len(self._slots), root)
        except OSError:
            return None
        self._slots.append(slot)
        return slot

    def _release(self, key: tuple[Path, str], slot: _Slot, *, empty: bool) -> None:
        """``slot`` holds ``key``'s marker no more; an empty one serves the next validation,
        one that could not be emptied is never written again. Called holding ``_changed``."""
        held = self._held.get(key, [])
        if slot in held:
            held.remove(slot)
        if not held:
            self._held.pop(key, None)
        if empty:
            self._idle.setdefault(slot.root_key, []).append(slot)

    def exited(self, run: Run, name: str) -> None:
        """``run`` × ``name``'s validator has exited, and all it started with it: no code of
        that run runs now, so its marker goes before its result is recorded (trysquare
        ending meanwhile loses that result, which the next validate simply makes again;
        it was not this run that ended it)."""
        key = _key(run, name)
        with self._changed:
            held = self._held.get(key)
            if held:
                self._exited[key] = self._exited.get(key, 0) + 1
                slot = held[-1]
                self._release(key, slot, empty=slot.empty())

    def done(self, run: Run, name: str) -> None:
        """``run`` × ``name`` came back (its result recorded, or not): its marker goes."""
        key = _key(run, name)
        with self._changed:
            left = self._running.get(key, 0) - 1
            if left > 0:
                self._running[key] = left
            else:
                self._running.pop(key, None)
            exited = self._exited.get(key, 0)
            if exited:  # its marker went when its validator exited
                if exited > 1:
                    self._exited[key] = exited - 1
                else:
                    del self._exited[key]
            else:
                held = self._held.get(key)
                slot = held[-1] if held else None
                if slot is not None:
                    self._release(key, slot, empty=slot.empty())
            self._changed.notify_all()
        self._drop_found(key)
        self.found.pop(key, None)

    def wait_idle(self, stop: Callable[[], bool]) -> None:
        """Return once no validation of this validate is running (or a stop is asked)."""
        with self._changed:
            while self._running and not stop():
                self._changed.wait(0.1)

    def close(self, *, interrupted: bool, complete: bool) -> None:
        """When validate ends: the markers of validations stopped by trysquare itself (-x) go;
        an interruption's stay (it ended trysquare during them). Markers found at the start
        whose validation did not have to run again (its result is recorded) go when the
        matrix went through. This validate's empty slot files go."""
        with self._changed:
            self._running.clear()
            self._exited.clear()
            if not interrupted:
                for key, held in list(self._held.items()):
                    for slot in list(held):
                        self._release(key, slot, empty=slot.empty())
            slots, self._slots = self._slots, []
            folders, self._folders = self._folders, {}
            self._idle.clear()
            self._held.clear()
            for slot in slots:
                slot.close()
            for fd in folders.values():
                os.close(fd)
        if complete:
            for key, marker in list(self.found.items()):
                if key not in self._started:
                    self._drop_found(key)

    def _drop_found(self, key: tuple[Path, str]) -> None:
        """The file holding a marker found at the start goes (its run was settled, or its
        count now lies in this validate's slot)."""
        with self._changed:
            where = self._found_at.pop(key, None)
        if where is not None:
            _remove(*where)


class _RunsByPlace:
    """Each run by (experiment folder, its path from there), as a marker names it: built
    only when a marker signed here is found (nearly never), not for every validate."""

    def __init__(self, experiments: Sequence[Experiment]) -> None:
        self._experiments = experiments
        self._runs: dict[tuple[Path, str], Run] | None = None

    def get(self, key: tuple[Path, str]) -> Run | None:
        if self._runs is None:
            self._runs = {
                (experiment.root, _relative(run.dir, experiment.root)): run
                for experiment in self._experiments
                for run in experiment.runs
            }
        return self._runs.get(key)


class _Slot:
    """One slot file of this validate in an experiment's in-flight folder: empty while idle,
    one marker while a validation runs. Written through its own fd: no path is walked again
    (the folder was reached without following a symlink when the file was made)."""

    __slots__ = ("fd", "folder", "name", "root_key")

    def __init__(self, folder: int, name: str, fd: int, root: Path) -> None:
        self.folder = folder
        self.name = name
        self.fd = fd
        self.root_key = root  # the experiment folder it serves

    @classmethod
    def make(cls, folder: int, number: int, root: Path) -> _Slot:
        """A new, empty slot file in ``folder`` (a name nobody holds: never one planted)."""
        for attempt in range(100):
            name = f"slot-{os.getpid()}-{number}-{attempt}.json"
            try:
                fd = os.open(
                    name,
                    os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o666,
                    dir_fd=folder,
                )
            except FileExistsError:
                continue
            return cls(folder, name, fd, root)
        raise FileExistsError(f"no free slot name in the in-flight folder ({name})")

    def write(self, data: bytes) -> bool:
        """Put one marker into the empty slot, in one write; whether it was written whole."""
        if self.fd < 0:
            return False
        try:
            return os.pwrite(self.fd, data, 0) == len(data)
        except OSError:
            return False

    def empty(self) -> bool:
        """Empty the slot; whether it is empty now (a slot not emptied is not used again)."""
        if self.fd < 0:
            return False
        try:
            os.ftruncate(self.fd, 0)
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Close the slot; remove its file when it is empty (a marker left in it stays).
        Closed, it is never written again (its fd number may be another file's by then)."""
        if self.fd < 0:
            return
        try:
            if os.fstat(self.fd).st_size == 0:
                os.unlink(self.name, dir_fd=self.folder)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = -1


class Deferred(Collection[PlannedTask]):
    """The planned tasks as an executor takes them, each marked in flight as it is taken;
    those during which trysquare last ended come last, each alone when ``alone`` (the
    executor runs tasks in this process, so waiting here holds nothing up)."""

    def __init__(
        self,
        tasks: Collection[PlannedTask],
        flight: InFlight,
        *,
        alone: bool,
        stop: Callable[[], bool],
    ) -> None:
        self.tasks = tasks
        self.flight = flight
        self.alone = alone
        self.stop = stop

    def __len__(self) -> int:
        return len(self.tasks)

    def exited(self, task: PlannedTask) -> None:
        """``task``'s validator has exited (its result is not recorded yet): an executor
        running tasks in this process says so, so that it is in flight no more."""
        self.flight.exited(task.run, task.validation.name)

    def __contains__(self, task: object) -> bool:
        return task in self.tasks

    def __iter__(self) -> Iterator[PlannedTask]:
        later: list[PlannedTask] = []
        for task in self.tasks:
            if self.flight.suspect(task):
                later.append(task)
                continue
            self.flight.start(task)
            yield task
        for task in later:
            if self.alone:
                _start_first.child_started()  # what this worker holds is handed over first
                self.flight.wait_idle(self.stop)
            if self.stop():
                return
            self.flight.start(task)
            yield task


def _signed(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {"kind": _KIND, "marker": {k: v for k, v in entry.items() if k != "mac"}}


def _relative(run_dir: Path, root: Path) -> str:
    try:
        return run_dir.relative_to(root).as_posix()
    except ValueError:
        return str(run_dir)


def _remove(path: Path, root: Path) -> None:
    try:
        _atomic.remove(path, root=root)
    except OSError:
        pass
