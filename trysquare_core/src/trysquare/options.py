"""What ``trysquare validate`` was asked to do: its options, as one record."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from trysquare._pool import usable_cores
from trysquare._record import record

__all__ = ["ValidateOptions"]


@record
class ValidateOptions:
    """The options of one ``validate``; the command line fills them in."""

    only: tuple[str, ...] = ()  # --only: these validators alone
    jobs: int = attrs.field(factory=usable_cores)  # validators at once
    replay: bool = False  # reuse the archived contexts instead of reading the clones
    force: bool = False  # run again what is current (a paid verdict needs rejudge)
    rejudge: bool = False
    progress: bool | None = None  # None: a bar on a terminal, plain lines otherwise
    executor: str = "local"
    executor_options: Mapping[str, str] = attrs.field(factory=dict)
    rerun_suite: bool = False  # run.tests() runs the suite even when its outcome is recorded
    quiet: bool = False  # -q: no per-task line but an invalid result's, no bar
    exitfirst: bool = False  # -x: stop at the first invalid result
    require_isolation: bool = False  # --require-isolation: never run the agent's code unjailed
    # --fail-on: "unjudged" / "pending" metrics make the exit code 1 too
    fail_on: tuple[str, ...] = ()
    # --no-wait: work sent in batches (a batch judge) is left in flight, collected later
    wait: bool = True
