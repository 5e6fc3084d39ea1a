"""Path resolution, the glob helper and the shell-read heuristic."""

from __future__ import annotations

from pathlib import Path

import pytest
from trysquare.sessions import ToolCall, path_matches
from trysquare.sessions._paths import PathResolver
from trysquare.sessions._shell import patch_files, shell_reads

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("src/a.py", "src/a.py"),
        ("./src/../src/a.py", "src/a.py"),
        ("/home/me/repo/src/a.py", "src/a.py"),
        ("@src/a.py", "src/a.py"),
        ("~/repo/src/a.py", "src/a.py"),
        ("~/.pi/agent/skills/x/SKILL.md", "/home/me/.pi/agent/skills/x/SKILL.md"),
        ("../other/b.py", "/home/me/other/b.py"),
        ("/etc/hosts", "/etc/hosts"),
        ("/home/me/repo", "."),
        ("/home/me/repository/x", "/home/me/repository/x"),
        ("", None),
    ],
)
def test_resolve_against_the_session_cwd(raw: str, expected: str | None) -> None:
    assert PathResolver.for_session("/home/me/repo", None).resolve(raw) == expected


def test_cwd_inside_the_repo_keeps_paths_repo_relative(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    resolver = PathResolver.for_session(str((repo / "pkg").resolve()), repo)
    assert resolver.resolve("a.py") == "pkg/a.py"
    assert resolver.resolve(str(repo.resolve() / "top.txt")) == "top.txt"


def test_workdir_of_a_call() -> None:
    resolver = PathResolver.for_session("/r", None)
    assert resolver.resolve("x.txt", base="/r/sub") == "sub/x.txt"
    assert resolver.resolve("x.txt", base="sub") == "sub/x.txt"


def test_no_cwd_keeps_relative_paths() -> None:
    resolver = PathResolver.for_session(None, None)
    assert resolver.resolve("@a/b.txt") == "a/b.txt"
    assert resolver.resolve("/abs/c") == "/abs/c"


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("SKILL.md", "**/SKILL.md", True),
        ("skills/x/SKILL.md", "**/SKILL.md", True),
        ("/home/u/.claude/skills/x/SKILL.md", "**/SKILL.md", True),
        ("skills/x/SKILL.md", "SKILL.md", True),
        ("skills/x/SKILL.md.bak", "**/SKILL.md", False),
        ("skills/x/skill.md", "**/SKILL.md", False),
        ("src/a/b.py", "src/*.py", True),
        ("src/a.py", "tests/*", False),
    ],
)
def test_glob_semantics(path: str, pattern: str, expected: bool) -> None:
    assert path_matches(path, pattern) is expected


def test_tool_call_is_hashable_and_matches() -> None:
    call = ToolCall(0, "read", {"path": "x"}, "body", False, ("skills/x/SKILL.md",), ())
    twin = ToolCall(0, "read", {"path": "x"}, "body", False, ("skills/x/SKILL.md",), ())
    assert {call, twin} == {call}
    assert call.read_matches("**/SKILL.md") and not call.write_matches("**")


def test_shell_reads_only_plain_readers() -> None:
    script = "cat a.txt && grep -r x src | head -n 3 b.txt; sed -n '1,5p' c.md; sed -i s/a/b/ d.md; wc < e.txt"
    assert shell_reads(script) == ["a.txt", "b.txt", "c.md", "e.txt"]
    assert shell_reads("cat > out.txt <<'EOF'\nwhile i < limit:\nEOF") == []
    assert shell_reads(["bash", "-lc", "cat f.txt"]) == ["f.txt"]


def test_patch_files_lists_every_file() -> None:
    patch = "*** Begin Patch\n*** Add File: a\n+1\n*** Delete File: b\n*** Update File: c\n*** Move to: d\n*** End Patch"
    assert patch_files(patch) == ["a", "b", "c", "d"]
    assert patch_files("no patch here") == []
