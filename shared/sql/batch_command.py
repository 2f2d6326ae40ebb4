"""``ivmstream sql bootstrap`` and ``ivmstream sql reconcile`` (Spark), registered by ``sql``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def _units(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from ivmstream.sql.inputs import InputChoice, input_overrides
    from ivmstream.sql.load import load_script
    from ivmstream.sql.routing import plan_script
    from ivmstream.sql.streaming import stream_units

    script = load_script(args.file)
    units = stream_units(plan_script(script, args.view), None, script.tables)
    return script, units, InputChoice(input_overrides(args.input), args.dataset, Path.cwd())


def cmd_bootstrap(args: argparse.Namespace) -> int:
    from ivmstream.spark.session import command_session
    from ivmstream.sql.batch import bootstrap_views, report_line
    from ivmstream.sql.streaming import group_of
    from ivmstream.state import open_store

    script, units, choice = _units(args)

    def store(u: Any) -> Any:
        return open_store(args.state_backend, group_of(u), state_dir=args.state_dir, redis_url=args.redis)

    print("bootstrapping the views' units with Spark ...", file=sys.stderr, flush=True)
    with command_session(args.master) as spark:
        reports = bootstrap_views(
            spark,
            script,
            units,
            choice,
            store,
            bootstrap_servers=args.bootstrap,
            from_offsets=args.from_offsets,
        )
    for r in reports:
        print(report_line(r))
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from ivmstream.spark.session import command_session
    from ivmstream.sql.batch import reconcile_views, report_line

    script, units, choice = _units(args)
    print("reconciling the views with Spark SQL ...", file=sys.stderr, flush=True)
    with command_session(args.master) as spark:
        reports = reconcile_views(spark, script, units, choice, args.bootstrap)
    for r in reports:
        print(report_line(r))
    return 1 if any(r["verdict"] == "mismatch" for r in reports) else 0


def register_batch(verbs: Any) -> None:
    """``sql bootstrap`` and ``sql reconcile``."""
    b = verbs.add_parser(
        "bootstrap",
        help="build each unit's state with its service's Spark job from the tables' files",
        description="Each unit of each view (fed through <view>.updates) gets the state its service's "
        "Spark job builds from the tables' files through the view's intake, written for `sql run` "
        "(same --state-backend, --state-dir) to resume from.",
    )
    b.add_argument("file", help="the SQL file")
    b.add_argument("--view", help="only this view")
    b.add_argument(
        "--bootstrap", metavar="ADDR", help="Kafka bootstrap address (resolves the resume offsets)"
    )
    b.add_argument(
        "--from-offsets",
        default="latest",
        metavar="WHERE",
        help="where the workers resume in <view>.updates: latest (default), earliest or P:O,...",
    )
    b.add_argument("--input", action="append", metavar="TABLE=PATH", help="read TABLE from PATH (repeatable)")
    b.add_argument("--dataset", help="as for replay")
    b.add_argument("--state-backend", default="rocksdb", choices=("rocksdb", "redis"), help="default rocksdb")
    b.add_argument("--state-dir", default="state", help="RocksDB state directory (default ./state)")
    b.add_argument("--redis", metavar="URL", help="Redis URL for --state-backend redis")
    b.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    b.set_defaults(func=cmd_bootstrap)

    r = verbs.add_parser(
        "reconcile",
        help="the published rows against the view's SQL evaluated by Spark SQL; a mismatch exits 1",
        description="Per view: its published rows against its own SQL evaluated by Spark SQL over the base "
        "tables as far as the results reach (the tables' files through <view>.updates' offsets, or the "
        "tables' topics up to the offsets each result reflects); one JSON line per view.",
    )
    r.add_argument("file", help="the SQL file")
    r.add_argument("--bootstrap", required=True, metavar="ADDR", help="Kafka bootstrap address")
    r.add_argument("--view", help="only this view")
    r.add_argument("--input", action="append", metavar="TABLE=PATH", help="read TABLE from PATH (repeatable)")
    r.add_argument("--dataset", help="as for replay")
    r.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    r.set_defaults(func=cmd_reconcile)
