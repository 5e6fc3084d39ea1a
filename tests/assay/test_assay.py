"""Assay: reading a run through its context."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from trysquare.assay import Assay, Unjudged

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`

Write = Callable[..., Path]


def test_path_sets_are_frozensets_of_str(write_context: Write) -> None:
    run = Assay.load(
        write_context(touched=["a.py"], files=["a.py", "b.py"], given=["probe.test.js"])
    )
    assert run.touched == frozenset({"a.py"})
    assert run.files == frozenset({"a.py", "b.py"})
    assert run.given == frozenset({"probe.test.js"})
    assert isinstance(run.touched, frozenset)


def test_scalars(write_context: Write) -> None:
    path = write_context()
    context = json.loads(path.read_text())
    run = Assay.load(path)
    assert run.repo == Path(context["repo"])
    assert run.base == "0" * 40
    assert run.cell == "rule / high"
    assert run.repetition == 3
    assert run.etalon is not None
    assert (run.etalon.tag, run.etalon.checkout) == (
        "etalon-v1",
        Path(context["etalon"]["checkout"]),
    )
    assert run.prompt == "Fix the counter."
    assert run.diff.startswith("--- a/x")
    assert run.test_command is None and run.prepare == []


def test_an_unknown_response_is_unjudged_never_empty(write_context: Write) -> None:
    # Unknown is never "": a metric about the note must not score "0 words".
    for unknown in (Assay.load(write_context()), Assay.load(write_context(response=None))):
        with pytest.raises(Unjudged, match="no response was recorded"):
            unknown.response
        assert unknown.response_or(None) is None  # asked for explicitly
    path = write_context()
    Path(json.loads(path.read_text())["response"]).write_text("Fixed it.", encoding="utf-8")
    assert Assay.load(path).response == "Fixed it."
    empty = write_context()
    Path(json.loads(empty.read_text())["response"]).write_text("", encoding="utf-8")
    assert Assay.load(empty).response == ""  # a last message that really was empty


def test_a_run_without_an_etalon(write_context: Write) -> None:
    run = Assay.load(write_context(etalon=None))
    assert run.etalon is None
    with pytest.raises(Unjudged, match="no etalon"):
        run.sources_at_etalon("*.py")


def test_a_judges_context_loads_and_names_what_it_lacks(write_context: Write) -> None:
    run = Assay.load(write_context(cell=..., given=...))
    assert run.touched == frozenset()  # the rest still reads
    with pytest.raises(LookupError, match="'cell'.*judge"):
        run.cell
    with pytest.raises(LookupError, match="'given'.*judge"):
        run.given


def test_a_context_without_optional_keys_still_loads(write_context: Write) -> None:
    run = Assay.load(
        write_context(trace=..., session=..., declared=..., artefacts=..., prepare=...)
    )
    assert run.trace is None and run.session is None
    assert run.declared == frozenset()
    assert run.artefacts == frozenset()
    assert run.prepare == []


@pytest.mark.parametrize(
    ("pattern", "matched"),
    [
        ("__pycache__", {"__pycache__/counter.cpython-311.pyc", "src/__pycache__/a.pyc"}),
        ("__pycache__/", {"__pycache__/counter.cpython-311.pyc", "src/__pycache__/a.pyc"}),
        ("*.pyc", {"__pycache__/counter.cpython-311.pyc", "src/__pycache__/a.pyc"}),
        ("node_modules", {"node_modules/x/index.js", "node_modules"}),
        # A trailing slash names a directory: not a file of that name.
        ("node_modules/", {"node_modules/x/index.js"}),
        ("build", {"build/out.o", "src/build/gen.c"}),
        ("build/*", {"build/out.o"}),
        ("/build", {"build/out.o"}),
        ("src/build", {"src/build/gen.c"}),
        ("**/*.o", {"build/out.o"}),
        ("*.log", {"debug.log"}),
        ("coverage", set()),
    ],
)
def test_artefacts_are_the_touched_paths_matching_a_pattern(
    write_context: Write, pattern: str, matched: set[str]
) -> None:
    touched = [
        "__pycache__/counter.cpython-311.pyc",
        "src/__pycache__/a.pyc",
        "node_modules/x/index.js",
        "node_modules",  # a file, e.g. a stray one an agent wrote
        "build/out.o",
        "src/build/gen.c",
        "src/builder.py",
        "debug.log",
        "counter.py",
    ]
    run = Assay.load(write_context(touched=touched, artefacts=[pattern]))
    assert run.artefacts == frozenset(matched)
    assert run.touched == frozenset(touched)  # never reduced


def test_work_is_touched_minus_artefacts(write_context: Write) -> None:
    run = Assay.load(
        write_context(
            touched=["counter.py", "__pycache__/counter.cpython-311.pyc"],
            artefacts=["__pycache__", "node_modules"],
        )
    )
    assert run.touched - run.artefacts == frozenset({"counter.py"})


def test_sources_at_etalon_reads_the_checkout_folder(write_context: Write, tmp_path: Path) -> None:
    path = write_context()
    checkout = Path(json.loads(path.read_text())["etalon"]["checkout"])
    for rel, text in {
        "src/basket.js": "basket",
        "src/theme.js": "theme",
        "src/deep/x.js": "deep",
        "README.md": "readme",
        ".git/src/config.js": "not a source",
    }.items():
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text(text, encoding="utf-8")
    run = Assay.load(path)
    assert run.sources_at_etalon("src/*.js") == {"src/basket.js": "basket", "src/theme.js": "theme"}
    assert set(run.sources_at_etalon("**/*.js")) == {
        "src/basket.js",
        "src/theme.js",
        "src/deep/x.js",
    }
    assert run.sources_at_etalon("*.txt") == {}


def test_sources_at_etalon_never_uses_git(write_context: Write) -> None:
    # A checkout that is not a git repository at all is still read.
    path = write_context()
    checkout = Path(json.loads(path.read_text())["etalon"]["checkout"])
    checkout.mkdir()
    (checkout / "a.py").write_text("x = 1\n", encoding="utf-8")
    assert Assay.load(path).sources_at_etalon("*.py") == {"a.py": "x = 1\n"}


def test_a_missing_checkout_folder_is_an_error_not_a_verdict(write_context: Write) -> None:
    with pytest.raises(FileNotFoundError):
        Assay.load(write_context()).sources_at_etalon("*.py")


def test_without_a_session_process_metrics_are_unjudged(write_context: Write) -> None:
    run = Assay.load(write_context(session=None))
    with pytest.raises(Unjudged, match="no session log"):
        run.tool_calls()
    with pytest.raises(Unjudged, match="no session log"):
        run.first_write("counter.py")
    with pytest.raises(Unjudged, match="no session log"):
        run.skills_expanded


def _pi_session(path: Path, repo: Path) -> Path:
    from trysquare.testing import write_pi_session

    def call(number: int, name: str, arguments: dict[str, str], error: bool = False) -> list[dict]:
        return [
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "toolCall",
                            "id": f"c{number}",
                            "name": name,
                            "arguments": arguments,
                        }
                    ],
                },
            },
            {
                "type": "message",
                "message": {
                    "role": "toolResult",
                    "toolCallId": f"c{number}",
                    "content": [{"type": "text", "text": "done"}],
                    "isError": error,
                },
            },
        ]

    events = [
        {"type": "message", "message": {"role": "user", "content": "Fix the counter."}},
        *call(0, "read", {"path": "counter.py"}),
        *call(1, "write", {"path": "notes.md", "content": "x"}),
        *call(2, "edit", {"path": str(repo / "counter.py"), "oldText": "a", "newText": "b"}),
        {
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        },
    ]
    return write_pi_session(path, events, cwd=str(repo))


def test_tool_calls_and_first_write_read_the_session(write_context: Write, tmp_path: Path) -> None:
    probe = write_context()
    repo = Path(json.loads(probe.read_text())["repo"])
    session = _pi_session(tmp_path / "session.jsonl", repo)
    run = Assay.load(write_context(repo=str(repo), session=str(session)))
    calls = run.tool_calls()
    assert [c.name for c in calls] == ["read", "write", "edit"]
    assert run.first_write("counter.py") == 2
    assert run.first_write(str(repo / "counter.py")) == 2
    assert run.first_write("notes.md") == 1
    with pytest.raises(Unjudged, match="no call wrote README.md"):
        run.first_write("README.md")
    assert run.first_write("README.md", default=None) is None  # asked for explicitly
    assert run.first_write("notes.md", default=None) == 1
    assert run.skills_expanded == frozenset()
    calls.clear()  # the list handed out is a copy
    assert len(run.tool_calls()) == 3


def test_tests_without_a_declared_suite_names_the_scenario(write_context: Write) -> None:
    run = Assay.load(write_context())  # no test_command key at all
    with pytest.raises(LookupError, match="scenario declares no test_command") as caught:
        run.tests()
    assert "npm test" in str(caught.value)  # says it is never guessed


def test_an_empty_test_command_is_refused(write_context: Write) -> None:
    with pytest.raises(ValueError, match="empty"):
        Assay.load(write_context(test_command="")).tests()
