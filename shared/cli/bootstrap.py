"""``ivmstream bootstrap``: a service's state built from a snapshot with Spark, for ``run`` to resume from."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ivmstream.cli.common import CliError, load
from ivmstream.cli.spark import spark_session


def register(sub: Any) -> None:
    p = sub.add_parser("bootstrap", help="build a service's state from a snapshot with Spark")
    p.add_argument("service")
    p.add_argument("--config", required=True)
    p.add_argument(
        "--snapshot", required=True, help="directory of per-relation tables, or a .jsonl of events"
    )
    p.add_argument("--bootstrap", help="Kafka bootstrap servers, to resolve the offsets to resume from")
    p.add_argument("--from-offsets", default="latest", help="latest (default), earliest or P:O,P:O,...")
    p.add_argument("--partitions", type=int, default=1, help="input partitions, when no --bootstrap is given")
    p.add_argument("--state-dir", help="RocksDB state directory (default ./state)")
    p.add_argument("--redis", help="write Redis state instead of RocksDB")
    p.add_argument("--group", help="consumer group the workers will use (default ivmstream.<service>)")
    p.add_argument("--master", help="Spark master (default local[*])")
    p.set_defaults(func=cmd_bootstrap)


def cmd_bootstrap(args: argparse.Namespace) -> int:
    from ivmstream.spark.jobs import refuse_sharded, run_bootstrap
    from ivmstream.state import open_store

    service, config = load(args.service, args.config)
    refuse_sharded(config)
    if args.state_dir and args.redis:
        raise CliError("give either --state-dir (RocksDB) or --redis (Redis state), not both")
    if args.from_offsets != "latest" and not args.bootstrap:
        raise CliError("--from-offsets needs --bootstrap to resolve the topic's offsets")
    group = args.group or f"ivmstream.{service.name}"
    backend = "redis" if args.redis else "rocksdb"
    store = open_store(
        backend, f"{service.name}.{group}", state_dir=args.state_dir or "state", redis_url=args.redis
    )
    if args.bootstrap:
        from ivmstream.runtime.kafka import check_reachable

        check_reachable(args.bootstrap, overrides=config.kafka.get("consumer", {}))
    print(f"bootstrapping {service.name} from {args.snapshot} with Spark ...", file=sys.stderr, flush=True)
    report = run_bootstrap(
        spark_session(args.master),
        service,
        config,
        args.snapshot,
        store,
        bootstrap_servers=args.bootstrap,
        from_offsets=args.from_offsets,
        partitions=args.partitions,
    )
    where = ", ".join(f"{config.input_topic}:{p}@{o}" for p, o in sorted(report.partitions.items()))
    print(
        f"bootstrapped {report.keys} key(s) of {service.name} into {backend} state "
        f"({report.bytes_written} bytes); `ivmstream run` resumes at {where} ({report.seconds:.1f}s)"
    )
    return 0
