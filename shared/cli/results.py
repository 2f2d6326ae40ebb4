"""``ivmstream results``: the latest published result of each key, read from Redis."""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from ivmstream.cli.common import CliError, load, print_json


def register(sub: Any) -> None:
    p = sub.add_parser("results", help="print the latest published result from Redis")
    p.add_argument("service")
    p.add_argument("--redis", required=True)
    p.add_argument("--key", help="partition key (default: every key)")
    p.add_argument("--config", help="service config, to find a non-default output topic")
    p.add_argument("--topic", help="output topic (default <service>.results)")
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
