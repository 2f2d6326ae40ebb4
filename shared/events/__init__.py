"""Update events: model, codec and validation, and the input formats that read files into events."""

from ivmstream.events.codec import (
    CODECS,
    COLUMN_TYPES,
    EventCodec,
    EventError,
    Relation,
    Schema,
    UpdateEvent,
    encode_event,
)
from ivmstream.events.formats import FormatRegistry, InputFormat, ReadOption, ReadRequest
from ivmstream.events.orderbook import OrderBookAdaptor
from ivmstream.events.readers import (
    FORMATS,
    read_csv,
    read_jsonl,
    read_orderbook,
    read_source,
    read_tbl,
    register_format,
)
from ivmstream.events.source import SourceError, SourceRecord, relation_of

__all__ = [
    "CODECS",
    "COLUMN_TYPES",
    "FORMATS",
    "EventCodec",
    "EventError",
    "FormatRegistry",
    "InputFormat",
    "OrderBookAdaptor",
    "ReadOption",
    "ReadRequest",
    "Relation",
    "Schema",
    "SourceError",
    "SourceRecord",
    "UpdateEvent",
    "encode_event",
    "read_csv",
    "read_jsonl",
    "read_orderbook",
    "read_source",
    "read_tbl",
    "register_format",
    "relation_of",
]
