"""Builders for tests: real git repositories, runs and session logs, made at test time.

trysquare's own suite uses these, and validator authors get them as a pytest
plugin (``trysquare.testing.pytest_plugin``: fixtures ``trysquare_run`` and
``run_validator``; see ``docs/testing-validators.md``). Nothing here is imported
by the runtime.
"""

from trysquare.testing.builders import (
    GitRepo,
    RunBuilder,
    build_matrix,
    build_run,
    copy_run,
    run_from_folders,
    write_pi_session,
    write_result,
)

__all__ = [
    "GitRepo",
    "RunBuilder",
    "build_matrix",
    "build_run",
    "copy_run",
    "run_from_folders",
    "write_pi_session",
    "write_result",
]
