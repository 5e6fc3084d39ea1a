"""Builders for tests: real git repositories, runs and session logs, made at test time.

trysquare's own suite uses these, and validator authors get them as a pytest
plugin. Nothing here is imported by the runtime.
"""

from trysquare.testing.builders import GitRepo, RunBuilder, write_pi_session

__all__ = ["GitRepo", "RunBuilder", "write_pi_session"]
