"""The default ``--jobs`` follows the cgroup CPU quota: cgroup files built at test time, and a
real cgroup where this machine lets the suite make one."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from trysquare import _pool
from trysquare._cpu_quota import cpu_quota
from trysquare.options import ValidateOptions

pytestmark = pytest.mark.fast


def _mountinfo(*mounts: tuple[str, str, str, str]) -> str:
    """mountinfo lines: (root in the hierarchy, mount point, type, super options)."""
    return "".join(
        f"{30 + n} 20 0:{40 + n} {root} {point} rw,relatime shared:{n} - {kind} {kind} {options}\n"
        for n, (root, point, kind, options) in enumerate(mounts)
    )


def _proc(tmp_path: Path, cgroup: str, mountinfo: str) -> str:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text(mountinfo)
    return str(proc)


def _v2(tmp_path: Path, limits: dict[str, str], member: str = "/app/job") -> str:
    """A cgroup v2 tree at ``tmp_path/cg``, ``cpu.max`` written where ``limits`` says."""
    top = tmp_path / "cg"
    (top / member.strip("/")).mkdir(parents=True)
    for folder, limit in limits.items():
        (top / folder.strip("/") / "cpu.max").write_text(limit + "\n")
    return _proc(tmp_path, f"0::{member}\n", _mountinfo(("/", str(top), "cgroup2", "rw")))


def test_a_v2_quota_is_counted_in_cores_rounded_up(tmp_path: Path) -> None:
    assert cpu_quota(_v2(tmp_path, {"/app/job": "120000 100000"})) == 2


def test_the_smallest_quota_above_the_cgroup_binds(tmp_path: Path) -> None:
    proc = _v2(tmp_path, {"/app/job": "max 100000", "/app": "100000 100000", "/": "max"})
    assert cpu_quota(proc) == 1


def test_no_quota_anywhere_is_none(tmp_path: Path) -> None:
    assert cpu_quota(_v2(tmp_path, {"/app/job": "max 100000", "/app": "max 100000"})) is None


def test_a_quota_under_a_quarter_core_still_allows_one(tmp_path: Path) -> None:
    assert cpu_quota(_v2(tmp_path, {"/app/job": "20000 100000"})) == 1


def test_a_damaged_cpu_max_is_no_quota_not_an_error(tmp_path: Path) -> None:
    assert cpu_quota(_v2(tmp_path, {"/app/job": "lots\n"})) is None


def test_a_v1_cpu_hierarchy_mounted_beside_others(tmp_path: Path) -> None:
    cpu = tmp_path / "cgroup cpu"  # a space in the mount point: mountinfo writes it \040
    job = cpu / "docker" / "abc"
    job.mkdir(parents=True)
    (job / "cpu.cfs_quota_us").write_text("300000\n")
    (job / "cpu.cfs_period_us").write_text("100000\n")
    (cpu / "docker" / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "docker" / "cpu.cfs_period_us").write_text("100000\n")
    point = str(cpu).replace(" ", "\\040")
    mounts = _mountinfo(
        ("/", str(tmp_path / "memory"), "cgroup", "rw,memory"),
        ("/", point, "cgroup", "rw,cpu,cpuacct"),
    )
    cgroup = "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n"
    assert cpu_quota(_proc(tmp_path, cgroup, mounts)) == 3


def test_a_v1_hierarchy_mounted_from_the_containers_cgroup(tmp_path: Path) -> None:
    """Docker on cgroup v1: the cpu hierarchy mounted from the container's own cgroup, which
    /proc/self/cgroup names in full; a mountinfo line that is not UTF-8 is passed over."""
    cpu = tmp_path / "cpu"
    for folder, quota in ((cpu, "250000"), (cpu / "docker" / "abc", "20000")):
        # The second is a cgroup below the container's that happens to bear its name: a reader
        # that took the path for one from the hierarchy's root would read it.
        folder.mkdir(parents=True)
        (folder / "cpu.cfs_quota_us").write_text(quota + "\n")
        (folder / "cpu.cfs_period_us").write_text("100000\n")
    mounts = _mountinfo(("/docker/abc", str(cpu), "cgroup", "rw,cpu,cpuacct"))
    proc = _proc(tmp_path, "4:cpu,cpuacct:/docker/abc\n", mounts)
    with open(Path(proc) / "mountinfo", "ab") as file:
        file.write(b"99 20 0:99 / /mnt/caf\xe9 rw - ext4 /dev/x rw\n")
    assert cpu_quota(proc) == 3


def test_a_container_sees_its_own_cgroup_at_the_mount_root(tmp_path: Path) -> None:
    top = tmp_path / "cg"
    top.mkdir()
    (top / "cpu.max").write_text("200000 100000\n")  # the container's own limit, at its root
    assert cpu_quota(_proc(tmp_path, "0::/\n", _mountinfo(("/", str(top), "cgroup2", "rw")))) == 2


def test_no_proc_files_is_none(tmp_path: Path) -> None:
    assert cpu_quota(str(tmp_path / "absent")) is None


def test_the_default_jobs_are_the_cores_the_quota_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(_pool, "_cgroup_quota", lambda: 2)
    assert _pool.usable_cores() == 2
    assert ValidateOptions().jobs == 2
    monkeypatch.setattr(_pool, "_cgroup_quota", lambda: None)
    assert ValidateOptions().jobs == 4
    monkeypatch.setattr(_pool, "_cgroup_quota", lambda: 16)
    assert _pool.usable_cores() == 4  # a quota above the cores allowed changes nothing


def _v1_cpu_folder() -> Path | None:
    """This machine's cgroup v1 ``cpu`` hierarchy, where the suite may make a cgroup in it."""
    folder = Path("/sys/fs/cgroup/cpu")
    if sys.platform != "linux" or not (folder / "cpu.cfs_quota_us").exists():
        return None
    return folder if os.access(folder, os.W_OK) else None


@pytest.mark.skipif(_v1_cpu_folder() is None, reason="no writable cgroup v1 cpu hierarchy here")
def test_validate_in_a_real_cgroup_with_a_one_core_quota_defaults_to_one_job() -> None:
    folder = _v1_cpu_folder()
    assert folder is not None
    made = folder / f"trysquare-test-{uuid.uuid4().hex[:8]}"
    made.mkdir()
    try:
        (made / "cpu.cfs_period_us").write_text("100000\n")
        (made / "cpu.cfs_quota_us").write_text("100000\n")
        asked = "from trysquare.options import ValidateOptions; print(ValidateOptions().jobs)"
        # The child joins the cgroup before Python starts: what it reads is its own.
        done = subprocess.run(
            ["sh", "-c", f'echo $$ > "{made}/cgroup.procs" && exec "$0" -c "$1"', sys.executable,
             asked],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "1"
    finally:
        made.rmdir()
