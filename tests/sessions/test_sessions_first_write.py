"""``first_write``: the index of the first call that *wrote* the file, the same rule in every format.

A failed tool call never wrote; a shell command the reader can see writing the file
counts; a call that may have written it and cannot be told raises ``Unjudged`` naming
the call, unless an earlier call already wrote the file.
"""

from __future__ import annotations

from typing import Any

import pytest
from sessionlogs import FORMATS, WriteLog, session_entries
from trysquare.assay import Unjudged
from trysquare.sessions import SessionFormat, open_session

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`


def _reading(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str, steps: list[tuple[Any, ...]]
):
    log = write_log(session_entries(fmt, steps))
    return open_session(log, format=fmt, formats=formats)


@pytest.fixture(params=FORMATS)
def fmt(request: pytest.FixtureRequest) -> str:
    return request.param


def test_a_failed_edit_never_wrote(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    reading = _reading(
        write_log, formats, fmt, [("edit", "src/a.js", False), ("edit", "src/a.js", True)]
    )
    assert [call.failed for call in reading.tool_calls()] == [True, False]
    assert reading.first_write("src/a.js") == 1


def test_a_call_with_no_result_never_wrote(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    entries = session_entries(fmt, [("edit", "src/a.js", True)])
    entries.pop()  # the result never came (an aborted turn)
    reading = open_session(write_log(entries), format=fmt, formats=formats)
    assert reading.first_write("src/a.js") is None


@pytest.mark.parametrize(
    "command",
    [
        "cat > src/a.js <<'EOF'\nexport const a = 1;\nEOF",
        "echo 'x' >> src/a.js",
        "printf 'x' | tee src/a.js",
        "sed -i 's/a/b/' src/a.js",
        "cp /tmp/draft.js src/a.js",
        "mv build/a.js src/",
        "cd src && cat > a.js <<EOF\nx\nEOF",
        "rm src/a.js",
    ],
)
def test_a_shell_write_the_reader_can_see_counts(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str, command: str
) -> None:
    reading = _reading(
        write_log,
        formats,
        fmt,
        [("shell", "ls src", True), ("shell", command, True), ("edit", "src/a.js", True)],
    )
    assert reading.first_write("src/a.js") == 1


def test_a_shell_command_that_only_reads_is_no_write(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    steps = [
        ("shell", "cat src/a.js && grep -n a src/a.js && sed -n 1,5p src/a.js", True),
        ("edit", "src/a.js", True),
    ]
    assert _reading(write_log, formats, fmt, steps).first_write("src/a.js") == 1


def test_an_unknown_tool_before_any_write_is_unjudged(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    steps = [("tool", "mcp__fs__apply", {"target": "src/a.js"}, True), ("edit", "src/a.js", True)]
    reading = _reading(write_log, formats, fmt, steps)
    with pytest.raises(Unjudged, match=r"call 0 \(mcp__fs__apply\).*src/a\.js.*mcp__fs__apply"):
        reading.first_write("src/a.js")


def test_an_unknown_tool_after_the_first_write_changes_nothing(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    steps = [("edit", "src/a.js", True), ("tool", "mcp__fs__apply", {"target": "src/a.js"}, True)]
    assert _reading(write_log, formats, fmt, steps).first_write("src/a.js") == 0


def test_an_unknown_program_given_the_file_is_unjudged(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    steps = [("shell", "python3 tools/fix.py src/a.js", True), ("edit", "src/a.js", True)]
    reading = _reading(write_log, formats, fmt, steps)
    with pytest.raises(Unjudged, match=r"call 0 .*'a\.js'"):
        reading.first_write("src/a.js")
    # A file it was not given is not in doubt.
    assert reading.first_write("src/b.js") is None


def test_a_command_that_rewrites_unnamed_files_is_unjudged(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    steps = [("shell", "git stash && npm test; git stash pop", True), ("edit", "src/a.js", True)]
    with pytest.raises(Unjudged, match="git stash"):
        _reading(write_log, formats, fmt, steps).first_write("src/a.js")


def test_a_failed_shell_write_may_have_written(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    # `cat > a.js <<EOF ... EOF && node a.js` exiting 1: the file was written before the failure.
    steps = [
        ("shell", "cat > src/a.js <<'EOF'\nx\nEOF\nnode src/a.js", False),
        ("edit", "src/a.js", True),
    ]
    with pytest.raises(Unjudged, match="exited with an error"):
        _reading(write_log, formats, fmt, steps).first_write("src/a.js")


def test_a_subagent_call_is_unjudged(
    write_log: WriteLog, formats: dict[str, SessionFormat]
) -> None:
    steps = [
        ("tool", "Task", {"description": "fix", "prompt": "fix the bug"}, True),
        ("edit", "src/a.js", True),
    ]
    reading = _reading(write_log, formats, "claude-code", steps)
    with pytest.raises(Unjudged, match="subagent"):
        reading.first_write("src/a.js")


def test_known_quiet_tools_are_no_doubt(
    write_log: WriteLog, formats: dict[str, SessionFormat]
) -> None:
    steps = [
        ("tool", "Grep", {"pattern": "a", "path": "src/a.js"}, True),
        ("tool", "TodoWrite", {"todos": []}, True),
        ("edit", "src/a.js", True),
    ]
    assert _reading(write_log, formats, "claude-code", steps).first_write("src/a.js") == 2


class TestShellEffects:
    @pytest.mark.parametrize(
        ("command", "writes"),
        [
            ("cat > a.js <<EOF\nrm b.js\nEOF", ("a.js",)),  # a heredoc body is data
            ("echo hi 2>&1 >> log.txt", ("log.txt",)),
            ("ls > /dev/null", ()),
            ("sed -n 1,5p a.js", ()),
            ("sed -i.bak -e 's/a/b/' a.js b.js", ("a.js", "b.js")),
            ("perl -pi -e 's/a/b/' z.js", ("z.js",)),
            ("mv old.js new.js", ("new.js", "new.js/old.js", "old.js")),
            ("git rm -q gone.js", ("gone.js",)),
            ("git rm --cached kept.js", ()),
            ("git checkout -- a.js", ("a.js",)),
            ("cd src; touch x.js", ("src/x.js",)),
            ("bash -lc 'echo x > c.txt'", ("c.txt",)),
            ('git commit -m "it\'s\nfixed"', ()),
        ],
    )
    def test_writes(self, command: str, writes: tuple[str, ...]) -> None:
        from trysquare.sessions._shell_writes import shell_effects

        effects = shell_effects(command)
        assert effects.writes == writes
        assert effects.unclear is None

    def test_an_unknown_program_keeps_what_it_was_given(self) -> None:
        from trysquare.sessions._shell_writes import shell_effects

        effects = shell_effects("python3 - <<'EOF'\nopen('src/a.js', 'w').write('x')\nEOF")
        assert effects.writes == () and "a.js" in effects.mentions

    @pytest.mark.parametrize(
        "command", ["git stash", "git checkout main", "patch -p1 < fix.diff", "find . -delete"]
    )
    def test_unclear(self, command: str) -> None:
        from trysquare.sessions._shell_writes import shell_effects

        assert shell_effects(command).unclear is not None


@pytest.mark.parametrize(
    "command",
    [
        "npm install simple-statistics",
        "npm i -D mocha@10",
        "npm uninstall left-pad",
        "npm pkg set scripts.test='node --test'",
        "yarn add lodash",
        "pnpm add -D vitest",
        "cd . && npm install --save-exact chai",
    ],
)
def test_a_package_manager_writes_the_manifest(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str, command: str
) -> None:
    steps = [("shell", "cat package.json", True), ("shell", command, True)]
    assert _reading(write_log, formats, fmt, steps).first_write("package.json") == 1


def test_an_install_from_the_lockfile_may_rewrite_it(
    write_log: WriteLog, formats: dict[str, SessionFormat], fmt: str
) -> None:
    steps = [("shell", "npm install", True), ("edit", "package-lock.json", True)]
    reading = _reading(write_log, formats, fmt, steps)
    with pytest.raises(Unjudged, match=r"call 0 .*'package-lock\.json'"):
        reading.first_write("package-lock.json")
    assert reading.first_write("package.json") is None


class TestPackageManagers:
    @pytest.mark.parametrize(
        ("command", "writes"),
        [
            (
                "npm install simple-statistics",
                ("package.json", "package-lock.json", "node_modules"),
            ),
            ("npm ci", ("node_modules",)),
            ("npm install -g typescript", ()),
            ("npm install --no-save x", ("node_modules",)),
            (
                "npm --prefix web install react",
                ("web/package.json", "web/package-lock.json", "web/node_modules"),
            ),
            ("npm pkg set type=module", ("package.json",)),
            ("npm pkg get name", ()),
            ("yarn remove x", ("package.json", "yarn.lock", "node_modules")),
            ("pnpm -C app add x", ("app/package.json", "app/pnpm-lock.yaml", "app/node_modules")),
            ("uv add httpx", ("pyproject.toml", "uv.lock", ".venv")),
            ("poetry add httpx", ("pyproject.toml", "poetry.lock")),
            ("cargo add serde", ("Cargo.toml", "Cargo.lock")),
            (
                "cargo add --manifest-path crates/a/Cargo.toml serde",
                ("crates/a/Cargo.toml", "crates/a/Cargo.lock"),
            ),
            ("go get example.com/x@v1", ("go.mod", "go.sum")),
            ("pip install --target vendor requests", ("vendor",)),
        ],
    )
    def test_writes(self, command: str, writes: tuple[str, ...]) -> None:
        from trysquare.sessions._shell_writes import shell_effects

        effects = shell_effects(command)
        assert effects.writes == writes
        assert effects.unclear is None

    @pytest.mark.parametrize("command", ["npm test", "npm run lint -- --fix", "yarn build"])
    def test_a_script_stays_an_unknown_program(self, command: str) -> None:
        from trysquare.sessions._shell_writes import shell_effects

        effects = shell_effects(command)
        assert effects.writes == () and "package.json" not in effects.mentions
