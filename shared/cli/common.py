"""What every subcommand shares: the one-line error, loading a service and its config, JSON output and
the progress line."""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import orjson

from ivmstream.config import ConfigError, build_config, load_config
from ivmstream.events import FORMATS, FormatRegistry

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CliError(RuntimeError):
    """A user-facing failure; its message is the whole output."""


class OneLineParser(argparse.ArgumentParser):
    """Usage mistakes end in one line and exit 2, like every other error of the command. ``epilog_fn``
    writes the epilog when help is shown (listing the services imports them; a command should not)."""

    def __init__(self, *args: Any, epilog_fn: Callable[[], str] | None = None, **kwargs: Any) -> None:
        # Epilogs are laid out by hand (lists); descriptions are paragraphs, filled here.
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        if kwargs.get("description"):
            paragraphs = kwargs["description"].split("\n\n")
            kwargs["description"] = "\n\n".join(textwrap.fill(p, 100) for p in paragraphs)
        super().__init__(*args, **kwargs)
        self.epilog_fn = epilog_fn

    def format_help(self) -> str:
        if self.epilog_fn is not None:
            parts = [self.epilog or "", self.epilog_fn()]
            self.epilog, self.epilog_fn = "\n\n".join(p for p in parts if p), None
        return super().format_help()

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ivmstream: error: {message} (see: {self.prog} --help)\n")


BOOTSTRAP_HELP = (
    "Kafka bootstrap servers, HOST:PORT[,HOST:PORT...] (`ivmstream broker` prints its address as its first "
    "line)"
)


REDIS_HELP = (
    "a Redis URL: redis://[USER:PASSWORD@]HOST:PORT[/DB], rediss://... (TLS; certificates as the query "
    "parameters ssl_ca_certs, ssl_certfile, ssl_keyfile, ssl_cert_reqs) or unix:///PATH.sock[?db=N]; a URL "
    "without a password takes IVMSTREAM_REDIS_PASSWORD or IVMSTREAM_REDIS_PASSWORD_FILE"
)


def service_names() -> list[str]:
    """Every installed service's name (none is imported)."""
    from ivmstream.service import available_services

    return sorted(available_services())


def service_help() -> str:
    return (
        f"the service: {', '.join(service_names())} (described below), or module:attribute of a "
        "ServiceDefinition"
    )


def add_service_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("service", metavar="SERVICE", help=service_help())


def services_epilog() -> str:
    """Each service, what it keeps and the relations it reads ({relation: {column: type}})."""
    from ivmstream.service import load_service

    lines = ["services (SERVICE) and the relations they read:"]
    for name in service_names():
        try:
            service = load_service(name)
        except ConfigError as exc:
            lines.append(f"  {name}: cannot be loaded: {exc}")
            continue
        lines.append(f"  {name}: {service.summary}")
        for line in service.relations_help():
            lines += textwrap.wrap(line, 100, initial_indent="    ", subsequent_indent="      ")
    lines.append("Every config key, runtime and per service, with its default: docs/configuration.md")
    return "\n".join(lines)


def add_config_argument(p: argparse.ArgumentParser, default_text: str = "the service's defaults") -> None:
    p.add_argument(
        "--config",
        metavar="FILE",
        help=f"the service's config, YAML or JSON (default: {default_text}; keys: docs/configuration.md)",
    )


def print_json(obj: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(obj, default=str) + b"\n")
    sys.stdout.flush()


def load(service_name: str, config_path: str | None) -> tuple[Any, Any]:
    """The service and its config: from ``config_path``, or the service's defaults when it is None."""
    from ivmstream.service import load_service

    service = load_service(service_name)
    if config_path is None:
        return service, build_config(service, {}, source=f"{service.name} defaults")
    return service, load_config(service, config_path)


def add_bootstrap_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", required=True, metavar="ADDR", help=BOOTSTRAP_HELP)


def add_state_arguments(p: argparse.ArgumentParser, *, redis_help: str, group_help: str) -> None:
    """Where a long-running command (a worker, the re-keying step) checkpoints its state and under which
    name: ``--state-dir``, ``--state-backend``, ``--redis`` and ``--group``; read by ``open_state``."""
    p.add_argument("--state-dir", default="state", help="directory of the RocksDB state (default ./state)")
    p.add_argument(
        "--state-backend",
        choices=("rocksdb", "redis", "memory"),
        help="where state and offsets are checkpointed: rocksdb (default), redis (needs --redis) or "
        "memory (lost at exit; tests)",
    )
    p.add_argument("--redis", metavar="URL", help=redis_help)
    p.add_argument("--group", help=group_help)


def open_state(args: argparse.Namespace, service_name: str, group: str) -> Any:
    """The store ``add_state_arguments``' options name, for ``group``."""
    return open_worker_store(
        args.state_backend or "rocksdb", service_name, group, state_dir=args.state_dir, redis_url=args.redis
    )


def group_or_default(group: str | None, service_name: str, suffix: str = "") -> str:
    """The consumer group given, else the service's (``suffix``: a step's own, as ``.rekey``)."""
    return group or f"ivmstream.{service_name}{suffix}"


def rekey_group(group: str | None, service_name: str) -> str:
    """The re-keying step's name in the state store: the one given, else the service's with ``.rekey``."""
    return group_or_default(group, service_name, ".rekey")


def open_worker_store(
    backend: str, service_name: str, group: str, *, state_dir: str | None, redis_url: str | None
) -> Any:
    """The state a service's workers in ``group`` keep: one namespace per service and group, so that
    ``run`` resumes from what ``bootstrap`` wrote for the same group."""
    from ivmstream.state import open_store

    return open_store(backend, f"{service_name}.{group}", state_dir=state_dir, redis_url=redis_url)


def check_broker(bootstrap: str, config: Any) -> None:
    """The broker answers, reached with the config's consumer settings (security) as the workers are."""
    from ivmstream.runtime.kafka import check_reachable

    check_reachable(bootstrap, overrides=config.kafka.get("consumer", {}))


def formats_of(service: Any) -> FormatRegistry:
    """The built-in formats plus the service's own."""
    if not service.formats:
        return FORMATS
    try:
        return FORMATS.extended(service.formats, owner=f"service {service.name}")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def warn_silent(silent: Sequence[str], declared: Sequence[str], service: str, label: str) -> None:
    """One stderr line naming the declared relations no event arrived for (the view ignored them)."""
    if silent:
        print(
            f"ivmstream: warning: no event for relation(s) {', '.join(silent)} in {label} "
            f"({service} declares {', '.join(declared)})",
            file=sys.stderr,
        )


class Progress:
    """A progress line on stderr: redrawn in place on a terminal, a line every few seconds otherwise.
    With a ``total`` it counts input lines (headers too), so the command's own summary gives the count
    of records; without one, records."""

    def __init__(self, label: str, total: int | None = None, every: float = 2.0) -> None:
        self.label, self.total, self.every = label, total, every
        self.tty = sys.stderr.isatty()
        self.started = self._last = time.monotonic()
        self._drawn = False

    def update(self, n: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < (0.2 if self.tty else self.every):
            return
        self._last = now
        rate = n / max(now - self.started, 1e-9)
        if self.total:
            pct = min(100.0, 100.0 * n / self.total)
            bar = "#" * int(pct / 5)
            text = f"{self.label} [{bar:<20}] line {n}/{self.total} ({pct:.0f}%) {rate:,.0f}/s"
        else:
            text = f"{self.label} {n:,} records {rate:,.0f}/s"
        self._drawn = True
        sys.stderr.write(("\r" + text) if self.tty else text + "\n")
        sys.stderr.flush()

    def clear(self) -> None:
        """End the redrawn line, for the summary that follows."""
        if self.tty and self._drawn:
            sys.stderr.write("\n")
