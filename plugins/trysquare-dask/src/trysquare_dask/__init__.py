"""trysquare-dask: run ``trysquare validate`` tasks on a Dask cluster.

``trysquare validate --executor dask`` starts a ``LocalCluster``;
``--executor-option scheduler=tcp://host:8786`` uses an existing cluster. Every
trysquare command loads this module, so it stays cheap: dask and distributed
are imported only when the executor actually runs (:mod:`trysquare_dask.executor`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trysquare.api import hookimpl

__all__ = ["DaskExecutor"]


def __getattr__(name: str) -> Any:
    # `from trysquare_dask import DaskExecutor` works without paying for it at load time.
    if name == "DaskExecutor":
        from trysquare_dask.executor import DaskExecutor

        return DaskExecutor
    raise AttributeError(f"module 'trysquare_dask' has no attribute {name!r}")


@hookimpl
def trysquare_register_executors(register: Callable[[Any], None]) -> None:
    from trysquare_dask.executor import DaskExecutor

    register(DaskExecutor())
