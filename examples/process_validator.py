#!/usr/bin/env python3
"""A validator of the agent's note and process: unknown inputs need no ``None`` check.

Scores a run of the tiny counter task (tests/fixtures/tiny):

- ``note_words``: how many words the agent's final note has. With no response
  recorded, ``run.response`` raises ``Unjudged("no response was recorded")``:
  inside the callable, only this metric is unjudged, with that reason.
- ``fixed_first``: whether the agent's first writing call was the one that wrote
  ``counter.py``. When no call wrote it, ``run.first_write`` raises
  ``Unjudged("no call wrote counter.py")``; with no session log, too.
- ``wrote_counter``: whether any call wrote ``counter.py``. Here "none did" is an
  answer, not an unknown, so the metric asks for it explicitly with
  ``default=None`` (and ``run.response_or(None)`` does the same for the note).

Run by hand: ``examples/process_validator.py path/to/validation/script/context.json``.
"""

from trysquare.assay import Assay, validator

FIXED = "counter.py"


@validator
def evaluate(run: Assay) -> dict:
    return {
        "note_words": lambda: len(run.response.split()),
        "fixed_first": lambda: run.first_write(FIXED) == 0,
        "wrote_counter": lambda: run.first_write(FIXED, default=None) is not None,
    }


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
