"""The scope of one ``validate`` in which runs share a prepared tree (see :mod:`trysquare._prepared`).

Split from :mod:`trysquare._prepared` so that ``validate`` can open and close the scope without
importing the preparing itself, which most scenarios (no ``test_command``) never use.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Entry", "KeptTree", "current", "release", "sharing"]


class KeptTree(Protocol):
    """What the scope needs of a prepared tree (``_prepared.SharedTree``): where to remove it.

    A protocol, not the record itself: this module never imports the preparing.
    """

    @property
    def origin(self) -> str: ...


TreeT = TypeVar("TreeT", bound=KeptTree)


class Entry(Generic[TreeT]):
    """One run's prepared tree in a scope; its lock is held while the tree is built or copied."""

    __slots__ = ("lock", "repo", "tree")

    def __init__(self, repo: str = "") -> None:
        self.lock = threading.Lock()
        self.tree: TreeT | None = None
        self.repo = repo


class Scope:
    """The prepared trees of one open ``validate``, by run."""

    __slots__ = ("entries", "lock")

    def __init__(self) -> None:
        self.entries: dict[str, Entry[Any]] = {}
        self.lock = threading.Lock()


_scope: list[Scope] = []  # the innermost open scope last
_scope_lock = threading.Lock()


@contextmanager
def sharing() -> Iterator[None]:
    """Within this block (one ``validate``), consumers of a run share its prepared tree."""
    scope = Scope()
    with _scope_lock:
        _scope.append(scope)
    try:
        yield
    finally:
        with _scope_lock:
            _scope.remove(scope)
        with scope.lock:
            entries = list(scope.entries.values())
            scope.entries.clear()
        for entry in entries:
            _drop(entry)


def release(repo: Path | str) -> None:
    """Remove the prepared trees of the clone ``repo``: its run's validations are all back."""
    with _scope_lock:
        scopes = [scope for scope in _scope if scope.entries]
    if not scopes:
        return  # nothing prepared (most validators prepare nothing): no path to resolve
    found = os.path.realpath(repo)
    for scope in scopes:
        with scope.lock:
            gone = [key for key, entry in scope.entries.items() if entry.repo == found]
            entries = [scope.entries.pop(key) for key in gone]
        for entry in entries:
            _drop(entry)


def current() -> Scope | None:
    """The innermost open scope, or None outside a ``validate``."""
    with _scope_lock:
        return _scope[-1] if _scope else None


def _drop(entry: Entry[Any]) -> None:
    from trysquare._scratch import remove_tree

    with entry.lock:  # a consumer still copying from it finishes first
        if entry.tree is not None:
            try:
                remove_tree(entry.tree.origin)
            except OSError:
                pass
            entry.tree = None
