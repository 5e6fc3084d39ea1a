#!/usr/bin/env python3
"""How long this machine keeps a file in its page cache when nothing asks for the memory.

``bench_scale.py`` re-scores 100,000 runs in takes of about ten minutes; whether its timed
take finds the runs in the page cache, where its first take left them, is the machine's
doing, not trysquare's. This writes a file (1 GiB by default) on the disk of ``--folder``,
reads it whole, and then, while doing nothing, prints every ``--every`` seconds how much of
it is still cached (``mincore``), beside the memory the kernel calls free and its own
reclaim counters (``/proc/vmstat``: a page the kernel reclaimed for memory it needed is
counted in ``pgsteal_*``). A machine whose cache shrinks while memory is free and
``pgsteal`` stays still is evicted by another policy: a DAMON scheme that pages out what
was not touched for a while (``/sys/kernel/mm/damon``, printed when one runs), or a
hypervisor. There a command whose runs are read minutes apart reads them from disk again.

    page_cache.kept after 120 s: 77% of 1024 MiB (free memory 22.1 GiB; kernel reclaimed 0 pages)

Usage: python benchmarks/bench_page_cache.py [--mib N] [--seconds S] [--every S] [--folder DIR]
       [--quick]
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import tempfile
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
_libc = ctypes.CDLL(None, use_errno=True)


def cached_share(path: Path) -> float:
    """The share of ``path``'s pages in the page cache now (``mincore`` on a mapping)."""
    size = path.stat().st_size
    pages = (size + PAGE - 1) // PAGE
    residency = (ctypes.c_ubyte * pages)()
    # A private mapping (never written, so no page of it is copied) is one ctypes can take
    # the address of; mincore then says which of the file's pages are cached.
    with open(path, "rb") as file:
        view = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY)
    try:
        anchor = ctypes.c_char.from_buffer(view)
        failed = _libc.mincore(
            ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(size), residency
        )
        del anchor  # the mapping cannot close while ctypes holds it
    finally:
        view.close()
    if failed:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error), str(path))
    return sum(byte & 1 for byte in residency) / pages


def vmstat(*names: str) -> dict[str, int]:
    found: dict[str, int] = {}
    with open("/proc/vmstat", encoding="ascii") as counters:
        for line in counters:
            name, value = line.split()
            if name in names:
                found[name] = int(value)
    return found


def free_gib() -> float:
    with open("/proc/meminfo", encoding="ascii") as info:
        for line in info:
            if line.startswith("MemFree:"):
                return int(line.split()[1]) / 1024 / 1024
    return float("nan")


KDAMONDS = Path("/sys/kernel/mm/damon/admin/kdamonds")  # DAMON's sysfs interface


def damon_pageout() -> str | None:
    """The running DAMON schemes that page memory out, as one line; None when none runs."""
    said = []
    for scheme in sorted(KDAMONDS.glob("*/contexts/*/schemes/*")):
        kdamond = scheme.parents[3]
        try:
            running = (kdamond / "state").read_text().strip() == "on"
            action = (scheme / "action").read_text().strip()
            age = int((scheme / "access_pattern/age/min").read_text())
            interval = int(
                scheme.parents[1].joinpath("monitoring_attrs/intervals/aggr_us").read_text()
            )
        except (OSError, ValueError):
            continue
        if running and action == "pageout":
            said.append(f"pages out memory untouched for {age * interval / 1e6:.0f} s")
    return "; ".join(said) or None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--every", type=float, default=15.0)
    parser.add_argument("--folder", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--quick", action="store_true", help="32 MiB for 10 s")
    args = parser.parse_args()
    if args.quick:
        args.mib, args.seconds, args.every = 32, 10.0, 5.0
    reclaim = ("pgsteal_kswapd", "pgsteal_direct", "drop_pagecache")
    if (damon := damon_pageout()) is not None:
        print(f"page_cache.damon: a DAMON scheme runs that {damon}", flush=True)
    with tempfile.TemporaryDirectory(dir=args.folder) as temp:
        path = Path(temp) / "cached.bin"
        chunk = os.urandom(1 << 20)
        with open(path, "wb") as file:
            file.writelines(chunk for _ in range(args.mib))
            file.flush()
            os.fsync(file.fileno())
        with open(path, "rb") as file:
            while file.read(1 << 22):
                pass
        start = time.monotonic()
        before = vmstat(*reclaim)
        print(f"page_cache.kept after 0 s: {cached_share(path):.0%} of {args.mib} MiB", flush=True)
        while (waited := time.monotonic() - start) < args.seconds:
            time.sleep(min(args.every, args.seconds - waited))
            waited = time.monotonic() - start
            now = vmstat(*reclaim)
            stolen = now.get("pgsteal_kswapd", 0) + now.get("pgsteal_direct", 0)
            stolen -= before.get("pgsteal_kswapd", 0) + before.get("pgsteal_direct", 0)
            dropped = now.get("drop_pagecache", 0) - before.get("drop_pagecache", 0)
            print(
                f"page_cache.kept after {waited:.0f} s: {cached_share(path):.0%} of {args.mib} MiB "
                f"(free memory {free_gib():.1f} GiB; kernel reclaimed {stolen} pages; "
                f"caches dropped {dropped} times)",
                flush=True,
            )


if __name__ == "__main__":
    main()
