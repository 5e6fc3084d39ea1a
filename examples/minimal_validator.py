#!/usr/bin/env python3
from trysquare.assay import Assay, Metric, validator

SCOPE = frozenset({"counter.py"})


@validator
def evaluate(run: Assay) -> dict:
    outside = run.touched - SCOPE
    return {
        "delivered": bool(run.touched),
        # The reason belongs to the failure. Attached unconditionally it reads
        # `also touched ` on every run that stayed in scope; an empty reason is dropped.
        "in_scope": Metric(
            not outside,
            f"also touched {', '.join(sorted(outside))}" if outside else "",
        ),
        "tests": run.tests(),
        "touched": run.touched,
    }


if __name__ == "__main__":
    raise SystemExit(evaluate.cli())
