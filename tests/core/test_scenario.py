"""Loading scenario.toml: strict, and every load-time refusal is one sentence naming the culprit."""

from __future__ import annotations

from pathlib import Path

import pytest
from trysquare.errors import ScenarioError
from trysquare.scenario import load_scenario

from tests.helpers import write_scenario, write_script

pytestmark = pytest.mark.fast  # the inner loop: `uv run pytest -m fast -n 0`

VALIDATOR = "import json; print(json.dumps({'metrics': {}}))\n"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write_script(tmp_path / "s", "score.py", VALIDATOR)
    return tmp_path / "s"


def load(folder: Path, text: str):
    return load_scenario(write_scenario(folder, text))


def refusal(folder: Path, text: str) -> str:
    with pytest.raises(ScenarioError) as caught:
        load(folder, text)
    return caught.value.message


def test_full_scenario_loads_with_defaults(folder: Path) -> None:
    scenario = load(
        folder,
        """
        [task]
        test_command = "node --test 'src/**/*.test.js'"
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["in_scope", "delivered", "tests"]
        [[validation]]
        mode = "form"
        name = "human"
        pieces = ["diff"]
        metrics = ["readable"]
    """,
    )
    assert scenario.name == "scenario"  # the file's stem
    assert scenario.task.prepare == () and scenario.task.artefacts == ()
    assert [v.name for v in scenario.validations] == ["script", "human"]
    assert scenario.validations[0].executable == folder / "score.py"
    assert scenario.verdict.reference is None


def test_harness_sections_are_accepted_and_ignored(folder: Path) -> None:
    scenario = load(
        folder,
        """
        [scenario]
        name = "rule-vs-ticket"
        [agent]
        binary = "pi"
        [axes]
        prompt = ["nothing", "rule"]
        [protocol]
        repetitions = 5
        [task]
        repo = "git@example:repo"
        prompt = "prompt.md"
        etalon = "etalon-v1"
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["ok"]
    """,
    )
    assert scenario.name == "rule-vs-ticket"
    assert scenario.axes == {"prompt": ["nothing", "rule"]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[taks]\n", "taks: unknown key (did you mean 'task'?)"),
        (
            "[task]\ntest_comand = 'x'\n",
            "task.test_comand: unknown key (did you mean 'test_command'?)",
        ),
        (
            "[[validation]]\nmode = 'script'\ncommand = 'score.py'\nmetircs = ['a']\n",
            "[[validation]][1].metircs: unknown key (did you mean 'metrics'?)",
        ),
        ("[task]\nprepare = 'npm ci'\n", "task.prepare: must be a list, not a string"),
        ("[task]\ntest_command = 1\n", "task.test_command: must be a string, not a number"),
        (
            "[[validation]]\nmode = 'script'\ncommand = 'score.py'\nmetrics = ['a']\ntimeout = true\n",
            "[[validation]][1].timeout: must be a number, not a boolean",
        ),
        (
            "[[validation]]\nmode = 'script'\ncommand = 'score.py'\n",
            "[[validation]][1].metrics: required key is missing",
        ),
    ],
)
def test_strict_keys_and_types(folder: Path, text: str, expected: str) -> None:
    assert refusal(folder, text) == f"scenario.toml: {expected}"


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ("npm ci && npm test", "'&&'"),
        ("npm test || true", "'||'"),
        ("cat x | grep y", "'|'"),
        ("a; b", "';'"),
        ("server &", "'&'"),
        ("npm test > out.txt", "'>'"),
        ("npm test >> out.txt", "'>>'"),
        ("npm test < in.txt", "'<'"),
        ("npm test 2>&1", "'2>&1'"),
        ("echo $HOME", "'$HOME'"),
        ("echo $(date)", "'$(...)'"),
        ("echo `date`", "'`'"),
        ("ls *.py", "'*'"),
        ("ls file?.py", "'?'"),
        ("ls [ab].py", "'['"),
        ("~/bin/test", "'~'"),
        ("CI=1 npm test", "'CI=...'"),
    ],
)
def test_shell_words_are_refused_by_name(folder: Path, command: str, named: str) -> None:
    message = refusal(
        folder,
        f"[task]\ntest_command = {command!r}\n".replace("'", '"', 2)
        if "'" not in command
        else f'[task]\ntest_command = "{command}"\n',
    )
    assert message.startswith("scenario.toml: task.test_command: ")
    assert named in message
    assert "shell" in message


def test_prepare_is_vetted_too(folder: Path) -> None:
    message = refusal(folder, '[task]\nprepare = ["npm ci", "cd x && make"]\n')
    assert message.startswith("scenario.toml: task.prepare[2]: ")
    assert "'&&'" in message


def test_quoted_glob_is_one_word(folder: Path) -> None:
    scenario = load(
        folder,
        "[task]\ntest_command = \"node --test 'src/**/*.test.js'\"\n"
        '[[validation]]\nmode = "script"\ncommand = "score.py"\nmetrics = ["ok"]\n',
    )
    assert scenario.task.test_command == "node --test 'src/**/*.test.js'"


def test_empty_test_command_is_refused(folder: Path) -> None:
    assert "task.test_command is empty" in refusal(folder, '[task]\ntest_command = "  "\n')


def test_tests_metric_needs_a_test_command(folder: Path) -> None:
    message = refusal(
        folder,
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["tests"]
    """,
    )
    assert "'tests'" in message and "test_command" in message
    assert message.startswith("scenario.toml: [[validation]][1].metrics:")


def test_metric_declared_twice_is_refused(folder: Path) -> None:
    message = refusal(
        folder,
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["overflow"]
        [[validation]]
        mode = "form"
        pieces = ["diff"]
        metrics = ["overflow"]
    """,
    )
    assert "[[validation]][2].metrics: 'overflow' is also declared by validator 'script'" in message


def test_duplicate_validation_names_are_refused(folder: Path) -> None:
    message = refusal(
        folder,
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["a"]
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["b"]
    """,
    )
    assert "name 'script' is also the name of [[validation]][1]" in message


def test_metric_named_like_a_piece_is_refused(folder: Path) -> None:
    message = refusal(
        folder,
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["diff"]
    """,
    )
    assert "'diff' is the name of a piece" in message


def test_unknown_mode_is_refused_with_a_suggestion(folder: Path) -> None:
    message = refusal(folder, "[[validation]]\nmode = 'scrip'\nmetrics = ['a']\n")
    assert message == (
        "scenario.toml: [[validation]][1].mode: no installed plugin provides mode 'scrip' "
        "(did you mean 'script'?)"
    )


def test_missing_script_is_refused(folder: Path) -> None:
    message = refusal(
        folder, "[[validation]]\nmode = 'script'\ncommand = 'nope.py'\nmetrics = ['a']\n"
    )
    assert message.startswith("scenario.toml: [[validation]][1].command: 'nope.py' does not exist")


def test_script_without_run_bit_is_refused(folder: Path) -> None:
    write_script(folder, "plain.py", VALIDATOR, executable=False)
    message = refusal(
        folder, "[[validation]]\nmode = 'script'\ncommand = 'plain.py'\nmetrics = ['a']\n"
    )
    assert "'plain.py' is not executable" in message and "chmod +x plain.py" in message


def test_verdict_names_declared_metrics(folder: Path) -> None:
    message = refusal(
        folder,
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["in_scope"]
        [verdict]
        criteria = ["in_scop"]
    """,
    )
    assert "verdict.criteria: 'in_scop' is not a metric any validator declares" in message


def test_not_toml_is_one_sentence(folder: Path) -> None:
    message = refusal(folder, "[task\n")
    assert message.startswith("scenario.toml: not valid TOML")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[task]\ntest_command = 'npm ci && npm test'\n", "task.test_command"),
        ("[[validation]]\nmode = 'script'\ncommand = 'score.py'\nmetrics = ['tests']\n", "'tests'"),
        ("[[validation]]\nmode = 'nope'\nmetrics = ['a']\n", "mode 'nope'"),
        ("[verdict]\nreferance = 'x'\n", "verdict.referance"),
    ],
)
def test_check_exits_2_with_one_plain_sentence(cli, folder: Path, text: str, named: str) -> None:
    done = cli("check", write_scenario(folder, text))
    assert done.returncode == 2
    assert named in done.stderr
    assert done.stderr.startswith("trysquare: scenario.toml: ")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_metric_listed_twice_by_one_validator_is_said_so(folder: Path) -> None:
    message = refusal(
        folder, "[[validation]]\nmode = 'script'\ncommand = 'score.py'\nmetrics = ['a', 'a']\n"
    )
    assert message == "scenario.toml: [[validation]][1].metrics: 'a' is declared twice"


def test_a_scenario_with_no_validation_is_refused(folder: Path) -> None:
    # Issue 14.6: it would validate nothing, and every cell would read publishable.
    message = refusal(
        folder,
        """
        [task]
        test_command = "python -m unittest"
    """,
    )
    assert message.startswith("scenario.toml: no [[validation]] table")


@pytest.mark.parametrize("pattern", ["", "   ", "/", "./"])
def test_a_blank_artefacts_entry_is_refused(folder: Path, pattern: str) -> None:
    message = refusal(
        folder,
        f"""
        [task]
        artefacts = ["__pycache__", "{pattern}"]
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["ok"]
    """,
    )
    assert "task.artefacts[2]" in message and "names no path" in message


SCORED = "[[validation]]\nmode = 'script'\ncommand = 'score.py'\nmetrics = ['tests']\n"


@pytest.mark.parametrize(
    ("command", "where"),
    [
        ("npm test", "package.json's scripts"),
        ("npm run test:unit", "package.json's scripts"),
        ("npm --prefix web test", "package.json's scripts"),
        ("yarn test", "package.json's scripts"),
        ("yarn mocha", "package.json's scripts"),  # a script named mocha runs first
        ("pnpm test", "package.json's scripts"),
        ("bun run test", "package.json's scripts"),
        ("make test", "the Makefile"),
        ("tox -e py311", "tox.ini"),
    ],
)
def test_a_suite_the_agent_may_redefine_is_refused(folder: Path, command: str, where: str) -> None:
    message = refusal(folder, f"[task]\ntest_command = {command!r}\n{SCORED}")
    assert message.startswith(f"scenario.toml: task.test_command {command!r} runs a suite defined")
    assert where in message and "name the runner itself" in message


@pytest.mark.parametrize(
    "command",
    ["node --test", "npx mocha", "yarn exec mocha", "pnpm exec vitest run", "bun test",
     "node_modules/.bin/mocha", "python3 -m pytest", "go test ./..."],
)  # fmt: skip
def test_a_runner_named_directly_loads(folder: Path, command: str) -> None:
    assert (
        load(folder, f"[task]\ntest_command = {command!r}\n{SCORED}").task.test_command == command
    )
