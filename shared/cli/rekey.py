"""``ivmstream rekey``: the re-keying step of a keyed view over change topics (``inputs`` with
``key_field``), in the foreground until a signal stops it (``ivmstream.runtime.rekey``)."""

from __future__ import annotations

import argparse
import logging
import signal
from typing import Any

from ivmstream.cli.common import (
    BOOTSTRAP_HELP,
    CliError,
    add_service_argument,
    check_broker,
    group_or_default,
    load,
    open_worker_store,
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
    p.add_argument("--bootstrap", required=True, metavar="ADDR", help=BOOTSTRAP_HELP)
    p.add_argument("--config", required=True, help="service config with inputs and key_field")
    p.add_argument("--state-dir", default="state", help="RocksDB state directory (default ./state)")
    p.add_argument("--state-backend", choices=("rocksdb", "redis", "memory"), help="default rocksdb")
    p.add_argument("--redis", help="Redis URL (with --state-backend redis)")
    p.add_argument("--group", help="its name in the state store (default ivmstream.<service>.rekey)")
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
    group = group_or_default(args.group, service.name, ".rekey")
    check_broker(args.bootstrap, config)
    store = open_worker_store(
        args.state_backend or "rocksdb", service.name, group, state_dir=args.state_dir, redis_url=args.redis
    )
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
