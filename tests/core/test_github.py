"""``validate --format github``: annotations GitHub reads, escaped so the agent's text cannot
end one early or issue a command; and a command's own usage for an unknown option."""

from __future__ import annotations

import re

from trysquare.ci import ResultRecord
from trysquare.github import annotation, annotation_lines, escape_data, escape_property

from tests.core.test_ci_outputs import HOSTILE_ID, build


def test_messages_escape_percent_cr_and_lf() -> None:
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_data("a%0Ab") == "a%250Ab"  # an escape written by the agent stays text


def test_properties_also_escape_colon_and_comma() -> None:
    assert escape_property("a:b,c%d\ne") == "a%3Ab%2Cc%25d%0Ae"


def test_other_control_characters_are_shown_not_sent() -> None:
    assert escape_data("\x1b[2J\x07") == "\\x1b[2J\\x07"


def test_an_annotation_line_has_escaped_properties_and_message() -> None:
    line = annotation("error", "bad\n::set-env name=X::1", title="run: a,b")
    assert line == "::error title=run%3A a%2Cb::bad%0A::set-env name=X::1"
    assert "\n" not in line


def record(status: str, **values: object) -> ResultRecord:
    common: dict[str, object] = {"run": "r1", "cell": "alpha", "repetition": 1, "validator": "v"}
    return ResultRecord(**{**common, "status": status, **values})  # type: ignore[arg-type]


def test_a_pass_says_nothing_and_each_shortfall_has_its_kind() -> None:
    found = list(
        annotation_lines(
            [
                record("passed"),
                record("failed", error="exited with code 3", stderr_tail=("boom",)),
                record("unjudged", unjudged=("ok",), reasons={"ok": "could not tell"}),
                record("pending", pending=("usable",), error="not validated yet"),
            ]
        )
    )
    assert [line.split(" ", 1)[0] for line in found] == ["::error", "::warning", "::notice"]
    expected = "::alpha / r1 / v: invalid: exited with code 3%0Astderr (last lines):%0Aboom"
    assert found[0].endswith(expected)
    assert "title=trysquare v%3A failed (r1)" in found[0]
    assert found[1].endswith("::alpha / r1 / v: unjudged: ok (could not tell)")
    assert found[2].endswith("::alpha / r1 / v: pending: usable (not validated yet)")


def test_validate_format_github_annotates_invalid_and_unjudged_results(
    cli, make_run, tmp_path
) -> None:
    scenario, experiment = build(make_run, tmp_path)
    done = cli(
        "validate", scenario, experiment, "--format", "github", "--jobs", "2", "--no-progress"
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    # The per-task lines come first, with GitHub's commands paused over them.
    pause = re.fullmatch(r"::stop-commands::([0-9a-f]{32})", lines[0])
    assert pause, lines[0]
    resume = lines.index(f"::{pause.group(1)}::")
    commands = [line for line in lines[resume + 1 :] if line.startswith("::")]
    assert [line.split(" ", 1)[0] for line in commands] == ["::error", "::warning"]
    error, warning = commands
    assert "alpha / r1 / script: invalid: " in error and "exited with code 3" in error
    assert "trace line 14" in error and "\x1b" not in done.stdout
    # The hostile run id is one property value: its ',' and ':' cannot start another key.
    assert "unjudged: ok (could not tell ]]> </testcase>)" in warning
    assert HOSTILE_ID.replace(",", "%2C") in warning
    assert lines[-1].startswith("4 task") or "invalid" in lines[-1]  # the closing line stays last
    assert not any(line.startswith("::") for line in lines[1:resume])


def test_an_unknown_option_prints_the_commands_usage(cli, tmp_path) -> None:
    done = cli("validate", tmp_path / "scenario.toml", tmp_path, "--bogus")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: trysquare validate ")
    assert "trysquare validate: unrecognized arguments: --bogus" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_option_of_a_nested_command_names_that_command(cli, tmp_path) -> None:
    done = cli("plugins", "--jsn")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: trysquare plugins ")
    assert "trysquare plugins: unrecognized arguments: --jsn" in done.stderr


def test_an_unknown_option_of_a_plugins_subcommand_names_that_subcommand(cli, tmp_path) -> None:
    form = tmp_path / "f.toml"
    done = cli("form", "export", tmp_path / "scenario.toml", tmp_path, "-o", form, "--bgus")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: trysquare form export ")
    assert "trysquare form export: unrecognized arguments: --bgus" in done.stderr
