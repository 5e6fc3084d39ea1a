"""The local cluster's throwaway TLS credentials, which never touch a file system.

``distributed.security.Security.temporary()`` keeps the key and certificate in
memory, but Python's ``ssl`` loads a certificate chain only from a path: to build
each TLS context (every process as it starts, a worker's client at its first
task) Dask writes them into a fresh temporary folder for a moment, where a
process of the same user watching the temporary folder could read the key.
:class:`InMemorySecurity` hands ``ssl`` an anonymous in-memory file instead
(``memfd_create``), by its ``/proc/self/fd`` path: nothing appears in any folder,
and the file is reachable only through this process's descriptors, which the
user's other processes cannot open while it is not dumpable
(:mod:`trysquare_dask.memory`). Where there is no ``memfd_create`` (not Linux),
Dask's own way is used.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from distributed.security import Security

__all__ = ["InMemorySecurity"]


class InMemorySecurity(Security):  # type: ignore[misc]  # distributed is read as Any
    """``Security.temporary()`` whose key and certificate are never written to a folder.

    No ``__slots__`` of its own: ``Security`` checks its arguments against
    ``self.__slots__``, which must stay its own list.
    """

    def _get_tls_context(self, tls: dict[str, Any], purpose: ssl.Purpose) -> Any:
        if not hasattr(os, "memfd_create"):
            return super()._get_tls_context(tls, purpose)
        with ExitStack() as files:
            given = dict(tls)
            for field in ("cert", "key"):
                text = given.get(field)
                if isinstance(text, str) and "\n" in text:  # in memory, not a path
                    given[field] = files.enter_context(_memory_file(field, text))
            # The CA is handed to ssl as data already (cadata): no file for it.
            return super()._get_tls_context(given, purpose)


@contextmanager
def _memory_file(name: str, text: str) -> Iterator[str]:
    """A path to an anonymous file holding ``text``, valid in this process for the block."""
    fd = os.memfd_create(f"trysquare-dask-{name}", os.MFD_CLOEXEC)
    try:
        data = text.encode("ascii")
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)
