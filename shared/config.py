"""Service configuration: typed runtime settings plus a service's own options, from YAML or JSON.

One flat mapping per service instance: the runtime keys below plus the keys the service declares.
Unknown keys, wrong types and bad values are errors that name the key, because a typo in a view's
configuration otherwise runs the wrong query silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from shared.events import Schema

if TYPE_CHECKING:
    from shared.service import ServiceDefinition


class ConfigError(ValueError):
    """A configuration file or value that cannot be used; the message says which key and why."""


@dataclass(frozen=True)
class Option:
    """One config key: its default and a parser that returns the typed value or raises ValueError."""

    default: Any
    parse: Callable[[Any], Any]
    help: str


def _positive_int(v: Any) -> int:
    if type(v) is not int or v <= 0:
        raise ValueError("must be a positive integer")
    return v


def _positive_number(v: Any) -> float:
    if type(v) not in (int, float) or v <= 0:
        raise ValueError("must be a positive number")
    return float(v)


def _topic_name(v: Any) -> str | None:
    if v is None:
        return None
    if type(v) is not str or not v or len(v) > 249 or any(c not in _TOPIC_CHARS for c in v):
        raise ValueError("must be a Kafka topic name (letters, digits, '.', '_', '-')")
    return v


def _optional_identifier(v: Any) -> str | None:
    if v is None:
        return None
    if type(v) is not str or not v:
        raise ValueError("must be a non-empty string")
    return v


def _kafka_overrides(v: Any) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict) or set(v) - {"consumer", "producer"}:
        raise ValueError("must be a mapping with optional 'consumer' and 'producer' librdkafka settings")
    for part in v.values():
        if not isinstance(part, dict):
            raise ValueError("'consumer' and 'producer' must be mappings of librdkafka settings")
    return {k: dict(x) for k, x in v.items()}


_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")

RUNTIME_OPTIONS: dict[str, Option] = {
    "key_field": Option(None, _optional_identifier, "row column whose value is the partition key"),
    "input_topic": Option(None, _topic_name, "input topic (default <service>.updates)"),
    "output_topic": Option(None, _topic_name, "results topic (default <service>.results)"),
    "dlq_topic": Option(None, _topic_name, "dead-letter topic (default <service>.dlq)"),
    "batch_size": Option(2000, _positive_int, "max records consumed and applied per batch"),
    "checkpoint_interval": Option(1.0, _positive_number, "seconds between state+offset checkpoints"),
    "session_timeout_ms": Option(10000, _positive_int, "consumer group session timeout"),
    "kafka": Option(None, _kafka_overrides, "extra librdkafka settings: {consumer: {...}, producer: {...}}"),
}


@dataclass(frozen=True)
class ServiceConfig:
    """A validated configuration of one service instance."""

    service: str
    options: Mapping[str, Any]
    key_field: str | None
    input_topic: str
    output_topic: str
    dlq_topic: str
    batch_size: int
    checkpoint_interval: float
    session_timeout_ms: int
    kafka: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source: str = "<inline>"


def read_config_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {path}")
    text = p.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(f"{path}: not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {first}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config must be a mapping of keys to values")
    return data


def build_config(
    service: ServiceDefinition, raw: Mapping[str, Any], source: str = "<inline>"
) -> ServiceConfig:
    known = {**RUNTIME_OPTIONS, **service.options}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(
            f"{source}: unknown config key {unknown[0]!r} for service {service.name} "
            f"(known: {', '.join(sorted(known))})"
        )
    values: dict[str, Any] = {}
    for key, opt in known.items():
        try:
            values[key] = opt.parse(raw[key]) if key in raw else opt.default
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{source}: config key {key!r} {exc} (got {raw[key]!r})") from None
    service_options = {k: values[k] for k in service.options}
    if service.validate is not None:
        try:
            service.validate(service_options)
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    name = service.name
    return ServiceConfig(
        service=name,
        options=service_options,
        key_field=values["key_field"],
        input_topic=values["input_topic"] or f"{name}.updates",
        output_topic=values["output_topic"] or f"{name}.results",
        dlq_topic=values["dlq_topic"] or f"{name}.dlq",
        batch_size=values["batch_size"],
        checkpoint_interval=values["checkpoint_interval"],
        session_timeout_ms=values["session_timeout_ms"],
        kafka=values["kafka"] or {},
        source=source,
    )


def load_config(service: ServiceDefinition, path: str | Path) -> ServiceConfig:
    return build_config(service, read_config_file(path), str(path))


def schema_of(service: ServiceDefinition, config: ServiceConfig) -> Schema:
    try:
        return Schema.of(*service.relations(config.options), key_field=config.key_field)
    except ValueError as exc:
        raise ConfigError(f"{config.source}: {exc}") from None
