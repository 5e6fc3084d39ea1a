"""Blinding that holds: the form's order and ids come from a secret kept beside the key.

The old attack: the form printed its seed and its order was
``Random(seed).shuffle(sorted run ids)`` with ids drawn from the same RNG, so the
form plus the run folders' names gave back every table -> run pair.
"""

from __future__ import annotations

import io
import json
import random
import stat
import tomllib
from pathlib import Path

import pytest
from trysquare.runner import ValidateOptions, validate
from trysquare.runs import discover
from trysquare.scenario import load_scenario
from trysquare.testing import build_run

from tests.helpers import write_scenario

# The modules whose guarantee these attacks test (tests/security/test_exercises.py).
EXERCISES = ("trysquare_form.export", "trysquare_form.keyfile")


SEED = 7


@pytest.fixture
def world(tmp_path: Path):
    exp = tmp_path / "exp"
    # Ten runs: a secret-keyed shuffle lands on the attacker's order by chance once in 10!
    # (with six, once in 720: the order test failed by chance).
    for index in range(10):
        build_run(
            exp / "runs" / f"run{index}",
            base={"a.py": "a = 1\n"},
            changes={"a.py": f"a = {index}\n"},
            response=f"answer {index}\n",
            cell=f"cell{index % 2}",
            repetition=index,
        )
    scenario = write_scenario(
        tmp_path / "s",
        """
        [[validation]]
        name = "human"
        mode = "form"
        pieces = ["diff", "response"]
        metrics = ["clear"]
    """,
    )
    loaded = load_scenario(scenario)
    validate(loaded, discover([exp]), ValidateOptions(progress=False), out=io.StringIO())
    return exp, scenario


def export(cli, exp: Path, scenario: Path, form: Path, *extra: str):
    done = cli("form", "export", scenario, exp, "-o", form, "--seed", str(SEED), *extra)
    assert done.returncode == 0, done.stderr
    return done


def table_order(form: Path) -> list[str]:
    return list(tomllib.loads(form.read_text(encoding="utf-8"))["run"])


def secret_file(exp: Path) -> Path:
    return exp / ".trysquare" / "forms" / "secret"


def test_seeded_shuffle_of_sorted_run_ids_recovers_nothing(cli, world, tmp_path: Path) -> None:
    exp, scenario = world
    form = tmp_path / "FORM.toml"
    export(cli, exp, scenario, form)
    (key_file,) = (exp / ".trysquare" / "forms").glob("FORM-*.key.json")  # the export's own key
    key = json.loads(key_file.read_text(encoding="utf-8"))
    truth = {opaque: entry["id"] for opaque, entry in key["runs"].items()}
    # The attacker's replay, from the seed and the folder names alone.
    run_ids = sorted(p.name for p in (exp / "runs").iterdir())
    rng = random.Random(SEED)
    order = list(run_ids)
    rng.shuffle(order)
    guessed = {f"{rng.getrandbits(32):08x}": run for run in order}
    assert set(guessed).isdisjoint(truth), "the opaque ids were replayed from the seed"
    by_position = dict(zip(table_order(form), order))
    right = sum(1 for opaque, run in by_position.items() if truth[opaque] == run)
    assert right < len(truth), "the order was replayed from the seed"


def test_form_never_names_its_seed_or_secret(cli, world, tmp_path: Path) -> None:
    exp, scenario = world
    form = tmp_path / "FORM.toml"
    done = export(cli, exp, scenario, form)
    text = form.read_text(encoding="utf-8")
    secret = secret_file(exp).read_text(encoding="ascii").strip()
    assert f"seed = {SEED}" not in text and f"--seed {SEED}" not in text
    for shown in (text, done.stdout, done.stderr):
        assert secret not in shown
    for piece in (tmp_path / "FORM.d").rglob("*"):
        if piece.is_file():
            assert secret.encode() not in piece.read_bytes()
    assert stat.S_IMODE(secret_file(exp).stat().st_mode) == 0o600


def test_same_seed_same_secret_same_runs_same_form(cli, world, tmp_path: Path) -> None:
    exp, scenario = world
    first, again = tmp_path / "first.toml", tmp_path / "again.toml"
    export(cli, exp, scenario, first)
    secret = secret_file(exp).read_bytes()
    export(cli, exp, scenario, again)
    assert secret_file(exp).read_bytes() == secret  # made once, kept
    assert table_order(first) == table_order(again)


def test_a_new_secret_gives_another_form_for_the_same_seed(cli, world, tmp_path: Path) -> None:
    exp, scenario = world
    first, other = tmp_path / "first.toml", tmp_path / "other.toml"
    export(cli, exp, scenario, first)
    secret_file(exp).unlink()
    export(cli, exp, scenario, other)
    assert set(table_order(first)).isdisjoint(table_order(other))
