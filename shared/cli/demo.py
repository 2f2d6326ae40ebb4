"""``ivmstream demo``: the whole stack on the embedded broker with a sample workload."""

from __future__ import annotations

import argparse
from typing import Any

from ivmstream.cli.common import service_help, services_epilog


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="the whole stack on the embedded default, with a sample workload",
        epilog_fn=services_epilog,
    )
    p.add_argument("--follow", action="store_true", help="keep running after the workload is done")
    p.add_argument(
        "--service",
        action="append",
        metavar="SERVICE",
        help=f"only this service (repeatable): {service_help()}",
    )
    p.add_argument(
        "--sql",
        metavar="FILE",
        help="run the views of one SQL file instead (docs/examples/sql/demo.sql: the demo's workloads)",
    )
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from ivmstream.dev.demo import run_demo

    if args.sql:
        from ivmstream.sql.demo import run_sql_demo

        return run_sql_demo(args.sql)

    return run_demo(follow=args.follow, services=args.service or None)
