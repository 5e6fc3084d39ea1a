#!/usr/bin/env python3
"""The page's validator, as its prose describes it (docs: writing a validator).

Scores a run of the tiny counter task (tests/fixtures/tiny):

- ``delivered``: the agent changed something that is not a by-product;
- ``in_scope``: everything it changed is inside SCOPE (reason only on failure);
- ``tests``: the scenario's declared suite, run in a throwaway copy;
- ``touched``: every path the run changed, by-products included (recorded as is).

Both verdicts rest on ``work = run.touched - run.artefacts``: an agent that ran
the suite to check itself leaves ``__pycache__/*.pyc`` behind, and bytecode is
neither a delivery nor out of scope. ``touched`` itself is never reduced.

Run by hand: ``examples/validator.py path/to/validation/script/context.json``.
"""

from trysquare.assay import Assay, Metric, validator

SCOPE = frozenset({"counter.py"})


@validator
def evaluate(run: Assay) -> dict:
    work = run.touched - run.artefacts
    outside = work - SCOPE
    return {
        "delivered": bool(work),
        # The reason belongs to the failure: attached unconditionally it would read
        # "also touched " on every run that stayed in scope (an empty one is dropped).
        "in_scope": Metric(
            not outside,
            f"also touched {', '.join(sorted(outside))}" if outside else "",
        ),
        # A callable is evaluated on its own: should the suite be unjudgeable (a
        # failing prepare, a timeout), only this metric is unjudged.
        "tests": run.tests,
        "touched": run.touched,
    }


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
