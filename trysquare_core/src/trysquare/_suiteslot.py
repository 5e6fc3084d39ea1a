"""A validator process's side of the suite service (see :mod:`trysquare._suiteservice`).

Under ``trysquare validate`` the suite is never run by the validator's process: that
process is confined by Landlock, which cannot build the jail's namespaces, and what
it reported could not be told from what the agent's code wrote. ``run.tests()``
asks the runner through a unix socket named in ``TRYSQUARE_SUITE_SOCKET`` instead;
the runner runs the suite in the jail (or reuses the outcome it signed for this
same clone and suite) and answers with the verdict.

Kept to ``os``, ``json`` and ``socket``: ``run.tests()`` asks here first, and a
reused outcome must cost next to nothing.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

__all__ = ["SOCKET_ENV", "ask_runner"]

SOCKET_ENV = "TRYSQUARE_SUITE_SOCKET"
# A reply is a verdict and a reason (a suite's tail): far below this.
_REPLY_CAP = 1 << 20


class RunnerUnreachable(OSError):
    """``TRYSQUARE_SUITE_SOCKET`` is set and the runner does not answer on it."""


def ask_runner(timeout: float) -> dict[str, Any] | None:
    """The runner's verdict on the suite (``value``, ``reason``), or ``None`` when this
    process was not started by a runner offering one (then the caller runs the suite).

    Raises :class:`RunnerUnreachable` when a runner offered the service and its
    answer cannot be had: the suite is then not run here, outside the jail.
    """
    path = os.environ.get(SOCKET_ENV)
    if not path:
        return None
    request = json.dumps({"timeout": timeout}).encode() + b"\n"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as door:
            door.connect(path)
            door.sendall(request)
            parts: list[bytes] = []
            size = 0
            while chunk := door.recv(1 << 16):
                parts.append(chunk)
                size += len(chunk)
                if size > _REPLY_CAP:
                    raise RunnerUnreachable("the runner's answer about the suite is too long")
    except RunnerUnreachable:
        raise
    except OSError as error:
        raise RunnerUnreachable(
            f"the runner's suite service at {path} did not answer ({error.strerror or error})"
        ) from None
    try:
        answer = json.loads(b"".join(parts))
    except ValueError:
        raise RunnerUnreachable("the runner's answer about the suite is not JSON") from None
    if not isinstance(answer, dict) or answer.get("value") not in (True, False, None):
        raise RunnerUnreachable("the runner's answer about the suite is not a verdict")
    if not isinstance(answer.get("reason"), str):
        raise RunnerUnreachable("the runner's answer about the suite has no reason")
    return answer
