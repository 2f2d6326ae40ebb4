"""The ``ivmstream`` parser and entry point: each subcommand is a module of this package with
``register(subparsers)``. Errors a user can cause print one line and exit non-zero."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from ivmstream.cli import (
    bootstrap,
    broker,
    demo,
    dlq,
    produce,
    reconcile,
    rekey,
    replay,
    results,
    run,
    serve,
    sql,
)
from ivmstream.cli.common import EXIT_FAILURE, CliError, OneLineParser
from ivmstream.config import ConfigError
from ivmstream.events import SourceError
from ivmstream.secrets import install_log_redaction, redact

# In the order `ivmstream --help` lists them.
COMMANDS: tuple[ModuleType, ...] = (
    broker,
    produce,
    run,
    rekey,
    results,
    dlq,
    serve,
    replay,
    bootstrap,
    reconcile,
    demo,
    sql,
)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _known_errors() -> tuple[type[BaseException], ...]:
    from ivmstream.postgres_client import PostgresUnavailable
    from ivmstream.redis_client import RedisUnavailable
    from ivmstream.runtime.kafka import BrokerUnavailable
    from ivmstream.runtime.output import DeliveryFailed
    from ivmstream.runtime.rebalance import HistoryTruncated
    from ivmstream.secrets import SecretError
    from ivmstream.state import StateError

    known: tuple[type[BaseException], ...] = (
        CliError,
        ConfigError,
        SourceError,
        BrokerUnavailable,
        RedisUnavailable,
        PostgresUnavailable,
        StateError,
        DeliveryFailed,
        HistoryTruncated,
        SecretError,
        OSError,
    )
    if "ivmstream.spark.jobs" in sys.modules:  # Spark's errors only matter when its commands ran
        from ivmstream.spark.jobs import BatchError
        from ivmstream.spark.kafka_source import KafkaSourceError
        from ivmstream.spark.session import SparkUnavailable
        from ivmstream.spark.snapshot import SnapshotError

        known += (BatchError, KafkaSourceError, SparkUnavailable, SnapshotError)
    return known


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ivmstream",
        description="Incremental views over Kafka: run, feed and inspect ivmstream services.",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("IVMSTREAM_LOG_LEVEL", "INFO").upper(),
        type=str.upper,
        choices=LOG_LEVELS,
        help=f"{', '.join(LOG_LEVELS)} (default: $IVMSTREAM_LOG_LEVEL, else INFO)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)  # Spark's bridge chatters at INFO
    install_log_redaction()  # every line below is masked for secrets (shared/secrets.py)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except _known_errors() as exc:
        if os.environ.get("IVMSTREAM_DEBUG"):
            return _debug_traceback(exc)
        msg = (
            str(exc)
            if not isinstance(exc, OSError) or not exc.filename
            else f"{exc.filename}: {exc.strerror}"
        )
        print(f"ivmstream: error: {redact(msg)}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as exc:  # last line of defence: one line, not a traceback
        if os.environ.get("IVMSTREAM_DEBUG"):
            return _debug_traceback(exc)
        line = f"ivmstream: error: unexpected {type(exc).__name__}: {exc} (set IVMSTREAM_DEBUG=1 for details)"
        print(redact(line), file=sys.stderr)
        return EXIT_FAILURE


def _debug_traceback(exc: BaseException) -> int:
    """IVMSTREAM_DEBUG: the whole traceback (chained exceptions too), secrets masked."""
    print(redact("".join(traceback.format_exception(exc))), end="", file=sys.stderr)
    return EXIT_FAILURE
