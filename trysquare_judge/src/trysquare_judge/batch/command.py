"""``trysquare batches SCENARIO PATH [--cancel]``: the batches a batch judge has in flight."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from trysquare.api import shown

if TYPE_CHECKING:
    from trysquare.api import Commands

__all__ = ["register"]


def register(cli: Commands) -> None:
    """Add ``batches`` to the ``trysquare`` parser."""
    parser = cli.add_parser(
        "batches",
        help="list (or cancel) a batch judge's batches",
        description="List every batch the scenario's batch judges (batch = true) sent for the runs "
        "under PATH, with what the provider says of those in flight; --cancel asks the provider to "
        "cancel those in flight (their runs are then invalid until validate --rejudge). Paths are "
        "relative to the current directory.",
        epilog="example:\n  trysquare batches scenario.toml runs/\n"
        "  trysquare batches scenario.toml runs/ --cancel",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=_batches)
    parser.add_argument(
        "scenario", type=Path, help="the scenario file (relative to the current directory)"
    )
    parser.add_argument(
        "path", type=Path, help="the experiment folder (relative to the current directory)"
    )
    parser.add_argument(
        "--config", type=Path, metavar="FILE",
        help="trysquare.toml, relative to the current directory (default: the nearest above the scenario)",
    )  # fmt: skip
    parser.add_argument("--cancel", action="store_true", help="cancel every batch still in flight")


def _batches(args: argparse.Namespace) -> int:
    from trysquare.api import experiment_lock, load_experiments, load_scenario

    from trysquare_judge.batch import batch_client_for
    from trysquare_judge.batch.store import Store, StoreError, exists
    from trysquare_judge.mode import JudgeValidation
    from trysquare_judge.providers import ProviderError

    scenario = load_scenario(args.scenario, config=args.config)
    (experiment,) = load_experiments([args.path])
    root = experiment.root.resolve()
    judges = [v for v in scenario.validations if isinstance(v, JudgeValidation) and v.batch]
    if not judges:
        print(shown(f"{args.scenario.name} has no batch judge (batch = true)"))
        return 0
    if not exists(root):
        print(shown(f"no batch was ever sent for {root}"))
        return 0
    failed = False
    with experiment_lock(root, experiment.runs, command="batches"):
        try:
            store = Store(root)
        except StoreError as error:
            print(shown(f"trysquare: {error}"), file=sys.stderr)
            return 1
        try:
            shown_any = False
            for judge in judges:
                assert judge.endpoint is not None
                client = batch_client_for(judge.endpoint)
                for batch in store.batches(judge.name):
                    shown_any = True
                    remote = batch["remote_id"] or f"(not created: {batch['batch_key'][:12]})"
                    age = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(batch["created_at"]))
                    line = f"{remote}  judge '{judge.name}'  {batch['state']}  {batch['requests']} request(s)  sent {age}"
                    if batch["state"] in ("in_flight", "cancelling") and client is not None:
                        try:
                            status = client.status(batch["remote_id"])
                            line += f"  ({status.state}: {status.done} done, {status.failed} failed, {status.pending} pending)"
                            if args.cancel and not status.ended:
                                client.cancel(batch["remote_id"])
                                with store.transaction() as db:
                                    db.execute(
                                        "UPDATE batches SET state = 'cancelling' WHERE batch_key = ?",
                                        (batch["batch_key"],),
                                    )
                                line += "  cancel asked"
                        except ProviderError as error:
                            failed = True
                            line += f"  (the provider could not be asked: {error.message})"
                    print(shown(line))
            if not shown_any:
                print(shown(f"no batch was ever sent for {root}"))
        finally:
            store.close()
    return 1 if failed else 0
