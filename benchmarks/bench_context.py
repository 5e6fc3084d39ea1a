"""How fast trysquare.git reads a measured clone, against plain git on the same tree.

Builds (in a temporary folder) a repository of ~20,000 files and touches ~200 of
them the way an agent does — a commit after base, staged and unstaged edits,
deletions, new untracked files, a few ignored ones — then times, warm, best of N:

- a context's ``touched`` and ``files`` (``touched_and_files``: one pass for both;
  ``changed_files`` + ``working_files`` called apart is printed too) against
  ``git status --porcelain -uall``;
- ``diff_patch`` against ``git diff <base>``.

Printed as ratios, not asserted. Target: within 2x.

    uv run python benchmarks/bench_context.py [--quick] [--files N] [--runs N]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

try:
    from trysquare.git import changes as git_changes
    from trysquare.git import patch as git_patch
except ImportError:  # run from a checkout without the workspace installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trysquare_core" / "src"))
    from trysquare.git import changes as git_changes
    from trysquare.git import patch as git_patch

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@trysquare.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@trysquare.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, env=GIT_ENV
    ).stdout


def build(root: Path, n_files: int, n_touched: int, seed: int = 7) -> tuple[Path, str]:
    """A repository of n_files with about n_touched of them changed after base."""
    rng = random.Random(seed)
    repo = root / "clone"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    paths = []
    per_dir = 50
    for i in range(n_files):
        folder = f"pkg{i // (per_dir * 20):03d}/mod{(i // per_dir) % 20:02d}"
        paths.append(f"{folder}/file_{i:05d}.py")
    for i, rel in enumerate(paths):
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"# file {i}\n" + "x = 1\n" * (i % 40), encoding="utf-8")
    (repo / ".gitignore").write_text("*.pyc\n__pycache__/\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD").decode().strip()

    chosen = rng.sample(paths, n_touched)
    share = n_touched // 5
    committed, staged, unstaged, deleted = (chosen[k * share : (k + 1) * share] for k in range(4))
    for rel in committed:  # an agent commit after base
        (repo / rel).write_text("agent commit\n", encoding="utf-8")
    git(repo, "commit", "-q", "-am", "agent")
    for rel in staged:
        (repo / rel).write_text("staged\n", encoding="utf-8")
    git(repo, "add", "--", *staged)
    for rel in unstaged:
        with open(repo / rel, "a", encoding="utf-8") as handle:
            handle.write("y = 2\n")
    for rel in deleted[: share // 2]:
        (repo / rel).unlink()
    git(repo, "rm", "-q", "--", *deleted[share // 2 :])
    for i in range(n_touched - 4 * share):  # new, untracked
        target = repo / f"pkg_new/feature_{i:03d}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"new {i}\n", encoding="utf-8")
    for i in range(50):  # ignored noise
        target = repo / f"pkg000/mod00/__pycache__/cache_{i}.pyc"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"\0" * 64)
    # Settle the index (no racily-clean entries), as a finished run's clone would be.
    time.sleep(1.1)
    git(repo, "update-index", "-q", "--refresh")
    return repo, base


def best(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Best time of each function over ``runs`` rounds, interleaved so that a busy
    machine slows every contender alike.
    """
    for fn in fns.values():
        fn()  # warm the page cache
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 files instead of 20,000")
    parser.add_argument("--files", type=int, default=None)
    parser.add_argument("--touched", type=int, default=200)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    n_files = args.files or (2_000 if args.quick else 20_000)

    with tempfile.TemporaryDirectory(prefix="trysquare-bench-") as scratch:
        repo, base = build(Path(scratch), n_files, args.touched)
        touched, files = git_changes.touched_and_files(repo, base)

        def status() -> None:
            subprocess.run(
                ["git", "-C", str(repo), "status", "--porcelain", "-uall"],
                check=True,
                capture_output=True,
            )

        def ours() -> None:
            git_changes.changed_files(repo, base)
            git_changes.working_files(repo)

        def combined() -> None:
            git_changes.touched_and_files(repo, base)

        def plain_diff() -> None:
            subprocess.run(["git", "-C", str(repo), "diff", base], check=True, capture_output=True)

        def patch() -> None:
            git_patch.diff_patch(repo, base)

        def plain_both() -> None:
            status()
            plain_diff()

        def whole() -> None:
            git_patch.context_facts(repo, base, io.BytesIO())

        t = best(
            {
                "status": status,
                "ours": ours,
                "combined": combined,
                "diff": plain_diff,
                "patch": patch,
                "plain_both": plain_both,
                "whole": whole,
            },
            args.runs,
        )
        t_status, t_ours, t_combined, t_diff, t_patch = (
            t["status"], t["ours"], t["combined"], t["diff"], t["patch"]
        )  # fmt: skip

    # The headline is touched_and_files: one `git status` pass serving both sets, the
    # way a context is built. Called apart, each set pays for its own pass (shown below).
    baseline = f"baseline git status --porcelain -uall {t_status * 1000:.1f} ms"
    print(f"context.touched+files: {t_combined / t_status:.2f}x ({baseline})")
    print(f"diff_patch: {t_patch / t_diff:.2f}x (baseline git diff <base> {t_diff * 1000:.1f} ms)")
    # What a context build calls: the three facts from one walk, against git's two commands.
    print(
        f"context.facts+patch: {t['whole'] / t['plain_both']:.2f}x (baseline git status -uall, then"
        f" git diff <base>, {t['plain_both'] * 1000:.1f} ms; touched_and_files + diff_patch apart:"
        f" {(t_combined + t_patch) / t['plain_both']:.2f}x)"
    )
    print(
        f"  ({n_files} files, {len(touched)} touched, {len(files)} in files; changed_files + "
        f"working_files called apart: {t_ours / t_status:.2f}x; "
        f"best of {args.runs}; cpus: {os.cpu_count()})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
