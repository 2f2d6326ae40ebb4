"""``ivmstream reconcile``: published results recomputed with Spark and compared; a mismatch exits 1."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from ivmstream.cli.common import (
    BOOTSTRAP_HELP,
    EXIT_FAILURE,
    REDIS_HELP,
    add_config_argument,
    add_service_argument,
    check_broker,
    load,
    services_epilog,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "reconcile",
        help="recompute published results with Spark SQL and compare",
        description="Recompute the service's query with Spark, independently of its engine, at the input "
        "offsets the published results reflect, and compare: prints the verdict; a mismatch exits 1. "
        "Spark is stopped, its JVM included, when the command ends.",
        epilog_fn=services_epilog,
    )
    add_service_argument(p)
    add_config_argument(p)
    p.add_argument("--bootstrap", required=True, metavar="ADDR", help=BOOTSTRAP_HELP)
    p.add_argument(
        "--snapshot", metavar="PATH", help="the snapshot the service was bootstrapped from, if any"
    )
    p.add_argument(
        "--from-offsets",
        default="earliest",
        metavar="WHERE",
        help="where the input log starts after the snapshot: earliest (default), latest or P:O,P:O,...",
    )
    p.add_argument(
        "--redis",
        metavar="URL",
        help=f"read published results from Redis (default: from the results topic): {REDIS_HELP}",
    )
    p.add_argument("--report", metavar="FILE", help="write the JSON report here")
    p.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    p.set_defaults(func=cmd_reconcile)


def cmd_reconcile(args: argparse.Namespace) -> int:
    from ivmstream.redis_client import connect
    from ivmstream.spark.jobs import record_verdict, refuse_sharded
    from ivmstream.spark.runs import run_reconcile
    from ivmstream.spark.session import command_session

    service, config = load(args.service, args.config)
    refuse_sharded(config)
    client = connect(args.redis) if args.redis else None
    check_broker(args.bootstrap, config)
    print(f"reconciling {service.name} with Spark ...", file=sys.stderr, flush=True)
    with command_session(args.master) as spark:
        report = run_reconcile(
            spark,
            service,
            config,
            args.bootstrap,
            client,
            snapshot=args.snapshot,
            from_offsets=args.from_offsets,
        )
    if client is not None:
        record_verdict(client, report)
    if args.report:
        with open(args.report, "wb") as fh:
            fh.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2))
    print(report.summary())
    return 0 if report.verdict != "mismatch" else EXIT_FAILURE
