"""``ivmstream rekey``: the re-keying step of a keyed view over change topics (``inputs`` with
``key_field``), in the foreground until a signal stops it (``ivmstream.runtime.rekey``)."""

from __future__ import annotations

import argparse
import logging
import signal
from typing import Any

from ivmstream.cli.common import (
    CliError,
    add_bootstrap_argument,
    add_service_argument,
    add_state_arguments,
    check_broker,
    load,
    open_state,
    rekey_group,
    services_epilog,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "rekey",
        help="re-key a keyed view's input topics by its key_field (run beside its workers)",
        description="Read every partition of every input topic of a keyed view (config: inputs and "
        "key_field), decode each record by its topic's format and write its events, keyed by key_field "
        "and tagged with their origin, to the view's re-keyed topic (rekey_topic, default "
        "<service>.rekeyed), which the view's workers (`ivmstream run`) read; exactly once across a crash "
        "of either (docs/change-data.md). One step per view, in the foreground until a signal stops it.",
        epilog_fn=services_epilog,
    )
    add_service_argument(p)
    add_bootstrap_argument(p)
    p.add_argument("--config", required=True, help="service config with inputs and key_field")
    add_state_arguments(
        p,
        redis_help="Redis URL (with --state-backend redis)",
        group_help="its name in the state store (default ivmstream.<service>.rekey)",
    )
    p.set_defaults(func=cmd_rekey)


def cmd_rekey(args: argparse.Namespace) -> int:
    from ivmstream.runtime.clients import KafkaClients
    from ivmstream.runtime.rekey import RekeyStep

    service, config = load(args.service, args.config)
    if not config.rekeyed:
        raise CliError(
            f"{config.source}: rekey needs inputs and key_field, shard_by or emit: every-event (a keyless "
            "view publishing per batch reads its inputs itself)"
        )
    group = rekey_group(args.group, service.name)
    check_broker(args.bootstrap, config)
    store = open_state(args, service.name, group)
    step = RekeyStep(service, config, KafkaClients(args.bootstrap), store, group=group)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: step.stop())
    logging.getLogger("ivmstream").info(
        "re-keying %s: %s -> %s by %s",
        service.name,
        ", ".join(s.topic for s in config.inputs),
        config.input_topic,
        config.key_field,
    )
    step.run()
    return 0
