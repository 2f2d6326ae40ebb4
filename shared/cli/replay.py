"""``ivmstream replay``: a service's engine over files, offline, without Kafka."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ivmstream.cli.common import (
    CliError,
    add_config_argument,
    add_service_argument,
    formats_of,
    load,
    print_json,
    services_epilog,
    warn_silent,
)
from ivmstream.cli.inputs import add_input_options, formats_epilog, open_inputs


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="run a service's engine offline over files, without Kafka",
        description="Apply the input files' updates to the service's engine and print the result as JSON. "
        "Rejected lines are listed on stderr as FILE:LINE with their reason code; any makes the exit "
        "status 1 unless --allow-rejects.",
        epilog=formats_epilog(),
        epilog_fn=services_epilog,
    )
    add_service_argument(p)
    add_config_argument(p)
    p.add_argument(
        "--every",
        type=int,
        metavar="N",
        help="also print the result every N applied events (default: only at the end)",
    )
    add_input_options(p)
    p.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from ivmstream.replay import Rejected, Replay

    service, config = load(args.service, args.config)
    run = Replay(service, config)
    schema = run.codec.schema
    inputs = open_inputs(args, config.key_field, schema, formats_of(service), service.name)
    every = args.every
    if every is not None and every <= 0:
        raise CliError("--every must be a positive number of events")
    next_print, printed = every or 0, -1
    for opened in inputs:
        for item in run.feed(opened.records, chunk=min(every, 5000) if every else 5000):
            if isinstance(item, Rejected):
                where = opened.where(item.relation)
                print(f"{where}:{item.lineno}: rejected ({item.code}): {item.detail}", file=sys.stderr)
            elif every and item >= next_print:
                print_json({"events": run.applied, "rejected": run.rejected, "result": run.result()})
                printed = item
                while next_print <= item:
                    next_print += every
    if printed != run.applied:
        print_json({"events": run.applied, "rejected": run.rejected, "result": run.result()})
    label = "+".join(opened.label for opened in inputs)
    warn_silent(run.silent_relations(), list(schema.relations), service.name, label)
    if run.rejected and not args.allow_rejects:
        raise CliError(
            f"{run.rejected} of {run.applied + run.rejected} input events were rejected, listed above "
            "(--allow-rejects exits 0 anyway)"
        )
    return 0
