"""``ivmstream results``: the latest published result of each key, read from Redis."""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from ivmstream.cli.common import (
    REDIS_HELP,
    CliError,
    add_config_argument,
    add_service_argument,
    load,
    print_json,
    services_epilog,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "results",
        help="print the latest published result from Redis",
        description="Print as JSON the latest result `ivmstream run --redis URL` published for a key, or "
        "{key: result} of every key.",
        epilog_fn=services_epilog,
    )
    add_service_argument(p)
    p.add_argument("--redis", required=True, metavar="URL", help=f"where the worker published: {REDIS_HELP}")
    p.add_argument("--key", help="partition key (default: every key)")
    add_config_argument(p, "the service's defaults; it names a non-default output_topic")
    p.add_argument("--topic", help="output topic (default: the config's output_topic, <service>.results)")
    p.set_defaults(func=cmd_results)


def cmd_results(args: argparse.Namespace) -> int:
    from ivmstream.redis_client import connect
    from ivmstream.runtime.output import result_index, result_key
    from ivmstream.service import load_service

    topic = args.topic
    if topic is None:
        if args.config:
            topic = load(args.service, args.config)[1].output_topic
        else:
            topic = f"{load_service(args.service).name}.results"
    client = connect(args.redis)
    keys = (
        [args.key]
        if args.key is not None
        else sorted(k.decode() for k in client.smembers(result_index(topic)))
    )
    if not keys:
        raise CliError(f"no results published yet for {args.service} (topic {topic})")
    records = {}
    for key in keys:
        raw = client.get(result_key(topic, key))
        if raw is None:
            raise CliError(f"no result published for key {key!r} of {args.service}")
        records[key] = orjson.loads(raw)
    print_json(records[keys[0]] if len(keys) == 1 else records)
    return 0
