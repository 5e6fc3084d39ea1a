"""A hostile experiment for the HTML report and ``trysquare view``, built at test time.

Two cells × several runs with real git clones, each result file written the way
the runner writes it, covering every mark (true, false, unjudged, pending,
invalid) and every kind of agent text the page shows: a file name, a reason, an
error, a response and a cell name holding markup, a judge transcript, a stderr
tail, a result history, and a response that is a symlink to a secret (in the
clone's .git: a link leaving the run folder refuses the run at load).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from trysquare import _atomic
from trysquare.git.patch import diff_patch
from trysquare.testing import RunBuilder, write_result

from tests.helpers import write_scenario, write_script

XSS = "<script>document.title='pwned'</script>"
EVIL_FILE = "<img src=x onerror=alert(1)>.py"
SECRET = "SECRET-ssh-key-material-0xC0FFEE"
EVIL_CELL = 'rule"><script>alert(1)</script>'
BIG_FILE = "big.txt"

SCENARIO = """
[scenario]
name = "view-lab"

[[validation]]
name = "check"
mode = "script"
command = "check.py"
metrics = ["passes", "style"]

[[validation]]
name = "judge"
mode = "script"
command = "check.py"
metrics = ["clear"]

[verdict]
reference = "base"
criteria = ["passes"]
"""


@attrs.frozen
class Lab:
    """The experiment's scenario file, its folder, and a few of its facts."""

    scenario: Path
    root: Path
    secret: Path
    run_ids: tuple[str, ...]
    invalid: tuple[str, ...]


def _result(
    metrics: Mapping[str, Any],
    reasons: Mapping[str, str] | None = None,
    *,
    state: str = "valid",
    error: str | None = None,
    name: str = "check",
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    document = {
        "metrics": dict(metrics),
        "reasons": dict(reasons or {}),
        "state": state,
        "error": error,
        "validator": {"name": name, "mode": "script", "digest": "sha256:old"},
        "context_digest": None,
        "duration": 0.25,
    }
    if usage is not None:
        document["usage"] = dict(usage)
    return document


def _usage(
    requests: int,
    tokens: tuple[int | None, int | None, int | None],
    price: tuple[float | None, float | None] = (None, None),
) -> dict[str, Any]:
    """A judge's usage record as the judge mode writes it."""
    return {
        "requests": requests,
        "input_tokens": tokens[0],
        "output_tokens": tokens[1],
        "cached_tokens": tokens[2],
        "provider": "local",
        "model": "judge-1",
        "price_input": price[0],
        "price_output": price[1],
    }


# What the page must show for the judge's spending (base: priced; the evil cell: not).
BASE_USAGE = {"requests": 3, "input_tokens": 2400, "output_tokens": 160, "cost": "$0.00152"}


def _signed(run_dir: Path, name: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` signed as trysquare signs a result of ``run_dir`` (a history line)."""
    from trysquare import results
    from trysquare.runs import load_run

    return results.sign_result(load_run(run_dir / "run.toml", replay=True), name, document)


def _record(
    run_dir: Path, name: str, document: Mapping[str, Any], *, stderr: str | None = None
) -> None:
    write_result(run_dir, name, document)  # as trysquare records it: signed
    if stderr is not None:
        _atomic.write_text(run_dir / "validation" / f"{name}.stderr", stderr)


def _run(
    root: Path,
    run_id: str,
    cell: str,
    repetition: int,
    changes: Mapping[str, str],
    response: str | None,
) -> Path:
    builder = RunBuilder(root / "runs" / run_id, cell=cell, repetition=repetition)
    builder.base({"counter.py": "def count(text):\n    return len(text.split(' '))\n"})
    builder.repo.write_files(changes)
    folder = builder.finish(response=response)
    assert builder.base_commit is not None
    _atomic.write_text(folder / "diff.patch", diff_patch(builder.repo.path, builder.base_commit))
    return folder


def build_lab(tmp_path: Path) -> Lab:
    """The experiment under ``tmp_path/exp`` with its scenario beside it."""
    scenario = write_scenario(tmp_path / "scenario", SCENARIO)
    write_script(tmp_path / "scenario", "check.py", "raise SystemExit(0)\n")
    root = tmp_path / "exp"
    secret = tmp_path / "outside" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_text(SECRET, encoding="utf-8")

    fixed = {"counter.py": "def count(text):\n    return len(text.split())\n"}
    base1 = _run(root, "base-1", "base", 1, fixed, "Fixed the split.")
    _record(base1, "check", _result({"passes": True, "style": True}), stderr="ran 3 tests\nOK\n")
    _record(
        base1,
        "judge",
        _result(
            {"clear": True},
            {"clear": "reads well"},
            name="judge",
            usage=_usage(1, (1200, 80, 0), (0.5, 2.0)),
        ),
    )

    base2 = _run(root, "base-2", "base", 2, {}, "Nothing to do.")
    _record(
        base2,
        "check",
        _result(
            {"passes": False, "style": None},
            {"passes": f"suite failed: {XSS}", "style": f"linter crashed {XSS}"},
        ),
    )
    _record(
        base2,
        "judge",
        _result(
            {"clear": False},
            {"clear": "no change"},
            name="judge",
            usage=_usage(2, (1200, 80, 300), (0.5, 2.0)),
        ),
    )
    (base2 / "validation" / "judge").mkdir()
    _atomic.write_json(
        base2 / "validation" / "judge" / "transcript.json",
        {
            "exchanges": [
                {
                    "attempt": 1,
                    "request": {"body": {"pieces": "Nothing to do."}},
                    "error": "HTTP 429",
                    "response": {"status": 429, "body": {"error": "slow down"}},
                },
                {
                    "attempt": 2,
                    "request": {"body": {"pieces": {"diff": "", "response": "Nothing to do."}}},
                    "response": {
                        "status": 200,
                        "body": {
                            "verdict": {"clear": False},
                            "text": XSS,
                            "usage": {
                                "prompt_tokens": 1200,
                                "completion_tokens": 80,
                                "prompt_tokens_details": {"cached_tokens": 300},
                            },
                        },
                    },
                },
            ],
            "outcome": {"state": "valid", "error": None},
        },
    )
    _atomic.append_line(
        base2 / "validation" / "check.history.jsonl",
        _signed(base2, "check", _result({"passes": True, "style": True})),
    )

    evil1 = _run(
        root,
        "evil-1",
        EVIL_CELL,
        1,
        {**fixed, EVIL_FILE: f"print('{XSS}')\n", BIG_FILE: "x" * 60_000 + "\n"},
        XSS,
    )
    _record(
        evil1,
        "check",
        _result({"passes": True, "style": True}, {"passes": XSS}),
        stderr="noise\n" * 2000 + f"last line {XSS}\n",
    )
    _record(
        evil1, "judge", _result({"clear": True}, name="judge", usage=_usage(1, (None, None, None)))
    )

    evil2 = _run(root, "evil-2", EVIL_CELL, 2, fixed, None)
    # A link that leaves the run folder refuses the whole run at load; one into the
    # clone's own .git passes the load, so the page itself must refuse to follow it.
    inside = evil2 / "repo" / ".git" / "id_rsa"
    inside.write_text(SECRET, encoding="utf-8")
    (evil2 / "response.md").symlink_to(inside)
    _record(evil2, "check", _result({}, state="invalid", error=f"the clone changed: {XSS}"))
    # A planted usage record: nothing in it may reach the page as markup or as a number.
    _record(
        evil2,
        "judge",
        _result(
            {"clear": True},
            name="judge",
            usage={
                "requests": XSS,
                "input_tokens": -5,
                "output_tokens": 1e9,
                "provider": XSS,
                "price_input": "free",
            },
        ),
    )

    evil3 = _run(root, "evil-3", EVIL_CELL, 3, fixed, "Done.")
    _record(evil3, "check", _result({"passes": True, "style": False}, {"style": "long lines"}))
    # no judge result: `clear` is pending

    return Lab(
        scenario=scenario,
        root=root,
        secret=secret,
        run_ids=("base-1", "base-2", "evil-1", "evil-2", "evil-3"),
        invalid=("evil-2",),
    )


def source_of(lab: Lab) -> Any:
    """The lab's report source, read as ``view`` reads it (nothing written)."""
    from trysquare.scenario import load_scenario
    from trysquare_view.page import read_experiment

    return read_experiment(load_scenario(lab.scenario), lab.root)


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path below ``root`` with its size and mtime: a write shows as a difference."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        found[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns)
    return found


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
