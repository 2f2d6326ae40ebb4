"""``ivmstream broker``: the embedded Kafka-wire broker in the foreground."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("broker", help="run the embedded Kafka-wire broker (librdkafka mock cluster)")
    p.add_argument("--partitions", type=int, default=1, help="partitions of topics named without a count")
    p.add_argument(
        "--topic", action="append", metavar="NAME[:PARTITIONS]", help="topic to create (repeatable)"
    )
    p.set_defaults(func=cmd_broker)


def cmd_broker(args: argparse.Namespace) -> int:
    from ivmstream.dev import broker

    argv = ["--partitions", str(args.partitions)]
    for t in args.topic or []:
        argv += ["--topic", t]
    return broker.main(argv, prog="ivmstream broker")
