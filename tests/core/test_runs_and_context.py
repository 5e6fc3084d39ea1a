"""Runs (run.toml, discovery, record) and the context a validator is handed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers import write_scenario, write_script

SCORE = "import json; print(json.dumps({'metrics': {'ok': True, 'fine': True}}))\n"
PAGE_KEYS = {
    "repo",
    "etalon",
    "prompt",
    "session",
    "trace",
    "cell",
    "repetition",
    "prepare",
    "artefacts",
    "touched",
    "files",
    "given",
    "declared",
    "base",
    "response",
    "diff",
}


def scenario(folder: Path, task: str = "") -> Path:
    write_script(folder, "score.py", SCORE)
    return write_scenario(
        folder,
        f"""
        {task}
        [[validation]]
        mode = "script"
        command = "score.py"
        metrics = ["ok"]
        [[validation]]
        name = "other"
        mode = "script"
        command = "score.py"
        metrics = ["fine"]
    """,
    )


def finished_run(make_run, run_id: str = "r1", **kwargs) -> Path:
    run = make_run(run_id, **kwargs)
    run.base(
        {"src/a.py": "a = 1\n", "README.md": "x\n", ".gitignore": "*.log\n"},
        given={"tests/test_probe.py": "probe\n"},
    )
    run.repo.write("src/a.py", "a = 2\n")
    run.repo.write("src/new.py", "n = 1\n")
    run.repo.write("debug.log", "ignored at base\n")
    return run.finish(response="Done: changed src/a.py.\n")


def test_context_is_the_page_keys_with_absolute_paths(cli, make_run, tmp_path: Path) -> None:
    run_dir = finished_run(make_run, cell="rule / high", repetition=3)
    done = cli(
        "context", scenario(tmp_path / "s", '[task]\ntest_command = "python3 -m unittest"'), run_dir
    )
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)
    assert set(context) == PAGE_KEYS | {"test_command"}
    assert context["cell"] == "rule / high" and context["repetition"] == 3
    assert context["touched"] == ["src/a.py", "src/new.py"]
    assert "debug.log" not in context["files"] and "tests/test_probe.py" in context["files"]
    assert context["given"] == ["tests/test_probe.py"]
    assert context["declared"] == ["ok"]
    assert context["test_command"] == "python3 -m unittest"
    assert context["session"] is None and context["trace"] is None
    for key in ("repo", "prompt", "response", "diff"):
        assert Path(context[key]).is_absolute(), key
    assert Path(context["response"]).read_text() == "Done: changed src/a.py.\n"
    assert "src/new.py" in Path(context["diff"]).read_text()
    checkout = Path(context["etalon"]["checkout"])
    assert context["etalon"]["tag"] == "etalon-v1"
    assert (checkout / "src" / "a.py").read_text() == "a = 1\n"
    assert not (
        checkout / "tests" / "test_probe.py"
    ).exists()  # the etalon predates the given files
    # base is the commit the agent started from: a given file's original is there.
    shown = subprocess.run(
        ["git", "show", f"{context['base']}:tests/test_probe.py"],
        cwd=context["repo"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == "probe\n"


def test_context_without_suite_has_no_test_command_key(cli, make_run, tmp_path: Path) -> None:
    run_dir = finished_run(make_run)
    context = json.loads(
        cli("context", scenario(tmp_path / "s"), run_dir, "--validator", "other").stdout
    )
    assert "test_command" not in context
    assert context["declared"] == ["fine"]
    assert context["given"] == ["tests/test_probe.py"]


def test_unknown_validator_is_named(cli, make_run, tmp_path: Path) -> None:
    run_dir = finished_run(make_run)
    done = cli("context", scenario(tmp_path / "s"), run_dir, "--validator", "nope")
    assert done.returncode == 2
    assert "no validator named 'nope'" in done.stderr


def test_bad_runs_are_reported_by_path_and_skipped(cli, make_run, tmp_path: Path) -> None:
    finished_run(make_run, "good")
    experiment = tmp_path / "exp"
    not_git = experiment / "runs" / "not-git"
    (not_git / "repo").mkdir(parents=True)
    (not_git / "prompt.txt").write_text("p")
    (not_git / "run.toml").write_text('cell = "c"\nrepetition = 1\nprompt = "prompt.txt"\n')
    bad_base = finished_run(make_run, "bad-base")
    (bad_base / "run.toml").write_text(
        (bad_base / "run.toml").read_text().replace('base = "', 'base = "no-such-')
    )
    malformed = experiment / "runs" / "malformed"
    malformed.mkdir(parents=True)
    (malformed / "run.toml").write_text('cell = "c"\nrepetiton = 1\n')
    done = cli("validate", scenario(tmp_path / "s"), experiment, "--no-progress")
    assert done.returncode == 1
    assert f"{not_git / 'run.toml'}: repo 'repo' is not a git repository" in done.stderr
    assert str(bad_base / "run.toml") in done.stderr and "no-such-" in done.stderr
    assert (
        f"{malformed / 'run.toml'}: repetiton: unknown key (did you mean 'repetition'?)"
        in done.stderr
    )
    assert "Traceback" not in done.stderr
    # Each names its cell, so each counts there as invalid (issue 14.7), besides being reported.
    assert (
        "4 runs: 1 valid, 3 invalid (cells 'c', 'default' are not publishable); "
        "3 run folder(s) could not be read"
    ) in done.stdout
    assert (
        json.loads((experiment / "runs" / "good" / "validation" / "script.json").read_text())[
            "state"
        ]
        == "valid"
    )


def test_no_run_found_is_exit_2(cli, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    path = scenario(tmp_path / "s")
    done = cli("validate", path, tmp_path / "empty")
    assert done.returncode == 2
    assert "no run found under" in done.stderr
    context = cli("context", path, tmp_path / "empty")
    assert context.returncode == 2 and "no run.toml here" in context.stderr


def test_a_path_named_twice_or_inside_another_is_validated_once(
    cli, make_run, tmp_path: Path
) -> None:
    run_dir = finished_run(make_run)
    experiment = run_dir.parents[1]
    done = cli(
        "validate", scenario(tmp_path / "s"), experiment, experiment, run_dir, "--no-progress"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "1 run: 1 valid"
    history = run_dir / "validation" / "script.history.jsonl"
    assert not history.exists()  # validated once, not twice


def test_record_writes_a_loadable_run(cli, make_run, tmp_path: Path) -> None:
    run = make_run("rec")
    run.base({"a.py": "1\n"}, given={"b.py": "given\n"})
    (run.path / "prompt.txt").write_text("do it")
    done = cli(
        "record",
        run.path,
        "--cell",
        "rule",
        "--repetition",
        "2",
        "--prompt",
        "prompt.txt",
        "--model",
        "ilaas/gemma",
        "--given",
        "b.py",
        "--etalon-tag",
        "etalon-v1",
        cwd=run.path,
    )
    assert done.returncode == 0, done.stderr
    import tomllib

    written = tomllib.loads((run.path / "run.toml").read_text())
    assert written == {
        "cell": "rule",
        "repetition": 2,
        "repo": "repo",
        "base": run.repo.head(),
        "prompt": "prompt.txt",
        "model": "ilaas/gemma",
        "given": ["b.py"],
        "etalon": {"tag": "etalon-v1"},
    }  # HEAD is pinned to the commit it named
    again = cli(
        "record",
        run.path,
        "--cell",
        "x",
        "--repetition",
        "1",
        "--prompt",
        "prompt.txt",
        cwd=run.path,
    )
    assert again.returncode == 2 and "exists already" in again.stderr
    bad = cli(
        "record",
        run.path,
        "--cell",
        "x",
        "--repetition",
        "1",
        "--prompt",
        "missing.txt",
        "--force",
        "--base",
        "HEAD",
        cwd=run.path,
    )
    assert bad.returncode == 2 and "prompt 'missing.txt' does not exist" in bad.stderr
    assert tomllib.loads((run.path / "run.toml").read_text()) == written  # the old one is kept
    for flags, said in [
        (["--cell", " "], "cell is empty"),
        (["--cell", "x", "--repetition", "-4"], "repetition must be 0 or more"),
        (
            ["--cell", "x", "--session-format", "nope", "--session", "prompt.txt"],
            "unknown session format 'nope'",
        ),
        (["--cell", "x", "--etalon-tag", "nope"], "etalon tag 'nope' does not resolve"),
        (["--cell", "x", "--base", "nope"], "base 'nope' does not resolve"),
    ]:
        flags = flags if "--repetition" in flags else [*flags, "--repetition", "1"]
        flags = flags if "--base" in flags else [*flags, "--base", "HEAD"]
        refused = cli("record", run.path, *flags, "--prompt", "prompt.txt", "--force", cwd=run.path)
        assert refused.returncode == 2 and said in refused.stderr, (flags, refused.stderr)
        assert tomllib.loads((run.path / "run.toml").read_text()) == written
    fresh = tmp_path / "exp" / "runs" / "never"
    refused = cli(
        "record", fresh, "--cell", "x", "--repetition", "1", "--prompt", "p.txt", "--base", "HEAD"
    )
    assert refused.returncode == 2 and "is not a git repository" in refused.stderr
    assert not fresh.exists()  # nothing left behind


def test_record_refuses_to_guess_a_base_past_the_etalon(cli, make_run, tmp_path: Path) -> None:
    run = make_run("rec")
    run.base({"a.py": "1\n"})
    (run.path / "prompt.txt").write_text("do it")
    run.repo.write("a.py", "agent\n")
    run.repo.commit("agent work, committed")
    run.repo.write("b.py", "more\n")
    run.repo.commit("more agent work")
    flags = [
        "--cell",
        "x",
        "--repetition",
        "1",
        "--prompt",
        "prompt.txt",
        "--etalon-tag",
        "etalon-v1",
    ]
    refused = cli("record", run.path, *flags, cwd=run.path)
    assert refused.returncode == 2 and "2 commits past the etalon 'etalon-v1'" in refused.stderr
    assert "--base" in refused.stderr and not (run.path / "run.toml").exists()
    no_etalon = cli(
        "record",
        run.path,
        "--cell",
        "x",
        "--repetition",
        "1",
        "--prompt",
        "prompt.txt",
        cwd=run.path,
    )
    assert no_etalon.returncode == 2 and "--base is needed" in no_etalon.stderr
    done = cli("record", run.path, *flags, "--base", "etalon-v1", cwd=run.path)
    assert done.returncode == 0, done.stderr


def test_record_takes_the_commit_of_the_given_files(cli, make_run) -> None:
    run = make_run("rec")
    base = run.base({"a.py": "1\n"}, given={"tests/probe.py": "probe\n"})
    (run.path / "prompt.txt").write_text("do it")
    flags = [
        "--cell",
        "x",
        "--repetition",
        "1",
        "--prompt",
        "prompt.txt",
        "--etalon-tag",
        "etalon-v1",
    ]
    done = cli("record", run.path, *flags, "--given", "tests/probe.py", cwd=run.path)
    assert done.returncode == 0, done.stderr
    import tomllib

    assert tomllib.loads((run.path / "run.toml").read_text())["base"] == base
    missing = cli(
        "record", run.path, *flags, "--given", "nope.py", "--base", base, "--force", cwd=run.path
    )
    assert (
        missing.returncode == 2 and f"--given nope.py: not a file at base {base}" in missing.stderr
    )


def test_record_paths_are_relative_to_the_current_directory(cli, make_run, tmp_path: Path) -> None:
    run = make_run("rec")
    run.base({"a.py": "1\n"})
    prompts = tmp_path / "exp" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "p.txt").write_text("do it")
    (run.path / "session.jsonl").write_text("")
    here = run.path.parent  # typed from the runs folder
    done = cli(
        "record",
        "rec",
        "--cell",
        "x",
        "--repetition",
        "1",
        "--prompt",
        "rec/../../prompts/p.txt",
        "--repo",
        "rec/repo",
        "--base",
        "HEAD",
        "--exclude",
        "AGENTS.md",
        "--exclude",
        ".pi/",
        cwd=here,
    )
    # the prompt lies outside the run folder and its clone: refused for the run, named
    assert done.returncode == 2 and "prompt '../../prompts/p.txt' resolves outside" in done.stderr
    (run.path / "p.txt").write_text("do it")
    done = cli(
        "record",
        "rec",
        "--cell",
        "x",
        "--repetition",
        "1",
        "--prompt",
        "rec/p.txt",
        "--repo",
        "rec/repo",
        "--base",
        "HEAD",
        "--exclude",
        "AGENTS.md",
        "--exclude",
        ".pi/",
        cwd=here,
    )
    assert done.returncode == 0, done.stderr
    import tomllib

    written = tomllib.loads((run.path / "run.toml").read_text())
    assert written["prompt"] == "p.txt" and written["repo"] == "repo"
    assert written["excluded"] == ["AGENTS.md", ".pi/"]


def test_check_loads_and_reads_runs_spending_nothing(cli, make_run, tmp_path: Path) -> None:
    run_dir = finished_run(make_run)
    path = scenario(tmp_path / "s")
    alone = cli("check", path)
    assert alone.returncode == 0 and "loads (2 validator(s), 2 metric(s))" in alone.stdout
    with_runs = cli("check", path, run_dir.parents[1])
    assert with_runs.returncode == 0 and "1 run(s) readable" in with_runs.stdout
    assert not (run_dir / "validation").exists()


def test_record_help_says_where_paths_are_relative_to(cli) -> None:
    done = cli("record", "--help")
    text = " ".join(done.stdout.split())
    assert done.returncode == 0 and "relative to the current directory" in text
    assert "stored relative to the run folder" in text and "--exclude PATTERN" in text


def test_runs_are_found_in_the_order_of_their_folders_part_by_part(tmp_path: Path) -> None:
    from trysquare.runs import discover
    from trysquare.testing import RunBuilder

    # As text "a-b/" sorts before "a/b/"; as paths (part by part) a/b comes first.
    for folder in ("a-b", "a/b", "a.b"):
        run = RunBuilder(tmp_path / "exp" / folder)
        run.base({"x.py": "1\n"})
        run.finish()
    (experiment,) = discover([tmp_path / "exp"])
    found = [run.dir.relative_to(tmp_path / "exp").as_posix() for run in experiment.runs]
    assert found == ["a/b", "a-b", "a.b"]
    assert [run.dir for run in experiment.runs] == sorted(run.dir for run in experiment.runs)


def test_a_run_moved_elsewhere_keeps_its_clone_and_prompt_where_they_are(
    make_run, tmp_path: Path
) -> None:
    import attrs
    from trysquare.runs import load_run

    run_dir = finished_run(make_run)
    run = load_run(run_dir / "run.toml")
    assert run.repo == run_dir / "repo" and run.prompt.parent == run_dir
    moved = attrs.evolve(run, dir=tmp_path / "scratch")
    assert (moved.dir, moved.repo, moved.prompt) == (tmp_path / "scratch", run.repo, run.prompt)
    assert attrs.evolve(run, id=run.id) == run and hash(attrs.evolve(run, id=run.id)) == hash(run)
    shown = repr(run)
    assert f"repo={run.repo!r}" in shown and "_repo" not in shown
    elsewhere = attrs.evolve(run, repo=tmp_path / "other" / "clone")
    assert elsewhere.repo == tmp_path / "other" / "clone" and elsewhere != run


def test_record_says_what_is_missing_a_commit_or_the_etalon_tag(
    cli, make_run, tmp_path: Path
) -> None:
    import subprocess

    empty = tmp_path / "exp" / "runs" / "empty"
    (empty / "repo").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(empty / "repo")], check=True)
    (empty / "prompt.txt").write_text("do it")
    flags = [
        "--cell",
        "x",
        "--repetition",
        "1",
        "--prompt",
        "prompt.txt",
        "--etalon-tag",
        "etalon-v1",
    ]
    refused = cli("record", empty, *flags, cwd=empty)
    assert refused.returncode == 2
    assert "--repo repo: the clone has no commit: commit the base" in refused.stderr
    assert "does not resolve" not in refused.stderr

    run = make_run("untagged")
    run.base({"a.py": "1\n"})
    (run.path / "prompt.txt").write_text("do it")
    flags[-1] = "etalon-v9"
    refused = cli("record", run.path, *flags, cwd=run.path)
    assert refused.returncode == 2
    assert (
        "--etalon-tag etalon-v9: no tag 'etalon-v9' naming a commit in the clone repo"
        in refused.stderr
    )
    assert not (run.path / "run.toml").exists()
