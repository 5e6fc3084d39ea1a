"""What the jail shows, read from the bubblewrap command trysquare builds (no jail started)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from trysquare import jail
from trysquare.errors import ScenarioError
from trysquare.scenario import load_scenario

pytestmark = [
    pytest.mark.fast,
    pytest.mark.skipif(not jail.availability().available, reason="no jail here"),
]


def _shown(command: list[str]) -> list[str]:
    """Every path the command binds into the jail (read-only or writable)."""
    shown = []
    for index, word in enumerate(command):
        if word in ("--ro-bind", "--bind"):
            shown.append(command[index + 2])
        if word == "--":
            break
    return shown


def test_a_folder_on_path_that_holds_a_run_is_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment = tmp_path / "exp"
    run = experiment / "runs" / "r1"
    (experiment / "bin").mkdir(parents=True)
    run.mkdir(parents=True)
    tools = tmp_path / "tools"
    tools.mkdir()
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path), str(tools), os.environ["PATH"]]))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    command = jail.jailed_command(
        ["true"],
        cwd=str(scratch),
        writable=[str(scratch)],
        policy=jail.JailPolicy(),
        guarded=[str(run)],
    )
    shown = _shown(command)
    assert str(tools) in shown  # a folder of tools on PATH is shown
    assert str(tmp_path) not in shown  # the folder holding the run is not
    assert str(scratch) in shown


def test_home_and_the_cache_are_never_shown_even_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    cache = tmp_path / "cache"
    (cache / "trysquare" / "bin").mkdir(parents=True)
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv(
        "PATH", os.pathsep.join([str(home), str(cache / "trysquare" / "bin"), os.environ["PATH"]])
    )
    command = jail.jailed_command(
        ["true"], cwd=str(tmp_path), writable=[str(tmp_path / "w")], policy=jail.JailPolicy()
    )
    shown = _shown(command)
    assert str(home) not in shown
    assert not [p for p in shown if p.startswith(str(cache))]


def test_network_and_limits_reach_the_command(tmp_path: Path) -> None:
    tools = tmp_path / "tools"  # tmp_path itself holds the test's cache: never shown
    tools.mkdir()
    policy = jail.JailPolicy(
        network=True, processes=7, memory_mib=100, file_size_mib=3, readable=(str(tools),)
    )
    command = jail.jailed_command(["true"], cwd="/", writable=[], policy=policy)
    joined = " ".join(command)
    assert "--unshare-net" not in command
    assert "--nproc=7" in joined and f"--data={100 << 20}" in joined
    assert f"--fsize={3 << 20}" in joined
    assert str(tools) in _shown(command)
    closed = jail.jailed_command(["true"], cwd="/", writable=[], policy=jail.JailPolicy())
    assert "--unshare-net" in closed or "--unshare-all" in closed
    assert "--share-net" not in closed


def test_the_scenario_refuses_bad_jail_keys(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.toml"
    script = tmp_path / "v.py"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    for task, said in (
        ('isolation = "strict"', "task.isolation is 'strict'"),
        ("limits = { processes = 0 }", "task.limits.processes is 0"),
        ('readable = ["relative/dir"]', "task.readable[1] is 'relative/dir'"),
        ("limits = { cores = 2 }", "cores"),
    ):
        scenario.write_text(
            f'[task]\ntest_command = "true"\n{task}\n\n[[validation]]\nmode = "script"\n'
            'command = "v.py"\nmetrics = ["ok"]\n'
        )
        with pytest.raises(ScenarioError) as refused:
            load_scenario(scenario)
        assert said in refused.value.message


def test_as_an_ordinary_user_the_agents_code_makes_no_user_namespace_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ordinary user's path (these machines run as root: read from the command; the
    non-root run itself was checked by hand with setpriv: `unshare -U` inside is refused)."""
    if not jail.availability().disable_userns:
        pytest.skip("this bubblewrap has no --disable-userns")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    command = jail.jailed_command(["true"], cwd="/", writable=[], policy=jail.JailPolicy())
    assert "--unshare-all" in command and "--disable-userns" in command
    assert "--cap-add" not in command


def test_a_version_managers_folder_is_shown_with_its_shims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = tmp_path / "manager"  # as ~/.pyenv: shims/ on PATH, versions/ beside them
    (manager / "shims").mkdir(parents=True)
    (manager / "versions").mkdir()
    other = tmp_path / "other"  # as ~/.rye: shims/ beside a file of credentials, no versions/
    (other / "shims").mkdir(parents=True)
    (other / "credentials").write_text("token = 'x'\n")
    home = tmp_path / "home"
    (home / "shims").mkdir(parents=True)  # pyenv's layout right in $HOME shows no $HOME
    (home / "versions").mkdir()
    monkeypatch.setenv("HOME", str(home))
    on_path = [manager / "shims", other / "shims", home / "shims"]
    monkeypatch.setenv("PATH", os.pathsep.join([*map(str, on_path), os.environ["PATH"]]))
    command = jail.jailed_command(
        ["true"], cwd=str(tmp_path), writable=[str(tmp_path / "w")], policy=jail.JailPolicy()
    )
    shown = _shown(command)
    assert str(manager) in shown
    assert str(other) not in shown and str(other / "shims") in shown
    assert str(home) not in shown
    assert str(home / "shims") in shown  # on PATH itself, as any folder of tools


def test_a_link_to_home_is_never_shown_by_any_of_its_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_home = tmp_path / "data" / "u"
    (real_home / "shims").mkdir(parents=True)
    (real_home / "versions").mkdir()  # its shims' folder is laid out as pyenv's
    (real_home / ".ssh").mkdir()
    (tmp_path / "home").mkdir()
    home = tmp_path / "home" / "u"
    home.symlink_to(real_home)  # /home -> /var/home, as on ostree systems
    elsewhere = tmp_path / "tools"
    elsewhere.symlink_to(real_home)  # a PATH folder that is $HOME under another name
    monkeypatch.setenv("HOME", str(home))
    on_path = [home / "shims", elsewhere]
    monkeypatch.setenv("PATH", os.pathsep.join([*map(str, on_path), os.environ["PATH"]]))
    command = jail.jailed_command(
        ["true"], cwd=str(tmp_path), writable=[str(tmp_path / "w")], policy=jail.JailPolicy()
    )
    shown = _shown(command)
    for name in (home, real_home, elsewhere):
        assert str(name) not in shown
    assert str(home / "shims") in shown or str(real_home / "shims") in shown


def test_a_file_the_command_names_through_a_link_into_a_run_is_not_shown(
    tmp_path: Path,
) -> None:
    run = tmp_path / "exp" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "notes.txt").write_text("the run's own records\n")
    link = tmp_path / "link"
    link.symlink_to(run)  # the scenario names tmp/link/notes.txt: it is the run's file
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    command = jail.jailed_command(
        ["cat", str(link / "notes.txt")],
        cwd=str(scratch),
        writable=[str(scratch)],
        policy=jail.JailPolicy(),
        guarded=[str(run)],
        programs=[str(link / "notes.txt")],
    )
    shown = _shown(command)
    assert str(link / "notes.txt") not in shown
    assert str(run / "notes.txt") not in shown


def test_a_readable_folder_named_through_a_link_and_dotdot_shows_no_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_home = tmp_path / "data" / "u"
    real_home.mkdir(parents=True)
    (real_home / "tools").symlink_to("/usr/bin")  # ~/tools/.. is /usr to the kernel
    home = tmp_path / "u"
    home.symlink_to(real_home)  # and $HOME to a name that drops "tools/.."
    monkeypatch.setenv("HOME", str(home))
    command = jail.jailed_command(
        ["true"],
        cwd=str(tmp_path),
        writable=[str(tmp_path / "w")],
        policy=jail.JailPolicy(readable=(str(home / "tools") + "/..",)),
    )
    shown = _shown(command)
    assert str(home) not in shown and str(real_home) not in shown


def test_a_folder_inside_the_run_is_never_shown_even_when_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "exp" / "runs" / "r1"
    (run / "validation").mkdir(parents=True)
    (run / "repo" / "bin").mkdir(parents=True)
    monkeypatch.setenv("PATH", os.pathsep.join([str(run / "repo" / "bin"), os.environ["PATH"]]))
    command = jail.jailed_command(
        ["true"],
        cwd=str(tmp_path),
        writable=[str(tmp_path / "w")],
        policy=jail.JailPolicy(readable=(str(run / "validation"),)),
        guarded=[str(run), str(run / "repo")],
    )
    shown = _shown(command)
    assert str(run / "validation") not in shown  # the run's records
    assert str(run / "repo" / "bin") not in shown  # the agent's clone, though on PATH


def test_a_link_in_the_agents_clone_or_copy_is_never_followed_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = tmp_path / "secrets"  # a folder of the machine: credentials
    secrets.mkdir()
    (secrets / "credentials").write_text("key\n")
    run = tmp_path / "exp" / "runs" / "r1"
    clone = run / "repo"
    clone.mkdir(parents=True)
    (clone / "data.txt").symlink_to(secrets / "credentials")  # committed by the agent
    (clone / "bin").symlink_to(secrets)
    scratch = tmp_path / "scratch"
    (scratch / "repo").mkdir(parents=True)
    (scratch / "repo" / "data.txt").symlink_to(secrets / "credentials")
    monkeypatch.setenv("PATH", os.pathsep.join([str(clone / "bin"), os.environ["PATH"]]))
    named = [str(clone / "data.txt"), "/" + str(scratch / "repo" / "data.txt")]  # "//tmp/..."
    command = jail.jailed_command(
        ["cat", *named],
        cwd=str(scratch / "repo"),
        writable=[str(scratch)],
        policy=jail.JailPolicy(),
        guarded=[str(run), str(clone)],
        programs=named,
    )
    shown = _shown(command)
    assert not [p for p in shown if p.startswith(str(secrets))], shown
    assert str(clone / "bin") not in shown
