"""Service configuration: typed runtime settings plus a service's own options, from YAML or JSON.

One flat mapping per service instance: the runtime keys below plus the keys the service declares.
Unknown keys, wrong types and bad values are errors that name the key, because a typo in a view's
configuration otherwise runs the wrong query silently. The option parsers live in ``ivmstream.options``
and are re-exported here, so a service's declarations and the loader read from one place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ivmstream.events import Schema
from ivmstream.events.inputs import InputSpec, inputs_list
from ivmstream.options import (
    ConfigError,
    Option,
    Parser,
    boolean,
    choice,
    fraction,
    mapping,
    non_negative_int,
    optional,
    parse_options,
    positive_int,
    positive_number,
    string,
    to_fraction,
)
from ivmstream.service import ServiceDefinition
from ivmstream.state.base import ROCKSDB_BLOCK_CACHE_MIB, ROCKSDB_WRITE_BUFFER_MIB

__all__ = [
    "RUNTIME_OPTIONS",
    "ConfigError",
    "Option",
    "Parser",
    "ServiceConfig",
    "boolean",
    "build_config",
    "choice",
    "fraction",
    "load_config",
    "mapping",
    "non_negative_int",
    "optional",
    "positive_int",
    "positive_number",
    "read_config_file",
    "resolve_options",
    "schema_of",
    "string",
    "to_fraction",
]

_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _topic(v: Any) -> str:
    if type(v) is not str or not v or len(v) > 249 or any(c not in _TOPIC_CHARS for c in v):
        raise topic_name.invalid()
    return v


topic_name: Parser[str] = Parser("a Kafka topic name (letters, digits, '.', '_', '-')", _topic)

# Dead letters: the value is cut to dead_letter_max_bytes and the key to DEAD_LETTER_KEY_MAX_BYTES, and the
# producer's message.max.bytes must leave DEAD_LETTER_HEADROOM over the value for the key, the headers
# (a detail is a line) and the record batch's framing.
DEAD_LETTER_MAX_BYTES = 512 * 1024
DEAD_LETTER_KEY_MAX_BYTES = 1024
DEAD_LETTER_HEADROOM = 64 * 1024
PRODUCER_MESSAGE_MAX_BYTES = 1_000_000  # librdkafka's default message.max.bytes

RUNTIME_OPTIONS: dict[str, Option] = {
    "key_field": Option(None, optional(string()), "row column whose value is the partition key"),
    "input_topic": Option(None, optional(topic_name), "input topic (default <service>.updates)"),
    "inputs": Option(
        None,
        optional(inputs_list),
        "input topics, each {topic, format, relation} (docs/change-data.md); without key_field one view "
        "over every partition of every one, with key_field, shard_by or emit: every-event re-keyed into "
        "rekey_topic; input_topic T is the shorthand for [{topic: T, format: native}]",
    ),
    "rekey_topic": Option(
        None,
        optional(topic_name),
        "with inputs and key_field, shard_by or emit: every-event: the topic the re-keying step writes "
        "keyed by key_field or shard_by (a keyless view's: one partition) and the workers read (default "
        "<service>.rekeyed)",
    ),
    "output_topic": Option(None, optional(topic_name), "results topic (default <service>.results)"),
    "dlq_topic": Option(None, optional(topic_name), "dead-letter topic (default <service>.dlq)"),
    "batch_size": Option(2000, positive_int(), "max records consumed and applied per batch"),
    "checkpoint_interval": Option(1.0, positive_number(), "seconds between state+offset checkpoints"),
    "state_layout": Option(
        "incremental",
        choice("incremental", "snapshot"),
        "incremental: engines that support it checkpoint only their changed entries; "
        "snapshot: every checkpoint writes each changed key's whole state",
    ),
    "emit": Option(
        "batch",
        choice("batch", "checkpoint", "every-event"),
        "batch: each key's result once per consumed batch; checkpoint: each changed key's result once per "
        "checkpoint and when the worker has caught up (for results that cost a pass over the state); "
        "every-event: a JSON Patch of the key's result after every event, tagged with the event's offset, "
        "on the output topic (Redis keeps the latest)",
    ),
    "resident_keys": Option(
        10000,
        optional(positive_int()),
        "engines each partition keeps in memory after a checkpoint; the least recently used clean ones "
        "are dropped and reloaded from the state store when their key is next seen (null: keep all)",
    ),
    "rocksdb_block_cache_mib": Option(
        ROCKSDB_BLOCK_CACHE_MIB,
        positive_int(),
        "RocksDB state: MiB of the one LRU block cache all of a worker's partition databases share (data, "
        "index and filter blocks)",
    ),
    "rocksdb_write_buffer_mib": Option(
        ROCKSDB_WRITE_BUFFER_MIB,
        positive_int(),
        "RocksDB state: MiB of unflushed writes (memtables) all of a worker's partition databases may hold "
        "together before the largest are flushed",
    ),
    "session_timeout_ms": Option(10000, positive_int(), "consumer group session timeout"),
    "dead_letter_max_bytes": Option(
        DEAD_LETTER_MAX_BYTES,
        positive_int(),
        "the most bytes of a refused record's value a dead letter carries: a longer value is cut to this "
        "many, with its full length in the ivmstream.truncated header, so that every dead letter fits the "
        "producer's and the broker's message size limit and no record can stop its partition",
    ),
    "broker_timeout": Option(
        120.0,
        optional(positive_number()),
        "seconds with no Kafka broker reachable after which the worker exits non-zero with one line "
        "(state stays at its last checkpoint, so a restart resumes exactly); null: retry forever",
    ),
    "shard_by": Option(
        None,
        optional(string()),
        "scale one query over workers (two-phase aggregation): the variable whose value routes an event "
        "to an input partition; events of relations without it go to the broadcast topic",
    ),
    "broadcast_topic": Option(
        None, optional(topic_name), "with shard_by: the one-partition topic (default <input_topic>.broadcast)"
    ),
    "global_topic": Option(
        None,
        optional(topic_name),
        "with shard_by: where the coordinator publishes the global result (default <output_topic>.global)",
    ),
    "postgres_history_retention": Option(
        7 * 86400,
        optional(non_negative_int()),
        "with --postgres: seconds of numeric results kept in ivmstream_result_history for charts (older rows "
        "are deleted; 0: no history; null: keep all)",
    ),
    "postgres_history_fields": Option(
        64,
        positive_int(),
        "with --postgres: the most numeric leaves of one result kept in ivmstream_result_history "
        "(shallowest first)",
    ),
    "postgres_flush_interval": Option(
        0.5,
        positive_number(),
        "with --postgres: seconds between the sink's writes (each key's latest result per write, in one "
        "transaction; a checkpoint waits for them)",
    ),
    "kafka": Option(
        {},
        mapping(mapping(), keys=("consumer", "producer")),
        "extra librdkafka settings: {consumer: {...}, producer: {...}}",
    ),
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
    state_layout: str = "incremental"
    resident_keys: int | None = 10_000  # engines kept per partition after a checkpoint (None: all)
    rocksdb_block_cache_mib: int = ROCKSDB_BLOCK_CACHE_MIB  # one block cache per worker (RocksDB state)
    rocksdb_write_buffer_mib: int = ROCKSDB_WRITE_BUFFER_MIB  # all memtables of a worker (RocksDB state)
    emit: str = "batch"  # or "checkpoint", "every-event" (docs/architecture.md, "Result modes")
    broker_timeout: float | None = 120.0  # seconds without a reachable broker before exiting (None: never)
    dead_letter_max_bytes: int = DEAD_LETTER_MAX_BYTES  # a dead letter's value is cut to this many bytes
    shard_by: str | None = None  # sharded query: workers publish partial results, a coordinator sums them
    broadcast_topic: str = ""  # with shard_by: events of relations without the shard variable
    global_topic: str = ""  # with shard_by: the coordinator's output
    inputs: tuple[InputSpec, ...] = ()  # the inputs key; empty: input_topic alone, read per partition
    postgres_history_retention: int | None = 7 * 86400  # seconds of history (None: all; 0: none)
    postgres_history_fields: int = 64  # numeric leaves of one result kept in the history
    postgres_flush_interval: float = 0.5  # seconds between the PostgreSQL sink's writes

    @property
    def sharded(self) -> bool:
        return self.shard_by is not None

    @property
    def rekeyed(self) -> bool:
        """Inputs read through a re-keying step, which writes them to ``input_topic``: a keyed view's by
        ``key_field``; a sharded query's by ``shard_by`` (the other relations' to ``broadcast_topic``); a
        keyless view's with ``emit: every-event`` to its one partition, whose log fixes the order of the
        events (the per-event changelog is deduplicated by its offsets)."""
        return bool(self.inputs) and (
            self.key_field is not None or self.emit == "every-event" or self.shard_by is not None
        )


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML or JSON config file holds (an empty file is an empty mapping)."""
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


def _validate(service: ServiceDefinition, options: Mapping[str, Any], source: str) -> None:
    """Run the service's check of option combinations, as a ConfigError naming ``source``."""
    if service.validate is None:
        return
    try:
        service.validate(options)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def resolve_options(
    declared: ServiceDefinition | Mapping[str, Option],
    given: Mapping[str, Any] | None = None,
    *,
    source: str = "<inline>",
) -> dict[str, Any]:
    """Complete, validated options from a partial mapping: every missing key takes its default.

    For benchmarks and tests that build an engine without a config file; ``declared`` is a service
    (its options, then its ``validate``) or just a mapping of option declarations."""
    if isinstance(declared, ServiceDefinition):
        values = parse_options(declared.options, given or {}, owner=f"service {declared.name}", source=source)
        _validate(declared, values, source)
        return values
    return parse_options(declared, given or {}, owner="these options", source=source)


def build_config(
    service: ServiceDefinition, raw: Mapping[str, Any], source: str = "<inline>"
) -> ServiceConfig:
    """A service instance's configuration: runtime keys and service options, parsed and validated."""
    known = {**RUNTIME_OPTIONS, **service.options}
    values = parse_options(known, raw, owner=f"service {service.name}", source=source)
    if "emit" not in raw:
        values["emit"] = _service_emit(service, values)
    service_options = {k: values[k] for k in service.options}
    _validate(service, service_options, source)
    name = service.name
    if values["shard_by"] is not None:
        _check_sharding(service, service_options, values, source)
    inputs = _check_inputs(values, source)
    if inputs and (
        values["key_field"] is not None or values["emit"] == "every-event" or values["shard_by"] is not None
    ):
        input_topic = values["rekey_topic"] or f"{name}.rekeyed"
    else:
        input_topic = inputs[0].topic if inputs else values["input_topic"] or f"{name}.updates"
    output_topic = values["output_topic"] or f"{name}.results"
    return ServiceConfig(
        service=name,
        options=service_options,
        key_field=values["key_field"],
        input_topic=input_topic,
        output_topic=output_topic,
        dlq_topic=values["dlq_topic"] or f"{name}.dlq",
        batch_size=values["batch_size"],
        checkpoint_interval=values["checkpoint_interval"],
        state_layout=values["state_layout"],
        resident_keys=values["resident_keys"],
        rocksdb_block_cache_mib=values["rocksdb_block_cache_mib"],
        rocksdb_write_buffer_mib=values["rocksdb_write_buffer_mib"],
        emit=values["emit"],
        session_timeout_ms=values["session_timeout_ms"],
        broker_timeout=values["broker_timeout"],
        dead_letter_max_bytes=_dead_letter_max_bytes(values, source),
        kafka=values["kafka"],
        source=source,
        shard_by=values["shard_by"],
        broadcast_topic=values["broadcast_topic"] or f"{input_topic}.broadcast",
        global_topic=values["global_topic"] or f"{output_topic}.global",
        inputs=inputs,
        postgres_history_retention=values["postgres_history_retention"],
        postgres_history_fields=values["postgres_history_fields"],
        postgres_flush_interval=values["postgres_flush_interval"],
    )


def _service_emit(service: ServiceDefinition, values: Mapping[str, Any]) -> str:
    """The service's own result mode, where it applies: a sharded query publishes partial results per
    batch, and a keyless view over inputs its one result."""
    keyless_inputs = bool(values["inputs"]) and values["key_field"] is None
    if service.emit == "checkpoint" and (values["shard_by"] is not None or keyless_inputs):
        return "batch"
    return service.emit


def _check_inputs(values: Mapping[str, Any], source: str) -> tuple[InputSpec, ...]:
    """The ``inputs`` list, refused in combinations the runtime cannot keep exactly once."""
    inputs: tuple[InputSpec, ...] = values["inputs"] or ()
    rekeyed = any((values["key_field"] is not None, values["emit"] == "every-event", values["shard_by"]))
    if values["rekey_topic"] is not None and not (inputs and rekeyed):
        raise ConfigError(
            f"{source}: rekey_topic applies to inputs read through the re-keying step (inputs with "
            "key_field, shard_by or emit: every-event)"
        )
    if not inputs:
        return ()
    if values["emit"] == "checkpoint" and not rekeyed:
        raise ConfigError(
            f"{source}: emit checkpoint needs key_field with inputs: a keyless view over inputs "
            "publishes its result after every batch"
        )
    if values["input_topic"] is not None:
        raise ConfigError(
            f"{source}: inputs and input_topic exclude each other (inputs names every input topic)"
        )
    return inputs


def producer_message_max_bytes(dead_letter_max_bytes: int, kafka: Mapping[str, Any]) -> int:
    """The worker producer's message.max.bytes: the configured one (``kafka.producer``), else librdkafka's
    default raised as far as the largest dead letter needs."""
    given = kafka.get("producer", {}).get("message.max.bytes")
    if given is not None:
        return int(given)
    return max(PRODUCER_MESSAGE_MAX_BYTES, dead_letter_max_bytes + DEAD_LETTER_HEADROOM)


def _dead_letter_max_bytes(values: Mapping[str, Any], source: str) -> int:
    """``dead_letter_max_bytes``, refused if a dead letter that long would not fit the producer's
    ``message.max.bytes`` (only a configured one can be too small): the worker could then not
    dead-letter such a record."""
    cap: int = values["dead_letter_max_bytes"]
    try:
        limit = producer_message_max_bytes(cap, values["kafka"])
    except (TypeError, ValueError):
        given = values["kafka"]["producer"]["message.max.bytes"]
        raise ConfigError(
            f"{source}: kafka.producer message.max.bytes must be an integer, got {given!r}"
        ) from None
    if cap + DEAD_LETTER_HEADROOM > limit:
        raise ConfigError(
            f"{source}: dead_letter_max_bytes {cap} leaves no room for a dead letter's key and headers "
            f"under kafka.producer message.max.bytes {limit}: lower it to at most "
            f"{limit - DEAD_LETTER_HEADROOM}, or raise message.max.bytes"
        )
    return cap


def _check_sharding(
    service: ServiceDefinition, options: Mapping[str, Any], values: Mapping[str, Any], source: str
) -> None:
    """``shard_by`` names a column of the service's relations, the service can sum partial results, and
    its own check accepts the query (docs/architecture.md, "Scaling one query over workers")."""
    from ivmstream.service import load_sharding

    shard_by = values["shard_by"]
    if values["emit"] != "batch":
        raise ConfigError(
            f"{source}: emit {values['emit']} needs an unsharded query: a sharded worker publishes partial "
            "results for the coordinator, not each key's result"
        )
    if values["key_field"] is not None:
        raise ConfigError(
            f"{source}: shard_by and key_field exclude each other: a sharded query keeps one engine per "
            "input partition"
        )
    sharding = load_sharding(service)
    if sharding is None:
        raise ConfigError(f"{source}: service {service.name} cannot be sharded (it sums no partial results)")
    try:
        relations = service.relations(options)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if not any(shard_by in r.column_names for r in relations):
        raise ConfigError(f"{source}: shard_by {shard_by!r} is a column of no relation of {service.name}")
    try:
        sharding.check_shard_by(options, shard_by)
    except ValueError as exc:
        raise ConfigError(f"{source}: shard_by {shard_by!r}: {exc}") from None


def load_config(service: ServiceDefinition, path: str | Path) -> ServiceConfig:
    """``build_config`` of a YAML or JSON file."""
    return build_config(service, read_config_file(path), str(path))


def schema_of(service: ServiceDefinition, config: ServiceConfig) -> Schema:
    """The event schema a configured service accepts (its relations, keyed by ``key_field``)."""
    try:
        return Schema.of(*service.relations(config.options), key_field=config.key_field)
    except ValueError as exc:
        raise ConfigError(f"{config.source}: {exc}") from None
