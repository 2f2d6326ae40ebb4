"""``ivmstream replay``: a service's engine over a file, offline, without Kafka."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ivmstream.cli.common import CliError, formats_of, load, print_json, warn_silent
from ivmstream.cli.inputs import add_input_options, formats_epilog, open_inputs


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="run a service's engine offline over a file, without Kafka",
        epilog=formats_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("service")
    p.add_argument("--config", required=True)
    p.add_argument("--every", type=int, help="also print the state every N events")
    add_input_options(p)
    p.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from ivmstream.replay import Rejected, Replay

    service, config = load(args.service, args.config)
    run = Replay(service, config)
    schema = run.codec.schema
    records, label = open_inputs(args, config.key_field, schema, formats_of(service))
    every = args.every
    if every is not None and every <= 0:
        raise CliError("--every must be a positive number of events")
    next_print, printed = every or 0, -1
    for item in run.feed(records, chunk=min(every, 5000) if every else 5000):
        if isinstance(item, Rejected):
            print(f"{label}:{item.lineno}: rejected ({item.code}): {item.detail}", file=sys.stderr)
        elif every and item >= next_print:
            print_json({"events": run.applied, "rejected": run.rejected, "result": run.result()})
            printed = item
            while next_print <= item:
                next_print += every
    if printed != run.applied:
        print_json({"events": run.applied, "rejected": run.rejected, "result": run.result()})
    warn_silent(run.silent_relations(), list(schema.relations), service.name, label)
    return 0
