"""Secrets stay with the judge: script validators, run.tests()'s suite and the
hidden-tests command never see a provider's key nor a secret-looking variable
unless the scenario passes it by name (issue 13 item 3).

Each test builds the hostile run (an agent that added a test printing the
environment) and validates it in-process, with the keys set in this process's
environment, as a CI job holding a judge key would.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from trysquare import runner
from trysquare.errors import ScenarioError
from trysquare.runs import discover
from trysquare.scenario import load_scenario

from tests.helpers import write_scenario, write_script

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare._env", "trysquare.plugins")


# Named so that only the provider section marks it a key: nothing about the name looks secret.
PROVIDER_VAR = "ILAAS_CRED"
PROVIDER_KEY = 'sk-live-"quoted\\key-4242'
SECRETS = {
    PROVIDER_VAR: PROVIDER_KEY,
    "AWS_SECRET_ACCESS_KEY": "aws-secret-7777",
    "GITHUB_TOKEN": "ghp-token-8888",
    "DB_PASSWORD": "hunter2-9999",
    "GOOGLE_APPLICATION_CREDENTIALS": "/secret/gcp-5555.json",
}

CONFIG = f"""
[providers.ilaas]
type = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "{PROVIDER_VAR}"
"""

# The measured agent's test: it prints every variable, then fails so that its
# output becomes the `tests` reason; it also drops the environment in a file.
AGENT_TEST = """\
import os, unittest

class Leak(unittest.TestCase):
    def test_leak(self):
        with open({dump!r}, "w") as handle:
            handle.write(repr(dict(os.environ)))
        print(dict(os.environ))
        self.fail(repr(dict(os.environ)))
"""

SUITE_VALIDATOR = """
from trysquare.assay import validator

@validator
def evaluate(run):
    return {"tests": run.tests()}

raise SystemExit(evaluate.cli())
"""

# A validator that is careless with what it sees: it prints its environment in a reason.
ENV_VALIDATOR = """
import json, os, sys
print(json.dumps({"metrics": {"seen": True}, "reasons": {"seen": repr(dict(os.environ))}}))
sys.stderr.write(repr(dict(os.environ)))
"""


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PLAIN_SETTING", "plain-1234")
    # The agent's test writes what it saw to a file the test reads afterwards: a write
    # the sandbox refuses. What is checked here is the environment, filtered either way.
    # The jail would hide the file outside the copy from the agent's test altogether (the
    # jail's own tests show that): here the fallback runs, with the same environment.
    monkeypatch.setenv("TRYSQUARE_SANDBOX", "off")
    monkeypatch.setenv("TRYSQUARE_JAIL", "off")
    return SECRETS


def _agent_run(make_run, dump: Path):
    run = make_run("r1", cell="c", repetition=1)
    run.base({"counter.py": "x = 1\n", "tests/__init__.py": ""})
    run.repo.write("tests/test_leak.py", AGENT_TEST.format(dump=str(dump)))
    run.finish()
    return run


def _validate(
    scenario_path: Path, experiment: Path, modes=None, *, force: bool = False
) -> tuple[int, str]:
    scenario = load_scenario(scenario_path, modes)
    out = io.StringIO()
    summary = runner.validate(
        scenario,
        discover([experiment]),
        runner.ValidateOptions(jobs=1, progress=False, force=force),
        out=out,
    )
    return summary.exit_code, out.getvalue()


def _written(folder: Path) -> str:
    """Everything trysquare wrote under ``folder``, as one text."""
    texts = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and ".git" not in path.parts and path.suffix != ".py":
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts)


def _suite_scenario(folder: Path, task_extra: str = "", validation_extra: str = "") -> Path:
    (folder / "trysquare.toml").parent.mkdir(parents=True, exist_ok=True)
    (folder / "trysquare.toml").write_text(CONFIG, encoding="utf-8")
    write_script(folder, "score.py", SUITE_VALIDATOR)
    return write_scenario(
        folder,
        f"""
        [task]
        test_command = "{sys.executable} -m unittest discover -s tests -t ."
        {task_extra}

        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["tests"]
        {validation_extra}
    """,
    )


def test_agent_test_printing_provider_key_leaks_nothing(keys, make_run, tmp_path: Path) -> None:
    dump = tmp_path / "agent-saw.txt"
    run = _agent_run(make_run, dump)
    scenario = _suite_scenario(tmp_path / "s")
    code, printed = _validate(scenario, tmp_path / "exp")
    # Once more, so that the first result goes to the history too.
    _, printed_again = _validate(scenario, tmp_path / "exp", force=True)
    printed += printed_again
    assert (run.path / "validation" / "script.history.jsonl").exists()
    seen = dump.read_text()
    for name, value in keys.items():
        assert name not in seen, f"the agent's test saw {name}"
    assert "plain-1234" in seen  # the rest of the environment is still there
    result = json.loads((run.path / "validation" / "script.json").read_text())
    assert result["metrics"] == {"tests": False}
    assert "plain-1234" in result["reasons"]["tests"]  # the leak really was printed
    everything = _written(tmp_path / "exp") + printed
    for value in keys.values():
        assert value not in everything
    assert code == 0


def test_script_validator_environment_has_no_key(keys, make_run, tmp_path: Path) -> None:
    run = make_run("r1", cell="c", repetition=1)
    run.base({"counter.py": "x = 1\n"})
    run.finish()
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "trysquare.toml").write_text(CONFIG, encoding="utf-8")
    write_script(folder, "score.py", ENV_VALIDATOR)
    scenario = write_scenario(
        folder,
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["seen"]
        pass_env = ["GITHUB_TOKEN"]
    """,
    )
    code, printed = _validate(scenario, tmp_path / "exp")
    result = json.loads((run.path / "validation" / "script.json").read_text())
    seen = result["reasons"]["seen"]
    assert "GITHUB_TOKEN" in seen  # passed by name
    assert "plain-1234" in seen
    for name in set(keys) - {"GITHUB_TOKEN"}:
        assert name not in seen
        assert keys[name] not in _written(tmp_path / "exp") + printed
    assert code == 0


def test_task_pass_env_reaches_the_suite_only(keys, make_run, tmp_path: Path) -> None:
    dump = tmp_path / "agent-saw.txt"
    _agent_run(make_run, dump)
    scenario = _suite_scenario(tmp_path / "s", task_extra='pass_env = ["DB_PASSWORD"]')
    _validate(scenario, tmp_path / "exp")
    seen = dump.read_text()
    assert "hunter2-9999" in seen
    assert PROVIDER_VAR not in seen and "AWS_SECRET_ACCESS_KEY" not in seen


@pytest.mark.parametrize("runs_validators", [True, False], ids=["validate", "report"])
@pytest.mark.parametrize("where", ["task", "validation"])
def test_pass_env_naming_provider_key_refused(
    keys, tmp_path: Path, where: str, runs_validators: bool
) -> None:
    # A command that runs no validator (report) skips the judge's keys, but not this refusal.
    extra = (
        {"task_extra": f'pass_env = ["{PROVIDER_VAR}"]'}
        if where == "task"
        else {"validation_extra": f'pass_env = ["{PROVIDER_VAR}"]'}
    )
    scenario = _suite_scenario(tmp_path / "s", **extra)
    with pytest.raises(ScenarioError) as refused:
        load_scenario(scenario, runs_validators=runs_validators)
    message = refused.value.message
    assert message.startswith("scenario.toml: ")
    assert f"pass_env: '{PROVIDER_VAR}' is a judge provider's key" in message
    assert "[providers.ilaas].api_key_env" in message
    assert refused.value.exit_code == 2


def test_pass_env_naming_provider_key_refused_by_check(keys, cli, tmp_path: Path) -> None:
    scenario = _suite_scenario(tmp_path / "s", task_extra=f'pass_env = ["{PROVIDER_VAR}"]')
    done = cli("check", scenario)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"task.pass_env: '{PROVIDER_VAR}'" in done.stderr


def test_hidden_tests_command_gets_no_key(keys, make_run, tmp_path: Path) -> None:
    # Not installed by `uv run pytest` (see tests/plugins/conftest.py): its source is imported directly.
    source = Path(__file__).resolve().parents[2] / "plugins" / "trysquare-hidden-tests" / "src"
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.syspath_prepend(str(source))
    from trysquare_hidden_tests import HiddenTestsMode

    run = make_run("r1", cell="c", repetition=1)
    run.base({"counter.py": "x = 1\n"})
    run.finish()
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "trysquare.toml").write_text(CONFIG, encoding="utf-8")
    dump = tmp_path / "hidden-saw.txt"
    # The hidden test stands for the agent's code it runs: it dumps what it sees.
    (folder / "hidden_test.py").write_text(
        f"import os\nopen({str(dump)!r}, 'w').write(repr(dict(os.environ)))\n", encoding="utf-8"
    )
    scenario = write_scenario(
        folder,
        f"""
        [[validation]]
        mode = "hidden-tests"
        files = {{ "hidden_test.py" = "hidden_test.py" }}
        command = "{sys.executable} hidden_test.py {{junit}}"
        fail_to_pass = ["t.a"]
        metrics = ["resolved"]
    """,
    )
    try:
        _validate(scenario, tmp_path / "exp", {"hidden-tests": HiddenTestsMode()})
    finally:
        monkeypatch.undo()
    seen = dump.read_text()
    assert "plain-1234" in seen
    for name in keys:
        assert name not in seen


# A plugin declaring the key it guards, whose hook names another one it never declared:
# a command that did not import it would let that other key through.
GUARDS_AN_UNDECLARED_KEY = """
from pathlib import Path
from trysquare import hookimpl
from trysquare.modes import Validation

Path({marker!r}).touch()

class Mode:
    name = "echo"
    def load(self, table, source):
        return source.structure(table, Validation)

@hookimpl
def trysquare_register_modes(register):
    register(Mode())

@hookimpl
def trysquare_protected_env(scenario_file, config):
    return {{"ECHO_WORDS": "declared", "ECHO_SECRET": "never declared"}}
"""

LEAK_VALIDATOR = """
    import json, os
    print(json.dumps({"metrics": {"seen": sorted(k for k in os.environ if k.startswith("ECHO"))}}))
"""


def test_a_plugin_guarding_a_key_it_does_not_declare_is_refused(
    cli, site, make_run, tmp_path: Path
) -> None:
    marker = tmp_path / "imported"
    site(
        "trysquare-echo",
        "trysquare_echo",
        GUARDS_AN_UNDECLARED_KEY.format(marker=str(marker)),
        provides=("mode.echo", "protected_env.ECHO_WORDS"),
    )
    run = make_run("r1")
    run.base({"a.py": "a = 1\n"})
    run.finish()
    write_script(tmp_path / "s", "leak.py", LEAK_VALIDATOR)
    script_only = """
        [[validation]]
        mode = "script"
        command = "leak.py"
        metrics = ["seen"]
    """
    secrets = {"ECHO_WORDS": "words-1111", "ECHO_SECRET": "secret-2222"}
    # Not loaded by a scenario that never names its mode: its declared key is withheld.
    scenario = write_scenario(tmp_path / "s", script_only)
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress", env=secrets)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    result = tmp_path / "exp" / "runs" / "r1" / "validation" / "script.json"
    assert "ECHO_WORDS" not in json.loads(result.read_text())["metrics"]["seen"]
    # Loaded, its answer names a key no declaration gave: it is refused, so its mode is
    # unknown and nothing is validated with it; the key it named is withheld all the same.
    echoing = write_scenario(
        tmp_path / "s",
        script_only + '\n[[validation]]\nname = "echoed"\nmode = "echo"\nmetrics = ["said"]\n',
        name="echo.toml",
    )
    refused = cli("validate", echoing, tmp_path / "exp", "--no-progress", "--force", env=secrets)
    assert marker.exists()
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert "plugin 'trysquare-echo' failed to load" in refused.stderr
    assert "names ECHO_SECRET, which no plugin declares as protected_env.ECHO_SECRET" in (
        refused.stderr
    )
    assert "no installed plugin provides mode 'echo'" in refused.stderr
