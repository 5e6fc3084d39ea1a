"""What the judge refuses before anything is spent, and the blinding line of ``check``."""

from __future__ import annotations

import pytest

from tests.judge.conftest import CELL_A, CELL_B, KEY_ENV, JudgeLab


def refusal(lab: JudgeLab, *paths) -> str:
    done = lab.check(*paths)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr.strip()


def test_a_good_judge_table_loads(lab: JudgeLab) -> None:
    done = lab.check()
    assert done.returncode == 0, done.stderr
    assert "scenario.toml: loads (1 validator(s), 2 metric(s))" in done.stdout


def test_a_missing_rubric_is_refused(lab: JudgeLab) -> None:
    (lab.folder / "rubric.md").unlink()
    message = refusal(lab)
    assert "scenario.toml: [[validation]][1].rubric: 'rubric.md' does not exist" in message


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        ('["prompt", "transcript"]', "[[validation]][1].pieces: unknown piece 'transcript'"),
        ("[]", "[[validation]][1].pieces: names no piece"),
        ('"prompt"', "[[validation]][1].pieces: must be a list"),
    ],
)
def test_bad_pieces_are_refused(lab: JudgeLab, pieces: str, expected: str) -> None:
    lab.write_scenario(pieces=pieces)
    assert expected in refusal(lab)


def test_thinking_outside_its_four_words_is_refused(lab: JudgeLab) -> None:
    lab.write_scenario(thinking="max")
    assert (
        "[[validation]][1].thinking: must be one of off, low, medium, high, not 'max'"
        in refusal(lab)
    )


def test_an_unknown_key_is_refused_with_a_suggestion(lab: JudgeLab) -> None:
    text = lab.scenario.read_text().replace("rubric =", "rubrik =")
    lab.write_scenario(text=text)
    message = refusal(lab)
    assert "[[validation]][1].rubrik: unknown key (did you mean 'rubric'?)" in message


def test_a_provider_that_is_neither_a_section_nor_a_type_is_refused(lab: JudgeLab) -> None:
    lab.write_scenario(
        text=lab.scenario.read_text().replace('provider = "local"', 'provider = "ilaas"')
    )
    message = refusal(lab)
    assert "[[validation]][1].provider: 'ilaas' is neither a provider section" in message
    assert "trysquare.toml" in message and "installed: openai" in message


def test_a_registered_type_named_bare_loads_with_its_defaults(lab: JudgeLab) -> None:
    lab.write_scenario(
        text=lab.scenario.read_text().replace('provider = "local"', 'provider = "openai"')
    )
    assert lab.check().returncode == 0


def test_a_section_whose_type_no_plugin_provides_is_refused(lab: JudgeLab) -> None:
    lab.write_config(type="anthropic")
    message = refusal(lab)
    assert (
        "trysquare.toml: providers.local.type: no installed plugin provides provider type 'anthropic'"
        in message
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"max_concurency": 3},
            "trysquare.toml: providers.local.max_concurency: unknown key (did you mean 'max_concurrency'?)",
        ),
        (
            {"max_concurrency": 0},
            "trysquare.toml: providers.local.max_concurrency: must be at least 1",
        ),
        ({"timeout": "soon"}, "trysquare.toml: providers.local.timeout: must be a number"),
        (
            {"base_url": "127.0.0.1:8000"},
            "trysquare.toml: providers.local.base_url: '127.0.0.1:8000' is not an http",
        ),
        (
            {"tool_choice": "always"},
            "trysquare.toml: providers.local.tool_choice: must be one of named, required, auto",
        ),
    ],
)
def test_the_config_is_strict_and_names_file_and_key(
    lab: JudgeLab, overrides: dict, expected: str
) -> None:
    lab.write_config(**overrides)
    assert expected in refusal(lab)


def test_an_options_table_for_a_type_that_declares_none_is_refused(lab: JudgeLab) -> None:
    config = lab.root / "trysquare.toml"
    config.write_text(config.read_text() + '[providers.local.options]\nregion = "eu"\n')
    message = refusal(lab)
    expected = "trysquare.toml: providers.local.options: provider type 'openai' takes no options"
    assert expected in message


@pytest.mark.parametrize("model", ["local/judge-model-1", "judge-model-1"])
def test_a_judge_that_is_the_model_under_test_is_refused_once_runs_are_given(
    lab: JudgeLab, model: str
) -> None:
    lab.run("r1")
    lab.run("r2", repetition=2, model=model)
    assert lab.check().returncode == 0  # without runs there is nothing to compare
    message = refusal(lab, lab.exp)
    assert "the judge local/judge-model-1 is the model under test in run 'r2'" in message
    done = lab.validate()
    assert done.returncode == 2 and not lab.server.received


def test_a_key_variable_that_is_not_set_is_refused_before_anything_is_spent(lab: JudgeLab) -> None:
    lab.run()
    del lab.cli.env[KEY_ENV]
    message = refusal(lab, lab.exp)
    assert f"api_key_env: the variable {KEY_ENV} is not set" in message
    assert lab.validate().returncode == 2 and not lab.server.received


def test_check_says_the_judge_is_blind_when_no_piece_names_the_cell(lab: JudgeLab) -> None:
    lab.run("a1", cell=CELL_A)
    lab.run("a2", cell=CELL_A, repetition=2, change="count = 2\n")
    lab.run("b1", cell=CELL_B)
    done = lab.check(lab.exp)
    assert done.returncode == 0, done.stderr
    assert "judge: blind over 2 cells (pieces: prompt, response, diff)" in done.stdout
    assert "3 run(s) readable" in done.stdout


def test_check_says_when_the_prompt_names_the_treatment(lab: JudgeLab) -> None:
    lab.run("a1", cell=CELL_A, prompt="Fix it. Follow the rule.")
    lab.run(
        "a2", cell=CELL_A, repetition=2, prompt="Fix it. Follow the rule.", change="count = 2\n"
    )
    lab.run("b1", cell=CELL_B, prompt="Fix it.")
    lab.run("b2", cell=CELL_B, repetition=2, prompt="Fix it.", change="count = 3\n")
    done = lab.check(lab.exp)
    assert done.returncode == 0, done.stderr
    assert (
        "! judge is only partially blind: prompt varies between cells, so the judge can identify the treatment"
        in done.stdout
    )


def test_several_leaking_pieces_are_named_together(lab: JudgeLab) -> None:
    lab.run("a1", cell=CELL_A, prompt="Rule.", response="Done the rule way.")
    lab.run(
        "a2",
        cell=CELL_A,
        repetition=2,
        prompt="Rule.",
        response="Done the rule way.",
        change="count = 2\n",
    )
    lab.run("b1", cell=CELL_B, prompt="Ticket.", response="Done.")
    lab.run(
        "b2", cell=CELL_B, repetition=2, prompt="Ticket.", response="Done.", change="count = 3\n"
    )
    done = lab.check(lab.exp)
    assert "! judge is only partially blind: prompt, response vary between cells" in done.stdout


def test_validate_prints_the_blinding_line_too(lab: JudgeLab) -> None:
    from tests.judge.chatserver import verdict

    lab.run("a1", cell=CELL_A, prompt="Rule.")
    lab.run("b1", cell=CELL_B, prompt="Ticket.")
    lab.respond(lambda _: verdict({"note_usable": True, "cites_paths": True}))
    done = lab.validate()
    assert done.returncode == 0, done.stdout
    assert "! judge is only partially blind: prompt varies between cells" in done.stdout


def test_config_named_on_the_command_line_wins(lab: JudgeLab, tmp_path) -> None:
    # Move the config away from the scenario's ancestors: found only through --config.
    elsewhere = tmp_path / "configs" / "judges.toml"
    elsewhere.parent.mkdir()
    (lab.root / "trysquare.toml").rename(elsewhere)
    assert lab.check().returncode == 2
    done = lab.cli("check", lab.scenario, "--config", elsewhere)
    assert done.returncode == 0, done.stderr
    missing = lab.cli("check", lab.scenario, "--config", tmp_path / "nope.toml")
    assert (
        missing.returncode == 2
        and "--config" in missing.stderr
        and "no such file" in missing.stderr
    )


@pytest.mark.parametrize("piece", ["response.md", "prompt.txt"])
def test_check_never_waits_on_a_piece_that_is_a_fifo(tmp_path, cli_process, piece: str) -> None:
    # The blinding check reads every run's prompt and response: a FIFO there would hold
    # `check` (and the line `validate` prints) for ever. A real process: its timeout is
    # what fails this test if it waits.
    import os

    from tests.judge.chatserver import ChatServer, error

    with ChatServer(lambda _: error(599)) as server:
        lab = JudgeLab(tmp_path, server, cli_process)
        lab.run("a1", cell=CELL_A)
        hostile = lab.run("b1", cell=CELL_B)
        (hostile.path / piece).unlink()
        os.mkfifo(hostile.path / piece)
        done = cli_process("check", lab.scenario, lab.exp, timeout=60)
        assert done.returncode == 1, done.stdout + done.stderr
        said = "response 'response.md'" if piece == "response.md" else "prompt 'prompt.txt'"
        assert (
            f"{hostile.path / 'run.toml'}: {said} is a FIFO, not a file"
            in done.stdout + done.stderr
        )
        assert "1 run(s) readable" in done.stdout


def test_a_prompt_varying_within_a_cell_still_names_the_treatment(lab: JudgeLab) -> None:
    # Issue 30: one run's prompt changed; the two cells' prompts never coincide.
    lab.run("a1", cell=CELL_A, prompt="Fix it. Follow the rule.")
    lab.run(
        "a2", cell=CELL_A, repetition=2, prompt="Fix it. Follow the rule.", change="count = 2\n"
    )
    lab.run("b1", cell=CELL_B, prompt="Fix it.")
    lab.run("b2", cell=CELL_B, repetition=2, prompt="Fix it, please.", change="count = 3\n")
    done = lab.check(lab.exp)
    assert done.returncode == 0, done.stderr
    assert "judge: blind" not in done.stdout
    assert (
        "! judge is only partially blind: prompt varies between cells, so the judge can identify "
        f"the treatment (prompt tells apart cells '{CELL_B}', '{CELL_A}')"
    ) in done.stdout


def test_a_prompt_the_cells_share_leaves_the_judge_blind(lab: JudgeLab) -> None:
    for index, cell in enumerate((CELL_A, CELL_A, CELL_B, CELL_B)):
        prompt = "Fix it." if index % 2 else "Fix it, please."
        lab.run(
            f"r{index}", cell=cell, repetition=index, prompt=prompt, change=f"count = {index}\n"
        )
    assert "judge: blind over 2 cells" in lab.check(lab.exp).stdout
