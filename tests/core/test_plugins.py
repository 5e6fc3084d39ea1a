"""The plugin manager: lazy, guarded per plugin, filtered by environment variables."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from tests.helpers import scored_run, write_scenario

GOOD_MODE = """
from trysquare import hookimpl
from trysquare.modes import Outcome, Validation

class EchoValidation(Validation):
    pass

class EchoMode:
    name = "echo"
    def load(self, table, source):
        return source.structure(table, Validation)

@hookimpl
def trysquare_register_modes(register):
    register(EchoMode())
"""

BROKEN_IMPORT = "raise RuntimeError('this plugin is broken on purpose')\n"

UNKNOWN_HOOK = """
from trysquare import hookimpl

@hookimpl
def trysquare_register_everything(register):
    pass
"""

DUPLICATE_SCRIPT = """
from trysquare import hookimpl

class Mode:
    name = "script"
    def load(self, table, source):
        raise AssertionError("never used")

@hookimpl
def trysquare_register_modes(register):
    register(Mode())
"""


def plugins_json(cli, *, failed: bool = False, **env: str) -> list[dict]:
    done = cli("plugins", "--json", env=env)
    assert done.returncode == (1 if failed else 0), done.stderr  # a failed plugin: exit 1
    return json.loads(done.stdout)


def by_name(listing: list[dict]) -> dict[str, dict]:
    return {entry["name"]: entry for entry in listing}


def test_plugins_json_lists_the_in_tree_modes(cli) -> None:
    listing = by_name(plugins_json(cli))
    assert listing["trysquare-script"]["modes"] == ["script"]
    assert listing["trysquare-judge"]["modes"] == ["judge"]
    assert listing["trysquare-form"]["modes"] == ["form"]
    for entry in listing.values():
        # The pinned shape of `plugins --json` (docs/plugins.md): nothing added, nothing missing.
        assert set(entry) == {
            "name",
            "version",
            "hooks",
            "modes",
            "providers",
            "session_formats",
            "executors",
            "report_formats",
            "error",
            "schema_version",
        }
        assert entry["schema_version"] == 1
        assert entry["error"] is None
    assert "trysquare_register_modes" in listing["trysquare-script"]["hooks"]
    assert "trysquare_register_report_formats" in listing["trysquare-view"]["hooks"]
    assert listing["trysquare-view"]["report_formats"] == ["html"]
    text = cli("plugins").stdout
    assert "report formats: html" in text


def test_core_alone_lists_no_modes_and_names_the_missing_plugin(cli, tmp_path: Path) -> None:
    listing = plugins_json(cli, TRYSQUARE_LOAD_PLUGINS="")
    assert all(not entry["modes"] for entry in listing)
    scenario = write_scenario(
        tmp_path,
        """
        [[validation]]
        mode = "judge"
        provider = "p"
        model = "m"
        thinking = "off"
        rubric = "rubric.md"
        pieces = ["diff"]
        metrics = ["ok"]
    """,
    )
    done = cli("check", scenario, env={"TRYSQUARE_LOAD_PLUGINS": ""})
    assert done.returncode == 2
    # Run from this checkout: the command that installs it here, not a name on no index (issue 30).
    root = Path(__file__).resolve().parents[2]
    assert (
        f"no installed plugin provides mode 'judge' (from the checkout {root}: uv sync "
        "--all-packages, which installs trysquare-judge)"
    ) in done.stderr
    assert "Traceback" not in done.stderr


def test_block_and_load_lists(cli) -> None:
    blocked = by_name(plugins_json(cli, TRYSQUARE_BLOCK_PLUGINS="trysquare-judge, trysquare-form"))
    assert "trysquare-judge" not in blocked and "trysquare-form" not in blocked
    assert "trysquare-script" in blocked
    only = by_name(plugins_json(cli, TRYSQUARE_LOAD_PLUGINS="trysquare-form"))
    assert "trysquare-form" in only and "trysquare-script" not in only


PROVIDER_ON_THE_JUDGE = """
from trysquare import hookimpl

@hookimpl
def trysquare_register_judge_providers(register):
    pass
"""


def test_a_plugin_built_on_a_blocked_or_left_out_plugin(cli, site) -> None:
    site(
        "trysquare-fakeprovider",
        "trysquare_fakeprovider",
        PROVIDER_ON_THE_JUDGE,
        requires=("trysquare-judge>=0.1.0", "httpx>=0.27", "pytest; extra == 'test'"),
    )
    assert by_name(plugins_json(cli))["trysquare-fakeprovider"]["error"] is None
    # Blocking the judge blocks the providers built on it, silently, as blocking the judge does.
    done = cli("plugins", "--json", env={"TRYSQUARE_BLOCK_PLUGINS": "trysquare-judge"})
    assert done.returncode == 0, done.stderr
    assert "trysquare-fakeprovider" not in by_name(json.loads(done.stdout))
    assert "warning" not in done.stderr
    # Choosing the provider without the judge is a mistake, said as one.
    listing = by_name(
        plugins_json(cli, failed=True, TRYSQUARE_LOAD_PLUGINS="trysquare-fakeprovider")
    )
    assert listing["trysquare-fakeprovider"]["error"] == (
        "needs trysquare-judge, which TRYSQUARE_LOAD_PLUGINS leaves out"
    )
    both = by_name(
        plugins_json(cli, TRYSQUARE_LOAD_PLUGINS="trysquare-fakeprovider,trysquare-judge")
    )
    assert both["trysquare-fakeprovider"]["error"] is None


def test_a_broken_plugin_is_reported_and_the_others_work(cli, site, tmp_path: Path) -> None:
    site("trysquare-broken", "trysquare_broken", BROKEN_IMPORT)
    site("trysquare-oddhook", "trysquare_oddhook", UNKNOWN_HOOK)
    site("trysquare-echo", "trysquare_echo", GOOD_MODE)
    done = cli("plugins", "--json")
    assert done.returncode == 1, done.stderr
    listing = by_name(json.loads(done.stdout))
    assert "RuntimeError: this plugin is broken on purpose" in listing["trysquare-broken"]["error"]
    assert "trysquare_register_everything" in listing["trysquare-oddhook"]["error"]
    assert listing["trysquare-echo"]["modes"] == ["echo"]
    assert listing["trysquare-echo"]["version"] == "1.0"
    assert listing["trysquare-script"]["error"] is None
    assert "plugin 'trysquare-broken' failed to load" in done.stderr
    # --help still works with a broken plugin installed.
    help_run = cli("--help")
    assert help_run.returncode == 0 and "validate" in help_run.stdout


def test_a_mode_registered_twice_is_refused_naming_both(cli, site) -> None:
    site("trysquare-imposter", "trysquare_imposter", DUPLICATE_SCRIPT)
    listing = by_name(plugins_json(cli, failed=True))
    errors = [entry["error"] for entry in listing.values() if entry["error"]]
    assert len(errors) == 1
    assert (
        "'script'" in errors[0]
        and "trysquare-imposter" in errors[0]
        and "trysquare-script" in errors[0]
    )
    # The built-in keeps its name and stays whole.
    assert listing["trysquare-script"]["error"] is None and listing["trysquare-script"][
        "modes"
    ] == ["script"]


def test_blocking_a_broken_plugin_silences_it(cli, site) -> None:
    site("trysquare-broken", "trysquare_broken", BROKEN_IMPORT)
    done = cli("plugins", "--json", env={"TRYSQUARE_BLOCK_PLUGINS": "trysquare-broken"})
    assert "trysquare-broken" not in by_name(json.loads(done.stdout))
    assert "warning" not in done.stderr


def test_importing_trysquare_loads_no_plugin() -> None:
    import subprocess
    import sys

    code = "import sys, trysquare, trysquare.assay; print('pluggy' in sys.modules, 'cattrs' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]
    from trysquare import hookimpl

    assert hookimpl.project_name == "trysquare"


CONTEXT_PLUGIN = """
from trysquare import hookimpl

@hookimpl
def trysquare_build_context(run, validation, context):
    if run.id == "bad":
        raise ValueError("no ticket for this run")
    if run.id == "clash":
        return {"cell": "overwritten"}
    return {"ticket": f"ticket-{run.id}"}
"""


def test_plugin_context_keys_and_a_broken_plugin_skip_only_their_run(
    cli, site, make_run, tmp_path: Path
) -> None:
    from tests.helpers import write_script

    site("trysquare-tickets", "trysquare_tickets", CONTEXT_PLUGIN)
    for repetition, run_id in enumerate(("good", "bad", "clash"), start=1):
        run = make_run(run_id, repetition=repetition)
        run.base({"a.py": "a = 1\n"})
        run.finish()
    write_script(
        tmp_path / "s",
        "echo.py",
        """
        import json, sys
        context = json.load(open(sys.argv[1]))
        print(json.dumps({"metrics": {"ticket": context["ticket"]}}))
    """,
    )
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        mode = "script"
        command = "echo.py"
        metrics = ["ticket"]
    """,
    )
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 1, done.stderr
    assert "failed: ValueError: no ticket for this run" in done.stderr and "runs/bad" in done.stderr
    assert "context key 'cell' would replace a core key" in done.stderr and "'clash'" in done.stderr
    assert (
        done.stdout.strip().splitlines()[-1] == "1 run: 1 valid; 2 run folder(s) could not be read"
    )
    good = json.loads(
        (tmp_path / "exp" / "runs" / "good" / "validation" / "script.json").read_text()
    )
    assert good["metrics"] == {"ticket": "ticket-good"}


def every_hook_raises(marker: Path) -> str:
    """A plugin whose every hook raises; importing it leaves ``marker`` behind."""
    hooks = [
        "trysquare_register_modes(register)",
        "trysquare_register_session_formats(register)",
        "trysquare_build_context(run, validation, context)",
        "trysquare_metrics_collected(run, validation, outcome)",
        "trysquare_register_commands(cli)",
        "trysquare_register_executors(register)",
        "trysquare_protected_env(scenario_file, config)",
        "trysquare_register_report_formats(register)",
        "trysquare_register_judge_providers(register)",
    ]
    body = "".join(
        f"\n@hookimpl\ndef {hook}:\n    raise RuntimeError('{hook.split('(')[0]} broke')\n"
        for hook in hooks
    )
    return f"from pathlib import Path\nfrom trysquare import hookimpl\nPath({str(marker)!r}).touch()\n{body}"


def test_a_plugin_whose_every_hook_raises_breaks_no_command(
    cli, site, make_run, tmp_path: Path
) -> None:
    marker = tmp_path / "imported"
    site("trysquare-allbroken", "trysquare_allbroken", every_hook_raises(marker))

    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("trysquare ")
    assert not marker.exists(), "--version imported a plugin"
    assert version.stderr == ""

    shown = cli("--help")
    assert shown.returncode == 0, shown.stderr
    assert "validate" in shown.stdout and "form" in shown.stdout  # the other plugins' commands stay
    assert (
        "plugin 'trysquare-allbroken' failed" in shown.stderr
        and "internal error" not in shown.stderr
    )
    assert marker.exists()

    listing = cli("plugins")
    assert listing.returncode == 1, listing.stderr
    broken = [
        line for line in listing.stdout.splitlines() if line.startswith("trysquare-allbroken")
    ]
    assert broken and "FAILED" in broken[0] and "broke" in broken[0], listing.stdout
    assert any(
        line.startswith("trysquare-script") and "modes: script" in line
        for line in listing.stdout.splitlines()
    )
    as_json = by_name(plugins_json(cli, failed=True))
    assert "RuntimeError" in as_json["trysquare-allbroken"]["error"]
    assert as_json["trysquare-judge"]["providers"] == ["openai"]

    scenario = scored_run(make_run, tmp_path)
    validated = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert validated.returncode == 0, validated.stderr
    assert "plugin 'trysquare-allbroken' failed" in validated.stderr
    result = json.loads(
        (tmp_path / "exp" / "runs" / "r1" / "validation" / "script.json").read_text()
    )
    assert result["metrics"] == {"ok": True}

    reported = cli("report", scenario, tmp_path / "exp")
    assert reported.returncode == 0, reported.stderr
    assert "ok" in reported.stdout and "plugin 'trysquare-allbroken' failed" in reported.stderr


def observer(raises: bool, log: Path) -> str:
    action = (
        "raise OSError('tracker is down')" if raises else f"Path({str(log)!r}).write_text(run.id)"
    )
    return (
        "from pathlib import Path\nfrom trysquare import hookimpl\n\n@hookimpl\n"
        f"def trysquare_metrics_collected(run, validation, outcome):\n    {action}\n"
    )


def test_an_observer_that_raises_is_a_warning_and_the_others_are_told(
    cli, site, make_run, tmp_path: Path
) -> None:
    log = tmp_path / "told"
    site("trysquare-aaa-down", "trysquare_aaa_down", observer(True, log))
    site("trysquare-zzz-up", "trysquare_zzz_up", observer(False, log))
    scenario = scored_run(make_run, tmp_path)
    done = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "plugin 'trysquare-aaa-down'" in done.stderr and "tracker is down" in done.stderr
    assert log.read_text() == "r1"  # the observer after the broken one was still told


ADDS_NO_SPECS = """
from trysquare import hookimpl

@hookimpl
def trysquare_add_hookspecs(pluginmanager):
    raise RuntimeError('cannot add my hooks')
"""


def test_a_plugin_whose_hookspecs_fail_is_reported_alone(cli, site) -> None:
    site("trysquare-nospecs", "trysquare_nospecs", ADDS_NO_SPECS)
    listing = by_name(plugins_json(cli, failed=True))
    assert "cannot add my hooks" in listing["trysquare-nospecs"]["error"]
    assert listing["trysquare-judge"]["error"] is None and listing["trysquare-judge"][
        "providers"
    ] == ["openai"]


GUARDS_A_KEY_BUT_BREAKS = """
from trysquare import hookimpl

@hookimpl
def trysquare_register_modes(register):
    raise RuntimeError('modes broke')

@hookimpl
def trysquare_protected_env(scenario_file, config):
    return {"MY_SERVICE_TOKEN_VAR": "the broken plugin's service key"}
"""


def test_a_key_a_failed_plugin_guards_stays_withheld(site, tmp_path: Path, capsys) -> None:
    import pytest
    from trysquare import plugins
    from trysquare.errors import ScenarioError
    from trysquare.scenario import load_scenario

    from tests.helpers import write_script

    site("trysquare-guard", "trysquare_guard", GUARDS_A_KEY_BUT_BREAKS)
    plugins.reset()
    write_script(tmp_path / "s", "score.py", "print('{}')\n")
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["ok"]
        pass_env = ["MY_SERVICE_TOKEN_VAR"]
    """,
    )
    with pytest.raises(ScenarioError) as refused:
        load_scenario(scenario)
    assert "MY_SERVICE_TOKEN_VAR" in refused.value.message
    assert "the broken plugin's service key" in refused.value.message
    assert (
        "plugin 'trysquare-guard' failed: trysquare_register_modes raised RuntimeError"
        in capsys.readouterr().err
    )


def test_the_listed_columns_are_the_plugin_records_own_in_their_order() -> None:
    import attrs
    from trysquare.plugin_info import PluginInfo
    from trysquare.plugins import COLUMNS

    fields = [field.name for field in attrs.fields(PluginInfo)]
    listed = [
        name for name in fields if name not in ("name", "version", "hooks", "error", "refused")
    ]
    assert tuple(listed) == COLUMNS
    from trysquare import plugins

    assert plugins.PluginInfo is PluginInfo


# The name a requirement starts with, normalized (PEP 503), as a pattern says it; plugins
# reads it with string methods, which must answer the same.
def _requirement_name_by_pattern(requirement: str) -> str | None:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    return re.sub(r"[-_.]+", "-", match.group(0)).lower() if match else None


@given(st.text(alphabet=st.sampled_from("aZ09-_.;> =[]~\u00e9 ")) | st.text())
@example("trysquare-judge>=0.1.0")
@example("Trysquare__Core...x>=1")
@example("-x")
@example("")
@example("a-")
def test_a_requirement_names_its_distribution_as_the_pattern_reads_it(requirement: str) -> None:
    from trysquare import plugins

    assert plugins._requirement_name(requirement) == _requirement_name_by_pattern(requirement)


def _hostile_module() -> object:
    """A module holding every kind of value a name may hold, marked and not."""
    import types as module_types

    from trysquare.hookspecs import hookimpl as impl
    from trysquare.hookspecs import hookspec as spec

    module = module_types.ModuleType("hostile_plugin")

    @impl
    def trysquare_register_modes(register: object) -> None: ...

    @spec
    def trysquare_own_spec() -> None: ...

    def through_func() -> None: ...

    through_func.__func__ = trysquare_register_modes  # type: ignore[attr-defined]

    class Faker:
        __class__ = staticmethod  # type: ignore[assignment]

    values = {
        "trysquare_register_modes": trysquare_register_modes,
        "trysquare_own_spec": trysquare_own_spec,
        "through_func": through_func,
        "a_static": staticmethod(trysquare_register_modes),
        "a_class_method": classmethod(trysquare_register_modes),
        "a_class": Faker,
        "a_faker": Faker(),
        "a_module": json,
        "a_text": "x",
        "a_number": 1,
        "nothing": None,
        "a_builtin": len,
        "__annotations__": {"x": int},
        "__getattr__": lambda name: trysquare_register_modes,
        "__dir__": lambda: ["ghost"],
        "trysquare_marked_text": "not a function",
    }
    module.__dict__.update(values)
    return module


def test_the_manager_finds_exactly_the_hooks_pluggys_own_lookup_finds() -> None:
    import sys

    import pluggy
    from trysquare import hookspecs, plugins

    manager = plugins._Manager(hookspecs.PROJECT_NAME)
    reference = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    # Every trysquare module and plugin loaded in this process, and a hostile one.
    holders = [
        module
        for name, module in sorted(sys.modules.items())
        if name.startswith(("trysquare", "pluggy")) and module is not None
    ]
    hostile = _hostile_module()
    holders.append(hostile)
    assert len(holders) > 20
    # The hostile module's marked functions are found (one through its __func__).
    for name in ("trysquare_register_modes", "through_func", "a_static"):
        assert manager.parse_hookimpl_opts(hostile, name) is not None, name
    assert manager.parse_hookspec_opts(hostile, "trysquare_own_spec") is not None
    for holder in holders:
        for name in [*dir(holder), "ghost", "absent"]:
            assert manager.parse_hookimpl_opts(holder, name) == reference.parse_hookimpl_opts(
                holder, name
            ), (holder, name)
            assert manager.parse_hookspec_opts(holder, name) == reference.parse_hookspec_opts(
                holder, name
            ), (holder, name)
