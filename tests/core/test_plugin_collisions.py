"""Built-ins keep their names; a plugin's print never reaches a document; help never waits.

Each plugin here is a real distribution put on the path with its metadata (a
``*.dist-info`` folder with ``entry_points.txt``), as pip would leave it.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.helpers import scored_run

IMPOSTOR = """
from trysquare import hookimpl
from trysquare.modes import Validation

class Named:
    def __init__(self, name):
        self.name = name
    def load(self, table, source):
        raise AssertionError("the impostor's mode was used")
    def render(self, source):
        return "IMPOSTOR OUTPUT\\n"
    def configure(self, options, *, jobs):
        raise AssertionError("the impostor's executor was used")

class OwnMode:
    name = "own"
    def load(self, table, source):
        return source.structure(table, Validation)

class OwnFormat:
    name = "own"
    def render(self, source):
        return "the impostor's own format\\n"

@hookimpl
def trysquare_register_modes(register):
    register(Named("script"))
    register(OwnMode())

@hookimpl
def trysquare_register_judge_providers(register):
    register(Named("openai"))

@hookimpl
def trysquare_register_session_formats(register):
    register(Named("pi"))

@hookimpl
def trysquare_register_report_formats(register):
    register(Named("md"))
    register(Named("html"))
    register(OwnFormat())

@hookimpl
def trysquare_register_executors(register):
    register(Named("local"))
"""


def listing(cli, **env: str) -> tuple[int, dict[str, dict]]:
    done = cli("plugins", "--json", env=env)
    return done.returncode, {entry["name"]: entry for entry in json.loads(done.stdout)}


def test_a_plugin_registering_built_in_names_is_refused_those_names_and_keeps_the_rest(
    cli, site, make_run, tmp_path: Path
) -> None:
    # "aaa" sorts before every built-in: it used to register first and win.
    site("trysquare-aaa-impostor", "trysquare_aaa_impostor", IMPOSTOR)
    code, found = listing(cli)
    assert code == 1
    impostor = found["trysquare-aaa-impostor"]
    for refused in (
        "mode 'script'",
        "provider 'openai'",
        "session format 'pi'",
        "report format 'md'",
        "report format 'html'",
        "executor 'local'",
    ):
        assert refused in impostor["error"], impostor["error"]
    assert "trysquare-script" in impostor["error"] and "trysquare-aaa-impostor" in impostor["error"]
    # Nothing else of either is lost.
    assert impostor["modes"] == ["own"]
    assert (
        found["trysquare-script"]["modes"] == ["script"]
        and found["trysquare-script"]["error"] is None
    )
    assert found["trysquare-judge"]["modes"] == ["judge"] and found["trysquare-judge"][
        "providers"
    ] == ["openai"]
    assert found["trysquare.sessions.builtin"]["session_formats"] == sorted(
        found["trysquare.sessions.builtin"]["session_formats"]
    )
    assert {"pi", "claude-code", "codex"} <= set(
        found["trysquare.sessions.builtin"]["session_formats"]
    )
    assert found["trysquare.executors"]["executors"] == ["local"]
    text = cli("plugins")
    assert text.returncode == 1
    assert "report formats: csv, json, md" in text.stdout and "report formats: html" in text.stdout
    assert "REFUSED: mode 'script'" in text.stdout

    scenario = scored_run(make_run, tmp_path)
    validated = cli("validate", scenario, tmp_path / "exp", "--no-progress")
    assert validated.returncode == 0, validated.stderr
    assert "mode 'script' of 'trysquare-aaa-impostor' refused" in validated.stderr
    result = json.loads(
        (tmp_path / "exp" / "runs" / "r1" / "validation" / "script.json").read_text()
    )
    assert result["metrics"] == {"ok": True}
    html = cli("report", scenario, tmp_path / "exp", "--format", "html")
    assert "IMPOSTOR" not in html.stdout and "<html" in html.stdout.lower()
    as_json = cli("report", scenario, tmp_path / "exp", "--format", "json")
    json.loads(as_json.stdout)
    own = cli("report", scenario, tmp_path / "exp", "--format", "own")
    assert own.stdout == "the impostor's own format\n"


SPOOF = """
from trysquare import hookimpl

class Mode:
    name = "spoofed"
    def load(self, table, source):
        raise AssertionError("never used")

@hookimpl
def trysquare_register_modes(register):
    register(Mode())
"""


def spoof(folder: Path, dist: str, entry_point: str, module: str) -> None:
    """A distribution ``dist`` declaring the entry point name ``entry_point``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(textwrap.dedent(SPOOF), encoding="utf-8")
    info = folder / f"{dist.replace('-', '_')}-6.6.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 6.6\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[trysquare]\n{entry_point} = {module}\n", encoding="utf-8"
    )


def test_a_distribution_declaring_a_built_ins_entry_point_name_is_named_and_blockable(
    cli, site
) -> None:
    folder = site("trysquare-unrelated", "trysquare_unrelated", "")
    spoof(folder, "evil-dist", "trysquare-script", "evil_script")
    code, found = listing(cli)
    assert code == 1
    assert (
        found["trysquare-script"]["modes"] == ["script"]
        and found["trysquare-script"]["error"] is None
    )
    assert found["trysquare-script"]["version"] != "6.6"
    error = found["evil-dist"]["error"]
    assert "'trysquare-script'" in error and "TRYSQUARE_BLOCK_PLUGINS=evil-dist" in error
    assert "spoofed" not in json.dumps(found)
    code, found = listing(cli, TRYSQUARE_BLOCK_PLUGINS="evil-dist")
    assert (
        code == 0 and "evil-dist" not in found and found["trysquare-script"]["modes"] == ["script"]
    )
    # Blocking the real one does not hand its name to the other.
    code, found = listing(cli, TRYSQUARE_BLOCK_PLUGINS="trysquare-script")
    assert "trysquare-script" not in found and "spoofed" not in json.dumps(found)


def test_two_distributions_with_one_entry_point_name_are_both_named_each_blockable(
    cli, site
) -> None:
    folder = site("trysquare-unrelated", "trysquare_unrelated", "")
    spoof(folder, "acme-one", "acme", "acme_one")
    spoof(folder, "acme-two", "acme", "acme_two")
    code, found = listing(cli)
    assert code == 1
    assert "'acme'" in found["acme-one"]["error"] and "'acme'" in found["acme-two"]["error"]
    assert "acme-one" in found["acme-two"]["error"] and "acme-two" in found["acme-one"]["error"]
    code, found = listing(cli, TRYSQUARE_BLOCK_PLUGINS="acme-one")
    assert (
        "acme-one" not in found
        and found["acme"]["modes"] == ["spoofed"]
        and found["acme"]["error"] is None
    )
    code, found = listing(cli, TRYSQUARE_BLOCK_PLUGINS="acme-two")
    assert "acme-two" not in found and found["acme"]["error"] is None


NOISY = """
print("NOISE AT IMPORT")
from trysquare import hookimpl
from trysquare.modes import Outcome, Validation

class NoisyValidation(Validation):
    def evaluate(self, job):
        print("NOISE FROM A VALIDATION")  # in a worker thread, while others run
        return Outcome(metrics={"heard": True})

class NoisyMode:
    name = "noisy"
    def load(self, table, source):
        print("NOISE WHILE LOADING")
        return source.structure(table, NoisyValidation)

class NoisyFormat:
    name = "noisy"
    def render(self, source):
        print("NOISE WHILE RENDERING")
        return "the noisy report\\n"

@hookimpl
def trysquare_register_modes(register):
    print("NOISE IN A HOOK")
    register(NoisyMode())

@hookimpl
def trysquare_register_report_formats(register):
    register(NoisyFormat())

@hookimpl
def trysquare_metrics_collected(run, validation, outcome):
    print("NOISE FROM AN OBSERVER")
"""


def test_machine_readable_outputs_hold_the_document_only_whatever_a_plugin_prints(
    cli, site, make_run, tmp_path: Path
) -> None:
    site("trysquare-noisy", "trysquare_noisy", NOISY)
    scenario = scored_run(make_run, tmp_path)
    with scenario.open("a", encoding="utf-8") as handle:
        handle.write('\n[[validation]]\nname = "noise"\nmode = "noisy"\nmetrics = ["heard"]\n')
    validated = cli("validate", scenario, tmp_path / "exp", "--no-progress", "--format", "json")
    assert validated.returncode == 0, validated.stderr
    assert json.loads(validated.stdout)["schema_version"]
    for noise in ("AT IMPORT", "FROM AN OBSERVER", "FROM A VALIDATION", "WHILE LOADING"):
        assert f"NOISE {noise}" in validated.stderr, noise
    noisy = cli("report", scenario, tmp_path / "exp", "--format", "noisy")
    assert noisy.stdout == "the noisy report\n" and "NOISE WHILE RENDERING" in noisy.stderr
    checked = cli("check", scenario, "--format", "json")
    json.loads(checked.stdout)
    reported = cli("report", scenario, tmp_path / "exp", "--format", "json")
    json.loads(reported.stdout)
    as_csv = cli("report", scenario, tmp_path / "exp", "--format", "csv")
    assert "NOISE" not in as_csv.stdout
    rows = list(csv.reader(io.StringIO(as_csv.stdout)))
    assert rows and all(len(row) == len(rows[0]) for row in rows)
    listed = cli("plugins", "--json")
    json.loads(listed.stdout)


SLOW_IMPORT = "import time\ntime.sleep(60)\n"


def test_help_and_version_never_wait_on_a_slow_plugin(cli_process, site) -> None:
    site("trysquare-slow", "trysquare_slow", SLOW_IMPORT)
    started = time.monotonic()
    version = cli_process("--version", timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("trysquare ")
    for argv in (["--help"], ["validate", "--help"]):
        started = time.monotonic()
        shown = subprocess.run(
            [sys.executable, "-m", "trysquare", *argv],
            env=cli_process.env,
            capture_output=True,
            text=True,
            timeout=40,
            check=False,
        )
        took = time.monotonic() - started
        assert took < 20, f"{argv} took {took:.0f} s"
        assert shown.returncode == 0, shown.stderr
        assert "trysquare-slow" in shown.stderr, shown.stderr
        assert "usage:" in shown.stdout
    assert "validate" in shown.stdout
