"""The change formats by name: each input's ``ChangeCodec`` (record -> events) and the file formats
``debezium-json``, ``maxwell-json``, ``canal-json`` and ``upsert-json`` for ``replay``, ``produce`` and
``bootstrap``, which read one change record per line and yield the native events it decodes into."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import orjson

from ivmstream.events.binlog import CanalDecoder, MaxwellDecoder
from ivmstream.events.changes import (
    CHANGE_FORMATS,
    ChangeEvents,
    ChangeSpec,
    Decoded,
    ImageTable,
    Skip,
)
from ivmstream.events.codec import EventError, Schema, UpdateEvent, encode_event
from ivmstream.events.debezium import DebeziumDecoder
from ivmstream.events.debezium_fast import FastDebezium
from ivmstream.events.formats import InputFormat, ReadOption, ReadRequest, name_list
from ivmstream.events.source import SourceError, SourceRecord, key_of
from ivmstream.events.upsert import UpsertDecoder
from ivmstream.options import choice


class RecordDecoder(Protocol):
    format: str

    def __init__(self, spec: ChangeSpec, types: Mapping[str, Mapping[str, str]]) -> None: ...

    def decode(self, key: bytes | None, value: bytes | None) -> Decoded: ...


DECODERS: dict[str, type[RecordDecoder]] = {
    "debezium-json": DebeziumDecoder,
    "maxwell-json": MaxwellDecoder,
    "canal-json": CanalDecoder,
    "upsert-json": UpsertDecoder,
}
assert tuple(DECODERS) == CHANGE_FORMATS


def declared_types(schema: Schema) -> dict[str, dict[str, str]]:
    return {name: dict(rel.columns) for name, rel in schema.relations.items()}


class ChangeCodec:
    """One input's change records -> update events: per record, all its events, a Skip, or the
    EventError that refuses it. ``images``: the input's stored last images (upsert mode), restored
    from a checkpoint; ``skipped`` counts the skipped records by kind."""

    def __init__(self, spec: ChangeSpec, schema: Schema, images: ImageTable | None = None) -> None:
        self.spec = spec
        self.decoder = DECODERS[spec.format](spec, declared_types(schema))
        self.events = ChangeEvents(spec, schema, images)
        self.skipped: Counter[str] = Counter()
        # The common record straight to its events; the general path decides everything else.
        self.fast = (
            FastDebezium(spec, schema)
            if spec.format == "debezium-json" and not spec.images and not spec.project
            else None
        )

    @property
    def images(self) -> ImageTable | None:
        return self.events.images

    def decode(self, key: bytes | None, value: bytes | None) -> list[UpdateEvent] | EventError:
        """The record's events (empty: skipped, and counted) or the refusal."""
        if self.fast is not None:
            events = self.fast.events(key, value)
            if events is not None:
                return events
        out = self.events.events(self.decoder.decode(key, value))
        if out.__class__ is list:
            return out  # type: ignore[return-value]
        if isinstance(out, Skip):
            self.skipped[out.kind] += 1
            return []
        return out  # type: ignore[return-value]


# --- files -------------------------------------------------------------------------------------------


def _lines(req: ReadRequest) -> Iterator[tuple[int, bytes, bytes | None, bytes | None]]:
    """``(lineno, raw, key, value)`` per non-blank line; with ``envelope: kafka`` a line is
    ``{"key": ..., "value": ...}`` (either JSON or null), so files can hold keys and tombstones."""
    kafka = req.options["envelope"] == "kafka"
    with open(req.path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            if not kafka:
                yield lineno, line, None, line
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                yield lineno, line, None, line  # the decoder names it malformed
                continue
            if type(obj) is not dict or not set(obj) <= {"key", "value"}:
                yield lineno, line, None, b"[]"  # not an object record: refused as such
                continue
            key, value = obj.get("key"), obj.get("value")
            yield (
                lineno,
                line,
                None if key is None else orjson.dumps(key),
                None if value is None else orjson.dumps(value),
            )


def _reader(fmt: str) -> Any:
    def read(req: ReadRequest) -> Iterator[SourceRecord]:
        if req.schema is None:
            raise SourceError(
                f"format {fmt} decodes change records against the relations of a service: pass "
                "--service S [--config C] (replay knows it)"
            )
        images = fmt == "upsert-json" or req.options.get("mode") == "upsert"
        if fmt == "upsert-json" and req.relation is None:
            raise SourceError("format upsert-json needs --relation (its rows name no table)")
        spec = ChangeSpec(fmt, req.relation, req.options["primary_key"], req.options["project"], images)
        return _records(req, ChangeCodec(spec, req.schema))

    return read


def _records(req: ReadRequest, codec: ChangeCodec) -> Iterator[SourceRecord]:
    key_field = req.key_field
    for lineno, raw, key, value in _lines(req):
        out = codec.decode(key, value)
        if isinstance(out, EventError):
            yield SourceRecord(lineno, raw, None, error=out.detail, code=out.code)
            continue
        for event in out:
            yield SourceRecord(
                lineno,
                encode_event(event, key_field),
                key_of(event.to_json(key_field)["row"], key_field),
                relation=event.relation,
            )


def _flag(value: Any) -> bool:
    """true or false, as a value or as the text a command line gives."""
    if type(value) is bool:
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ValueError("must be true or false")


_OPTIONS: Mapping[str, ReadOption] = {
    "envelope": ReadOption(
        "value",
        choice("value", "kafka"),
        'value: a line is a record value; kafka: {"key": ..., "value": ...}',
    ),
    "mode": ReadOption(
        "full",
        choice("full", "upsert"),
        "full: retract before-images; upsert: retract the last image per key",
    ),
    "primary_key": ReadOption(None, name_list, "columns naming a row, for records without a key"),
    "project": ReadOption(False, _flag, "drop columns the relation does not declare"),
}

_SUMMARIES = {
    "debezium-json": "Debezium change records (plain or schema-wrapped), one per line: c/r insert, u is a "
    "retract+insert pair, d retracts, t truncates (mode upsert), tombstones and m skipped",
    "maxwell-json": "Maxwell change records, one per line (before-image: data overlaid with old)",
    "canal-json": "Canal flat messages, one per line (before-image: data overlaid with old; text values)",
    "upsert-json": "rows by primary key, one per line (envelope kafka for keys and null-value deletes); the "
    "previous image of a key is retracted",
}

CHANGE_FILE_FORMATS = tuple(
    InputFormat(
        name,
        _SUMMARIES[name],
        _reader(name),
        {k: v for k, v in _OPTIONS.items() if not (name == "upsert-json" and k == "mode")},
    )
    for name in CHANGE_FORMATS
)
