"""``ivmstream bootstrap``: a service's state built from a snapshot with Spark, for ``run`` to resume from."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ivmstream.cli.common import (
    BOOTSTRAP_HELP,
    REDIS_HELP,
    CliError,
    add_config_argument,
    add_service_argument,
    check_broker,
    group_or_default,
    load,
    open_worker_store,
    rekey_group,
    services_epilog,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bootstrap",
        help="build a service's state from a snapshot with Spark",
        description="Compute with Spark the state the stream would have built from a snapshot, and write "
        "it with the input offsets it covers, so that `ivmstream run` resumes from there. Spark is "
        "stopped, its JVM included, when the command ends.",
        epilog_fn=services_epilog,
    )
    add_service_argument(p)
    add_config_argument(p)
    p.add_argument(
        "--snapshot",
        metavar="PATH",
        help="directory of per-relation tables (R.csv, R.debezium.jsonl, ...), or a .jsonl of events; "
        "a view over inputs may omit it and read its topics alone",
    )
    p.add_argument(
        "--bootstrap",
        metavar="ADDR",
        help=f"{BOOTSTRAP_HELP}; resolves the offsets to resume from (default: none, --partitions)",
    )
    p.add_argument(
        "--from-offsets",
        default="latest",
        metavar="WHERE",
        help="where the workers resume in the input topic: latest (default), earliest or P:O,P:O,... "
        "(partition:offset)",
    )
    p.add_argument(
        "--partitions",
        type=int,
        default=1,
        metavar="N",
        help="input partitions, when no --bootstrap is given (default 1)",
    )
    p.add_argument("--state-dir", help="directory of the RocksDB state (default ./state)")
    p.add_argument("--redis", metavar="URL", help=f"write Redis state instead of RocksDB: {REDIS_HELP}")
    p.add_argument("--group", help="consumer group the workers will use (default ivmstream.<service>)")
    p.add_argument(
        "--rekey-group",
        help="a re-keyed view's: the re-keying step's name in the state store, as `ivmstream rekey "
        "--group` (default ivmstream.<service>.rekey)",
    )
    p.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    p.set_defaults(func=cmd_bootstrap)


def cmd_bootstrap(args: argparse.Namespace) -> int:
    from ivmstream.spark.jobs import refuse_sharded
    from ivmstream.spark.runs import run_bootstrap
    from ivmstream.spark.session import command_session

    service, config = load(args.service, args.config)
    refuse_sharded(config)
    if args.snapshot is None and not config.inputs:
        raise CliError("--snapshot is required (a view over inputs alone may bootstrap from its topics)")
    if args.state_dir and args.redis:
        raise CliError("give either --state-dir (RocksDB) or --redis (Redis state), not both")
    if args.from_offsets != "latest" and not args.bootstrap:
        raise CliError("--from-offsets needs --bootstrap to resolve the topic's offsets")
    backend = "redis" if args.redis else "rocksdb"

    def store_of(group: str) -> Any:
        return open_worker_store(
            backend, service.name, group, state_dir=args.state_dir or "state", redis_url=args.redis
        )

    store = store_of(group_or_default(args.group, service.name))
    # a re-keyed view: the re-keying step's positions and images, beside the workers' state
    step_store = store_of(rekey_group(args.rekey_group, service.name)) if config.rekeyed else None
    if args.bootstrap:
        check_broker(args.bootstrap, config)
    source = args.snapshot or "its input topics"
    print(f"bootstrapping {service.name} from {source} with Spark ...", file=sys.stderr, flush=True)
    with command_session(args.master) as spark:
        report = run_bootstrap(
            spark,
            service,
            config,
            args.snapshot,
            store,
            bootstrap_servers=args.bootstrap,
            from_offsets=args.from_offsets,
            partitions=args.partitions,
            step_store=step_store,
        )
    where = ", ".join(f"{config.input_topic}:{p}@{o}" for p, o in sorted(report.partitions.items()))
    if config.inputs:  # one view over every input partition
        where = ", ".join(f"{tp}@{o}" for tp, o in report.inputs.items()) or "the inputs' beginnings"
    print(
        f"bootstrapped {report.keys} key(s) of {service.name} into {backend} state "
        f"({report.bytes_written} bytes); `ivmstream run` resumes at {where} ({report.seconds:.1f}s)"
    )
    return 0
