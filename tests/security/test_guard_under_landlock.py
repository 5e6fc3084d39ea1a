"""The clone's picture after validation is taken under Landlock too: what Landlock lets through.

Landlock handles writes to a file's content and to folders' entries; it does not handle a
file's metadata. A confined validator can still ``chmod`` a file of the clone (its executable
bit is part of the agent's work, as git sees it), set its times or its extended attributes.
And the archive folder a confined validator may write lies in the run folder, the agent's: a
hard link planted there, or a clone placed in the run's ``validation/`` folder, gives the
validator the clone to write. Only the stat picture after validation sees these, so it is never
skipped for a confined run (``clone_guard``'s docstring, docs/security.md). Each attack runs
with the sandbox on and off: the run ends invalid with the path named, or the write is refused
and the clone untouched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from trysquare import sandbox
from trysquare.clone_guard import stat_picture
from trysquare.testing import RunBuilder

from tests.security.guard_fixtures import attempts, build_run, result, run_validate, scenario

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare.clone_guard", "trysquare.sandbox")


@pytest.fixture(params=["landlock", "off"])
def confinement(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "landlock":
        if sandbox.landlock_abi() < 1:
            pytest.skip("this kernel offers no Landlock")
        monkeypatch.delenv("TRYSQUARE_SANDBOX", raising=False)
    else:
        monkeypatch.setenv("TRYSQUARE_SANDBOX", "off")
    monkeypatch.setenv("TRYSQUARE_JAIL", "off")
    return str(request.param)


def _invalid_naming(tmp_path: Path, body: str, *paths: str) -> dict[str, str]:
    return _invalid_naming_run(build_run(tmp_path), tmp_path, body, *paths)


def _invalid_naming_run(run: RunBuilder, tmp_path: Path, body: str, *paths: str) -> dict[str, str]:
    summary, out = run_validate(scenario(tmp_path / "s", body), run.path.parents[1])
    tried = attempts(run)
    recorded = result(run)
    assert recorded["state"] == "invalid", (tried, out)
    assert "changed during validation" in recorded["error"]
    for path in paths:
        assert path in recorded["error"] and path in out
    assert summary.exit_code == 1
    return tried


def test_landlock_lets_a_chmod_of_the_agents_file_through_and_the_picture_sees_it(
    tmp_path: Path, confinement: str
) -> None:
    # git would now say "old mode 100644, new mode 100755": the agent's work, changed.
    tried = _invalid_naming(
        tmp_path,
        'attempt("chmod", lambda: os.chmod(os.path.join(repo, "counter.py"), 0o755))\n',
        "changed counter.py",
    )
    assert tried == {"chmod": "wrote"}  # Landlock does not handle it: only the picture can tell


def test_landlock_lets_a_files_times_be_set_and_the_picture_sees_it(
    tmp_path: Path, confinement: str
) -> None:
    tried = _invalid_naming(
        tmp_path,
        'attempt("utime", lambda: os.utime(os.path.join(repo, "README.md"), (0, 0)))\n',
        "changed README.md",
    )
    assert tried == {"utime": "wrote"}


def test_link_or_rename_into_the_clone_is_refused_or_seen(tmp_path: Path, confinement: str) -> None:
    run = build_run(tmp_path)
    before = stat_picture(run.repo.path)
    body = (
        'open("made.txt", "w").write("x")\n'
        'attempt("link", lambda: os.link("made.txt", os.path.join(repo, "linked.txt")))\n'
        'open("moved.txt", "w").write("x")\n'
        'attempt("rename", lambda: os.rename("moved.txt", os.path.join(repo, "moved.txt")))\n'
        'attempt("truncate", lambda: os.truncate(os.path.join(repo, "counter.py"), 0))\n'
        'attempt("write", lambda: append(os.path.join(repo, "notes.txt")))\n'
    )
    summary, out = run_validate(scenario(tmp_path / "s", body), run.path.parents[1])
    tried = attempts(run)
    recorded = result(run)
    if confinement == "landlock":
        assert all(said.startswith("failed") for said in tried.values()), tried
        assert stat_picture(run.repo.path) == before
        assert recorded["state"] == "valid", out
    else:
        assert set(tried.values()) == {"wrote"}
        assert recorded["state"] == "invalid", out
        for name in ("linked.txt", "moved.txt", "counter.py", "notes.txt"):
            assert name in recorded["error"]
        assert summary.exit_code == 1


def test_a_hard_link_planted_in_the_archive_folder_never_writes_the_clone_unseen(
    tmp_path: Path, confinement: str
) -> None:
    # The archive folder is writable under Landlock: the agent leaves there, beforehand, a
    # second name of its own file, and the validator writes through it.
    run = build_run(tmp_path)
    archive = run.path / "validation" / "attack"
    archive.mkdir(parents=True)
    os.link(run.repo.path / "counter.py", archive / "evidence.txt")
    body = 'attempt("archive", lambda: append(os.path.join(os.path.dirname(sys.argv[1]), "evidence.txt")))\n'
    run_validate(scenario(tmp_path / "s", body), run.path.parents[1])
    recorded = result(run)
    if (run.repo.path / "counter.py").read_text() != "x = 2\n":
        # What happens now, with Landlock too: the link leads into the clone.
        assert recorded["state"] == "invalid" and "changed counter.py" in recorded["error"]
    else:
        assert recorded["state"] == "valid"


def test_a_clone_inside_its_runs_archive_folders_is_seen(tmp_path: Path, confinement: str) -> None:
    # run.toml's repo points into the run's own validation/ folder, where its validators'
    # archive folders lie: Landlock lets them write there, so the clone is theirs to write.
    run = build_run(tmp_path)
    target = run.path / "validation" / "attack" / "clone"
    target.parent.mkdir(parents=True)
    run.repo.path.rename(target)
    toml = run.path / "run.toml"
    toml.write_text(toml.read_text().replace('repo = "repo"', f"repo = {json.dumps(str(target))}"))
    body = 'attempt("archive", lambda: append(os.path.join(os.path.dirname(sys.argv[1]), "clone", "counter.py")))\n'
    tried = _invalid_naming_run(run, tmp_path, body, "changed counter.py")
    assert tried == {"archive": "wrote"}
