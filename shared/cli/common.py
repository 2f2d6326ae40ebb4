"""What every subcommand shares: the one-line error, loading a service and its config, JSON output and
the progress line."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

import orjson

from ivmstream.config import ConfigError, build_config, load_config
from ivmstream.events import FORMATS, FormatRegistry

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CliError(RuntimeError):
    """A user-facing failure; its message is the whole output."""


class OneLineParser(argparse.ArgumentParser):
    """Usage mistakes end in one line and exit 2, like every other error of the command."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ivmstream: error: {message} (see: {self.prog} --help)\n")


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
    """A progress line on stderr: redrawn in place on a terminal, a line every few seconds otherwise."""

    def __init__(self, label: str, total: int | None = None, every: float = 2.0) -> None:
        self.label, self.total, self.every = label, total, every
        self.tty = sys.stderr.isatty()
        self.started = self._last = time.monotonic()

    def update(self, n: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < (0.2 if self.tty else self.every):
            return
        self._last = now
        rate = n / max(now - self.started, 1e-9)
        if self.total:
            pct = min(100.0, 100.0 * n / self.total)
            bar = "#" * int(pct / 5)
            text = f"{self.label} [{bar:<20}] {n}/{self.total} ({pct:.0f}%) {rate:,.0f}/s"
        else:
            text = f"{self.label} {n:,} {rate:,.0f}/s"
        sys.stderr.write(("\r" + text) if self.tty else text + "\n")
        sys.stderr.flush()

    def done(self, n: int) -> None:
        self.update(n, force=True)
        if self.tty:
            sys.stderr.write("\n")
