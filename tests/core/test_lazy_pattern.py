"""``trysquare._lazy_pattern``: a module's pattern compiled on its first use, answering as re's."""

from __future__ import annotations

import re
from pathlib import Path

from trysquare import _env, _shown, _words
from trysquare._lazy_pattern import LazyPattern
from trysquare.git import dotgit

from tests.helpers import one_run_probes, scored_run


def test_a_lazy_pattern_compiles_on_first_use_and_answers_as_re() -> None:
    lazy = LazyPattern(r"(?P<word>[a-z]+)=", re.IGNORECASE)
    assert lazy._compiled is None
    eager = re.compile(r"(?P<word>[a-z]+)=", re.IGNORECASE)
    for text, pos in (("Name=1", 0), ("x Name=1", 2), ("1=", 0), ("", 0)):
        for method in ("match", "fullmatch", "search"):
            found = getattr(lazy, method)(text, pos)
            expected = getattr(eager, method)(text, pos)
            assert (found and found.groupdict()) == (expected and expected.groupdict())
    assert lazy.sub(lambda m: m.group("word").upper(), "a= b=", 1) == "A b="
    assert lazy.sub(r"<\1>", "a= b=") == eager.sub(r"<\1>", "a= b=")
    assert lazy.compiled is lazy.compiled
    assert LazyPattern(rb"\A[0-9a-f]+\Z").match(b"0a") is not None


def test_the_modules_answer_through_their_lazy_patterns() -> None:
    assert _env.is_env_name("GIT_DIR") and not _env.is_env_name("1X")
    assert _words.ASSIGNMENT.match("FOO=bar") is not None
    assert _shown.shown("a\nb\x1b", newlines=True) == "a\nb\\x1b"
    assert _shown.md("*x*") == "\\*x\\*"
    assert dotgit._HEX.match(b"0" * 40) is not None


# Patterns a one-run validate of a built context (``--replay``) and a report never use (a
# session's shell words, a ref name to check, a message kept on many lines, a control
# character to escape in printed text, a surrogate in a context being built, a leftover
# temporary file's name): compiled by neither.
NEVER_ON_ONE_RUN = (
    ("trysquare._atomic", "_TEMP_NAME"),
    ("trysquare.lock", "_TEMP_NAME"),
    ("trysquare._words", "ASSIGNMENT"),
    ("trysquare.git.dotgit", "_SIMPLE_REF"),
    ("trysquare.git.running", "_ATTRIBUTES_UNREAD"),
    ("trysquare._shown", "_UNSAFE_BUT_NEWLINE"),
    ("trysquare._shown", "_UNSAFE"),
    ("trysquare.context", "_SURROGATE"),
    ("trysquare._env", "_NAME"),
)


def test_a_one_run_replay_and_report_compile_none_of_the_patterns_they_never_use(
    cli_process, make_run, tmp_path: Path
) -> None:
    scenario = scored_run(make_run, tmp_path)
    after = (
        f"names = {NEVER_ON_ONE_RUN!r}\n"
        "print(sorted(f'{module}.{name}' for module, name in names\n"
        "    if module in sys.modules and getattr(sys.modules[module], name)._compiled))\n"
    )
    one_run_probes(scenario, tmp_path / "exp", cli_process.env, after)
