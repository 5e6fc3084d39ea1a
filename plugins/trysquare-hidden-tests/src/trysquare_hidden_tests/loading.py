"""Reading a ``mode = "hidden-tests"`` table of ``scenario.toml``: every key checked, each
refusal naming its key (:class:`HiddenTestsMode`, what the plugin registers).

What the validation then does with a run is :mod:`trysquare_hidden_tests.mode`'s.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from trysquare.api import ShellWordError, TableSource, check_timeout, split_command

from trysquare_hidden_tests.mode import (
    _SENTINEL,
    DEFAULT_TIMEOUT,
    MODE,
    PLACEHOLDER,
    ROLES,
    HiddenTestsValidation,
)

__all__ = ["HiddenTestsMode"]


@attrs.frozen(kw_only=True)
class _Table:
    mode: str
    files: Any
    command: str
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    metrics: Any = None
    name: str = ""
    timeout: float = DEFAULT_TIMEOUT


class HiddenTestsMode:
    """Registered through ``trysquare_register_modes``; ``mode = "hidden-tests"``."""

    name = MODE

    def load(self, table: Mapping[str, Any], source: TableSource) -> HiddenTestsValidation:
        raw = source.structure(table, _Table)
        check_timeout(source, raw.timeout)
        files = _files(raw.files, source)
        argv = _command(raw.command, source)
        fail_to_pass = _ids(raw.fail_to_pass, "fail_to_pass", source)
        pass_to_pass = _ids(raw.pass_to_pass, "pass_to_pass", source)
        both = sorted(set(fail_to_pass) & set(pass_to_pass))
        if both:
            raise source.refuse("pass_to_pass", f"'{both[0]}' is also listed in fail_to_pass")
        roles = _roles(raw.metrics, source)
        used = {role for role, _ in roles}
        if not fail_to_pass and not pass_to_pass:
            raise source.refuse("fail_to_pass", "list at least one test id (JUnit classname.name)")
        if "f2p" in used and not fail_to_pass:
            raise source.refuse(
                "fail_to_pass",
                "is empty, so f2p could never be judged; list tests or drop f2p from metrics",
            )
        if "p2p" in used and not pass_to_pass:
            raise source.refuse(
                "pass_to_pass",
                "is empty, so p2p could never be judged; list tests or drop p2p from metrics",
            )
        return HiddenTestsValidation(
            mode=raw.mode,
            name=raw.name,
            metrics=tuple(name for _, name in roles),
            files=files,
            command=raw.command,
            argv=tuple(argv),
            fail_to_pass=fail_to_pass,
            pass_to_pass=pass_to_pass,
            roles=roles,
            timeout=raw.timeout,
        )


def _files(value: Any, source: TableSource) -> tuple[tuple[str, Path], ...]:
    if not isinstance(value, Mapping) or not value:
        raise source.refuse(
            "files",
            "must be a table of destination = source, e.g. "
            '{ "tests/test_hidden.py" = "hidden/test_hidden.py" }',
        )
    files: list[tuple[str, Path]] = []
    for destination, relative in value.items():
        key = f'files."{destination}"'
        if not isinstance(relative, str) or not relative:
            raise source.refuse(key, "must be the path of a file beside the scenario")
        normal = posixpath.normpath(destination) if destination else ""
        if (
            not destination
            or "\\" in destination
            or posixpath.isabs(destination)
            or normal in (".", "..")
            or normal.startswith("../")
            or ".git" in normal.split("/")
        ):
            raise source.refuse(
                key, "the destination must be a relative path inside the repository (not in .git)"
            )
        if normal in (known for known, _ in files):
            raise source.refuse(key, f"names the same destination as another key ({normal})")
        path = source.resolve(relative)
        if not path.is_file():
            raise source.refuse(
                key, f"the hidden file '{relative}' does not exist (looked for {path})"
            )
        files.append((normal, path))
    return tuple(sorted(files))


def _command(command: str, source: TableSource) -> list[str]:
    if not command.strip():
        raise source.refuse("command", "is empty")
    if PLACEHOLDER not in command:
        raise source.refuse(
            "command",
            f"must name the JUnit report's path as {PLACEHOLDER} (e.g. --junitxml={PLACEHOLDER})",
        )
    if _SENTINEL in command:
        raise source.refuse("command", "holds a NUL character")
    try:
        return split_command(command.replace(PLACEHOLDER, _SENTINEL))
    except ShellWordError as error:
        raise source.refuse("command", str(error)) from None


def _ids(ids: tuple[str, ...], key: str, source: TableSource) -> tuple[str, ...]:
    seen: set[str] = set()
    for index, test in enumerate(ids, start=1):
        if not test.strip():
            raise source.refuse(f"{key}[{index}]", "is empty")
        if test in seen:
            raise source.refuse(f"{key}[{index}]", f"'{test}' is listed twice")
        seen.add(test)
    return ids


def _roles(value: Any, source: TableSource) -> tuple[tuple[str, str], ...]:
    """``metrics``: a list choosing among the roles, or a table renaming them."""
    if value is None:
        return tuple((role, role) for role in ROLES)
    if isinstance(value, list):
        names: dict[str, str] = {}
        for index, role in enumerate(value, start=1):
            if role not in ROLES:
                raise source.refuse(
                    f"metrics[{index}]",
                    f"must be one of {', '.join(ROLES)} "
                    '(a table renames them: { resolved = "my_name" })',
                )
            if role in names:
                raise source.refuse(f"metrics[{index}]", f"'{role}' is listed twice")
            names[role] = role
    elif isinstance(value, Mapping):
        names = {}
        for role, name in value.items():
            if role not in ROLES:
                raise source.refuse(f"metrics.{role}", f"unknown; the roles are {', '.join(ROLES)}")
            if not isinstance(name, str):
                raise source.refuse(f"metrics.{role}", "must be a metric name (a string)")
            names[role] = name
    else:
        raise source.refuse(
            "metrics", "must be a list of resolved, f2p, p2p or a table renaming them"
        )
    if not names:
        raise source.refuse("metrics", "is empty; leave it out to record resolved, f2p and p2p")
    return tuple((role, names[role]) for role in ROLES if role in names)
