"""A command loads only the plugins it needs, known from their ``trysquare.provides`` metadata."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from tests.helpers import scored_run, write_scenario, write_script


def marked_mode(marker: Path, mode: str = "echo") -> str:
    """A plugin registering the mode ``mode``; importing it leaves ``marker`` behind."""
    return f"""
from pathlib import Path
from trysquare import hookimpl
from trysquare.modes import Validation

Path({str(marker)!r}).touch()

class Mode:
    name = {mode!r}
    def load(self, table, source):
        return source.structure(table, Validation)

@hookimpl
def trysquare_register_modes(register):
    register(Mode())
"""


ECHO_TABLE = """
        [[validation]]
        name = "echoed"
        mode = "echo"
        metrics = ["said"]
"""


def test_a_declared_plugin_loads_only_when_its_mode_is_named(
    cli, site, make_run, tmp_path: Path
) -> None:
    marker = tmp_path / "imported"
    site("trysquare-echo", "trysquare_echo", marked_mode(marker), provides=("mode.echo",))
    scenario = scored_run(make_run, tmp_path)
    for command in (
        ("validate", scenario, tmp_path / "exp", "--no-progress"),
        ("report", scenario, tmp_path / "exp"),
    ):
        done = cli(*command)
        assert done.returncode == 0, done.stderr
        assert not marker.exists(), f"{command[0]} imported a plugin whose mode it never names"
    echoing = write_scenario(tmp_path / "s", scenario.read_text() + ECHO_TABLE, name="echo.toml")
    done = cli("report", echoing, tmp_path / "exp")
    assert "echoed" in done.stdout, done.stderr
    assert marker.exists()


def test_a_plugin_that_declares_nothing_loads_for_every_command(
    cli, site, make_run, tmp_path: Path
) -> None:
    marker = tmp_path / "imported"
    site("trysquare-echo", "trysquare_echo", marked_mode(marker))
    scenario = scored_run(make_run, tmp_path)
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert marker.exists()


def test_a_broken_declared_plugin_is_named_by_plugins_and_by_the_command_that_needs_it(
    cli, site, make_run, tmp_path: Path
) -> None:
    site(
        "trysquare-broken",
        "trysquare_broken",
        "raise RuntimeError('broken on purpose')\n",
        provides=("mode.echo",),
    )
    scenario = scored_run(make_run, tmp_path)
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "trysquare-broken" not in done.stderr  # a plugin this command never needs
    listing = cli("plugins", "--json")
    assert listing.returncode == 1
    broken = {entry["name"]: entry for entry in json.loads(listing.stdout)}["trysquare-broken"]
    assert "RuntimeError: broken on purpose" in broken["error"]
    echoing = write_scenario(tmp_path / "s", scenario.read_text() + ECHO_TABLE, name="echo.toml")
    refused = cli("validate", echoing, tmp_path / "exp", "--no-progress")
    assert refused.returncode == 2
    assert (
        "plugin 'trysquare-broken' failed to load: RuntimeError: broken on purpose"
        in refused.stderr
    )
    assert "no installed plugin provides mode 'echo'" in refused.stderr


def test_a_mode_nobody_declares_loads_every_mode_plugin_to_name_the_nearest(
    cli, site, make_run, tmp_path: Path
) -> None:
    marker = tmp_path / "imported"
    site("trysquare-echo", "trysquare_echo", marked_mode(marker), provides=("mode.echo",))
    scenario = scored_run(make_run, tmp_path)
    typo = write_scenario(
        tmp_path / "s", scenario.read_text().replace('"script"', '"ecoh"'), name="typo.toml"
    )
    done = cli("validate", typo, tmp_path / "exp", "--no-progress")
    assert done.returncode == 2
    assert "no installed plugin provides mode 'ecoh' (did you mean 'echo'?)" in done.stderr
    assert marker.exists()


def test_a_declared_plugin_missing_its_declared_name_is_still_found(
    cli, site, make_run, tmp_path: Path
) -> None:
    # Declared `mode.other`, registers `echo`: a scenario naming echo finds it all the same.
    site(
        "trysquare-echo",
        "trysquare_echo",
        marked_mode(tmp_path / "imported"),
        provides=("mode.other",),
    )
    scenario = scored_run(make_run, tmp_path)
    echoing = write_scenario(tmp_path / "s", scenario.read_text() + ECHO_TABLE, name="echo.toml")
    done = cli("report", echoing, tmp_path / "exp")
    assert "echoed" in done.stdout, done.stderr


def test_validate_and_report_import_no_plugin_they_do_not_need(
    cli_process, make_run, tmp_path: Path
) -> None:
    scenario = scored_run(make_run, tmp_path)
    probe = (
        "import sys\nfrom trysquare.cli import main\ncode = main(sys.argv[1:])\n"
        "print(sorted(name for name in sys.modules if name.startswith('trysquare_')))\n"
        "raise SystemExit(code)\n"
    )
    imported = {}
    for command in (
        ("validate", scenario, tmp_path / "exp", "--no-progress"),
        ("report", scenario, tmp_path / "exp"),
    ):
        done = subprocess.run(
            [sys.executable, "-c", probe, *map(str, command)],
            env=cli_process.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        imported[command[0]] = set(eval(done.stdout.strip().splitlines()[-1]))
    for command, modules in imported.items():
        assert "trysquare_script" in modules, command
        for unneeded in (
            "trysquare_form",
            "trysquare_view",
            "trysquare_dask",
            "trysquare_hidden_tests",
            "trysquare_judge.mode",
        ):
            assert unneeded not in modules, f"{command} imported {unneeded}"
    # The judge's and its providers' default keys are declared, and no trysquare.toml is in
    # force: neither command imports the judge to learn the keys it guards.
    for command, modules in imported.items():
        assert not {"trysquare_judge", "trysquare_anthropic"} & modules, command


def test_a_validate_without_a_test_command_never_imports_the_preparing(
    cli_process, make_run, tmp_path: Path
) -> None:
    # Nothing runs `prepare` without a test_command: validate opens the sharing scope
    # (trysquare._prepared_scope) but leaves the preparing itself unimported.
    scenario = scored_run(make_run, tmp_path)
    probe = (
        "import sys\nfrom trysquare.cli import main\ncode = main(sys.argv[1:])\n"
        "print(sorted(name for name in sys.modules if name.startswith('trysquare.')))\n"
        "raise SystemExit(code)\n"
    )
    for extra in ((), ("--replay", "--force")):
        done = subprocess.run(
            [sys.executable, "-c", probe, "validate", str(scenario), str(tmp_path / "exp")]
            + ["--no-progress", *extra],
            env=cli_process.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        modules = set(eval(done.stdout.strip().splitlines()[-1]))
        assert "trysquare._prepared_scope" in modules, extra
        assert "trysquare._prepared" not in modules, extra


def test_the_in_tree_plugins_declare_what_they_register(cli) -> None:
    declared: dict[str, set[str]] = {}
    for entry_point in metadata.entry_points(group="trysquare.provides"):
        assert entry_point.dist is not None
        declared.setdefault(entry_point.dist.name, set()).add(entry_point.name)
    listing = {entry["name"]: entry for entry in json.loads(cli("plugins", "--json").stdout)}
    kinds = {
        "modes": "mode",
        "providers": "provider",
        "session_formats": "session_format",
        "executors": "executor",
        "report_formats": "report_format",
    }
    # `uv run pytest` installs the root project and its dev group, not every plugin of the
    # repository (`uv sync --all-packages` does): the ones installed are checked.
    installed = [
        name
        for name in (
            "trysquare-script",
            "trysquare-judge",
            "trysquare-form",
            "trysquare-view",
            "trysquare-anthropic",
            "trysquare-dask",
            "trysquare-hidden-tests",
        )
        if name in listing
    ]
    assert {"trysquare-script", "trysquare-judge", "trysquare-form", "trysquare-view"} <= set(
        installed
    )
    for name in installed:
        registered = {
            f"{kinds[column]}.{item}" for column in kinds for item in listing[name][column]
        }
        names = {
            item
            for item in declared[name]
            if not item.startswith(("hook.", "hook_with_config.", "command.", "protected_env."))
        }
        assert names == registered, name
        hooks = set(listing[name]["hooks"])
        assert bool(
            {"hook.trysquare_protected_env", "hook_with_config.trysquare_protected_env"}
            & declared[name]
        ) == ("trysquare_protected_env" in hooks), name
        assert any(item.startswith("command.") for item in declared[name]) == (
            "trysquare_register_commands" in hooks
        ), name


GUARDS_A_KEY = """
from trysquare import hookimpl
from trysquare.modes import Validation

class Mode:
    name = "echo"
    def load(self, table, source):
        return source.structure(table, Validation)

@hookimpl
def trysquare_register_modes(register):
    register(Mode())

@hookimpl
def trysquare_protected_env(scenario_file, config):
    return {"ECHO_WORDS": "the echo plugin's key"}
"""


def test_a_plugin_implementing_a_hook_it_does_not_declare_is_refused(cli, site) -> None:
    # Declared as a mode only, its protected keys would be asked for only when some command
    # happened to load it: it is disabled, saying what it must declare.
    site("trysquare-echo", "trysquare_echo", GUARDS_A_KEY, provides=("mode.echo",))
    listing = cli("plugins", "--json")
    assert listing.returncode == 1
    entry = {entry["name"]: entry for entry in json.loads(listing.stdout)}["trysquare-echo"]
    assert "implements trysquare_protected_env but declares no hook.trysquare_protected_env" in (
        entry["error"] or ""
    )
    site(
        "trysquare-echo2",
        "trysquare_echo2",
        GUARDS_A_KEY.replace('"echo"', '"echo2"'),
        provides=("mode.echo2", "hook.trysquare_protected_env"),
    )
    listing = cli("plugins", "--json")
    entry = {entry["name"]: entry for entry in json.loads(listing.stdout)}["trysquare-echo2"]
    assert entry["error"] is None and entry["modes"] == ["echo2"]


def test_a_key_a_declared_plugin_guards_is_withheld_from_a_script_validator(
    cli, site, make_run, tmp_path: Path
) -> None:
    site(
        "trysquare-echo",
        "trysquare_echo",
        GUARDS_A_KEY,
        provides=("mode.echo", "hook.trysquare_protected_env"),
    )
    run = make_run("r1")
    run.base({"a.py": "a = 1\n"})
    run.finish()
    write_script(
        tmp_path / "s",
        "leak.py",
        """
        import json, os
        print(json.dumps({"metrics": {"leaked": "ECHO_WORDS" in os.environ}}))
    """,
    )
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        mode = "script"
        command = "leak.py"
        metrics = ["leaked"]
    """,
    )
    done = cli(
        "validate",
        scenario,
        tmp_path / "exp",
        "--no-progress",
        env={"ECHO_WORDS": "do not show me"},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(
        (tmp_path / "exp" / "runs" / "r1" / "validation" / "script.json").read_text()
    )
    assert result["metrics"] == {"leaked": False}


def test_the_in_tree_defaults_declare_what_they_register(cli) -> None:
    from trysquare.plugins import BUILTIN_MODULES, BUILTIN_PROVIDES

    assert set(BUILTIN_PROVIDES) == set(BUILTIN_MODULES)
    listing = {entry["name"]: entry for entry in json.loads(cli("plugins", "--json").stdout)}
    kinds = {
        "session_formats": "session_format",
        "executors": "executor",
        "report_formats": "report_format",
    }
    for module, declared in BUILTIN_PROVIDES.items():
        registered = {
            f"{kinds[column]}.{item}" for column in kinds for item in listing[module][column]
        }
        assert registered == declared, module


def test_the_judge_names_only_declared_keys_without_a_trysquare_toml(tmp_path: Path) -> None:
    # Loaded for a judge scenario with no trysquare.toml in force, the judge is asked for its
    # keys and must name only keys the installed plugins declare (or it would be refused).
    from trysquare import plugins

    plugins.reset()
    try:
        assert "judge" in plugins.modes({"judge"})
        keys = plugins.protected_env(tmp_path / "scenario.toml", None)
        assert "provider type 'openai'" in keys["OPENAI_API_KEY"]
        assert "judge" in plugins.modes({"judge"})
        assert "trysquare-judge" not in {info.name for info in plugins.infos() if info.error}
    finally:
        plugins.reset()
