"""``trysquare._words``: the two policies over one set of quoting rules agree where they should.

``split_command`` (a command trysquare runs) and ``shell_words`` (a command an agent
ran, only read) must give the same words on every command the first accepts, except
where the module's docstring says the reading policy is plainer on purpose.
"""

from __future__ import annotations

import random

import pytest
from trysquare._words import ShellWordError, shell_words, split_command

pytestmark = pytest.mark.fast

# Every character either policy treats specially, and a few plain ones.
ALPHABET = list("ab c\t'\"\\$*?[]{}#~=!;&|<>()`x1-_/.")


def _commands(count: int, seed: int) -> list[str]:
    chance = random.Random(seed)
    return [
        "".join(chance.choice(ALPHABET) for _ in range(chance.randint(0, 10))) for _ in range(count)
    ]


def _plainer_on_purpose(command: str) -> bool:
    # A backslash inside double quotes is kept by the reading policy (and a
    # backslash-newline is not a continuation there; no newline is drawn here).
    return '"' in command and "\\" in command


def test_both_policies_split_an_accepted_command_into_the_same_words() -> None:
    accepted = 0
    for command in _commands(60_000, seed=31):
        try:
            words = split_command(command)
        except ShellWordError:
            continue
        if _plainer_on_purpose(command):
            continue
        accepted += 1
        assert shell_words(command) == words, command
    assert accepted > 5_000  # the draw exercises the rule, not only refusals


@pytest.mark.parametrize(
    ("command", "run", "read"),
    [
        ('a "b\\"c"', ["a", 'b"c'], ["a", 'b\\"c']),
        ("a\rb", ["a\rb"], ["a", "b"]),
    ],
)
def test_where_the_reading_policy_is_plainer(command: str, run: list[str], read: list[str]) -> None:
    assert split_command(command) == run
    assert shell_words(command) == read


def test_a_line_continuation_is_one_word_to_run_and_an_unbalanced_line_to_read() -> None:
    assert split_command("a\\\nb") == ["ab"]
    with pytest.raises(ValueError):
        shell_words("a\\\nb")


def test_the_reading_policy_keeps_operators_as_words() -> None:
    assert shell_words("cd src && cat a.py | head -n 2 > out") == [
        "cd", "src", "&&", "cat", "a.py", "|", "head", "-n", "2", ">", "out",
    ]  # fmt: skip
