"""The go and cargo readers on real toolchain output, produced at test time.

``runners/go-*.txt`` and ``runners/cargo-*.txt`` hold what go 1.19 and cargo 1.95 printed
for the projects below (timings as printed); where ``go`` or ``cargo`` is installed the
same projects are built and tested afresh and read the same way, and ``run.tests()`` runs
them in the jail, where their caches (``~/.cache/go-build``, ``~/.cargo``) work without flags.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from trysquare import jail
from trysquare._suite import _verdict, ran_nothing, read_counts, run_suite
from trysquare.testing.builders import build_run

RUNNERS = Path(__file__).parent / "runners"
GO = shutil.which("go")
CARGO = shutil.which("cargo")
NO_GO = "go is not installed (apt-get install golang-go): the captured output is read alone"
NO_CARGO = "cargo is not installed: the captured output is read alone"

GO_PROJECT = {
    "go.mod": "module example.com/calc\n\ngo 1.19\n",
    "calc.go": "package calc\n\nfunc Add(a, b int) int { return a - b }\n",
    "calc_test.go": (
        'package calc\n\nimport "testing"\n\n'
        "func TestAdd(t *testing.T) {\n"
        '\tif Add(2, 3) != 5 {\n\t\tt.Fatalf("Add(2, 3) = %d", Add(2, 3))\n\t}\n}\n\n'
        "func TestZero(t *testing.T) {\n"
        '\tt.Run("left", func(t *testing.T) {})\n\tt.Run("right", func(t *testing.T) {})\n}\n\n'
        'func TestSkipped(t *testing.T) { t.Skip("later") }\n'
    ),
    "sub/sub.go": "package sub\n\nfunc One() int { return 1 }\n",
    "sub/sub_test.go": (
        'package sub\n\nimport "testing"\n\n'
        'func TestOne(t *testing.T) {\n\tif One() != 1 {\n\t\tt.Fatal("no")\n\t}\n}\n'
    ),
    "cmd/main.go": "package main\n\nfunc main() {}\n",
}
GO_FIXED = {"calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n"}
GO_BROKEN_BUILD = {"calc.go": "package calc\n\nfunc Add(a, b int) int { return a - }\n"}

CARGO_PROJECT = {
    "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
    "src/lib.rs": (
        "pub fn add(a: i32, b: i32) -> i32 { a - b }\n\n"
        "/// ```\n/// assert_eq!(calc::add(1, 1), calc::add(1, 1));\n/// ```\npub fn doc() {}\n\n"
        "#[cfg(test)]\nmod tests {\n    use super::*;\n"
        "    #[test]\n    fn adds() { assert_eq!(add(2, 3), 5); }\n"
        "    #[test]\n    fn zero() { assert_eq!(add(0, 0), 0); }\n"
        "    #[test]\n    #[ignore]\n    fn later() {}\n}\n"
    ),
}
CARGO_FIXED = {"src/lib.rs": CARGO_PROJECT["src/lib.rs"].replace("a - b", "a + b")}

# (fixture, exit code, tests counted, verdict): what each output means.
GO_CASES = [
    ("go-packages.txt", 1, 2, False),  # one package failing, one ok, one with no test files
    ("go-verbose.txt", 1, 3, False),  # top-level tests only: subtests and skips are not counted
    ("go-nothing.txt", 0, 0, None),  # -run matching nothing: ran no test
    ("go-build-failed.txt", 2, 2, False),  # a package that does not build is a failed one
]
CARGO_CASES = [
    ("cargo-real-failing.txt", 101, 2, False),  # the ignored test did not run
    ("cargo-real-passing.txt", 0, 3, True),  # unit tests and the doc-test
]


def _read(name: str) -> str:
    return (RUNNERS / name).read_text(encoding="utf-8")


def _check(output: str, returncode: int, count: int, value: bool | None, marker: str) -> None:
    assert read_counts(output) == (count, [marker])
    verdict = _verdict("the suite", returncode, output)
    assert verdict.value is value, verdict.reason
    if value is None:
        assert ran_nothing(returncode, output, count) == "it ran no tests"


@pytest.mark.parametrize(("name", "returncode", "count", "value"), GO_CASES)
def test_captured_go_output_is_read(
    name: str, returncode: int, count: int, value: bool | None
) -> None:
    _check(_read(name), returncode, count, value, "go test's result lines")


@pytest.mark.parametrize(("name", "returncode", "count", "value"), CARGO_CASES)
def test_captured_cargo_output_is_read(
    name: str, returncode: int, count: int, value: bool | None
) -> None:
    _check(_read(name), returncode, count, value, "cargo test's `test result:`")


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def _run(argv: list[str], cwd: Path, home: Path, go_cache: Path | None = None) -> tuple[int, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GOCACHE": str(go_cache or home / "go-build"),
        "GOPATH": str(home / "go"),
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GOTOOLCHAIN": "local",
        "CARGO_TARGET_DIR": str(home / "target"),
        "CARGO_HOME": os.environ.get("CARGO_HOME", str(Path.home() / ".cargo")),
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(Path.home() / ".rustup")),
    }
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="session")
def go_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One go build cache for the cases below (each built the runtime's test harness again in
    a cache of its own). Their projects lie in folders of their own, so no case is handed
    another's test result as ``(cached)``: each output is a fresh run's."""
    return tmp_path_factory.mktemp("go-build")


@pytest.mark.skipif(GO is None, reason=NO_GO)
@pytest.mark.parametrize(
    ("case", "argv", "changes"),
    [
        ("go-packages.txt", ["go", "test", "./..."], {}),
        ("go-verbose.txt", ["go", "test", "-v", "./..."], {}),
        ("go-nothing.txt", ["go", "test", "-run", "Nothing", "./..."], {}),
        ("go-build-failed.txt", ["go", "test", "./..."], GO_BROKEN_BUILD),
    ],
)
def test_real_go_output_is_read_as_the_captured_one(
    tmp_path: Path, go_cache: Path, case: str, argv: list[str], changes: dict[str, str]
) -> None:
    project = _write(tmp_path / "calc", {**GO_PROJECT, **changes})
    returncode, output = _run(argv, project, tmp_path / "home", go_cache)
    assert "(cached)" not in output
    expected = next(c for c in GO_CASES if c[0] == case)
    assert returncode == expected[1], output
    _check(output, returncode, expected[2], expected[3], "go test's result lines")


@pytest.mark.skipif(CARGO is None, reason=NO_CARGO)
@pytest.mark.parametrize(
    ("case", "changes"),
    [("cargo-real-failing.txt", {}), ("cargo-real-passing.txt", CARGO_FIXED)],
)
def test_real_cargo_output_is_read_as_the_captured_one(
    tmp_path: Path, case: str, changes: dict[str, str]
) -> None:
    project = _write(tmp_path / "calc", {**CARGO_PROJECT, **changes})
    returncode, output = _run(["cargo", "test", "--offline"], project, tmp_path / "home")
    expected = next(c for c in CARGO_CASES if c[0] == case)
    assert returncode == expected[1], output
    _check(output, returncode, expected[2], expected[3], "cargo test's `test result:`")


@pytest.mark.skipif(GO is None, reason=NO_GO)
def test_go_runs_under_run_tests_in_the_jail_with_its_cache_in_home(tmp_path: Path) -> None:
    """``go test`` as a scenario names it, no flag: its build cache goes to the jail's $HOME."""
    verdicts = {}
    for name, changes in (("fixed", GO_FIXED), ("broken", {})):
        run = build_run(tmp_path / name, base=GO_PROJECT, changes=changes)
        verdicts[name] = run_suite(run.repo.path, "go test ./...", timeout=300)
    assert verdicts["fixed"].value is True, verdicts["fixed"].reason
    assert verdicts["broken"].value is False
    assert "2 tests ran; read from go test's result lines" in (verdicts["broken"].reason or "")


@pytest.mark.skipif(not jail.availability().available, reason="no jail here")
def test_a_command_behind_a_version_managers_shim_runs_in_the_jail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As pyenv's ``python3`` on PATH: a shim that runs a program of the manager's own folder."""
    manager = tmp_path / "manager"
    (manager / "shims").mkdir(parents=True)
    (manager / "libexec").mkdir()
    (manager / "versions").mkdir()
    shim = manager / "shims" / "python3"
    shim.write_text('#!/bin/sh\nexec "${0%/shims/*}/libexec/chosen-python" "$@"\n')
    chosen = manager / "libexec" / "chosen-python"
    chosen.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for script in (shim, chosen):
        script.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(manager / "shims"), os.environ["PATH"]]))
    test = "import unittest\n\nclass T(unittest.TestCase):\n    def test_one(self):\n        pass\n"
    run = build_run(tmp_path / "run", base={"test_it.py": test})
    verdict = run_suite(run.repo.path, "python3 -m unittest", timeout=120)
    assert verdict.value is True, verdict.reason
