"""Update events: model, codec and validation, and readers for input files."""

from shared.events.codec import (
    CODECS,
    COLUMN_TYPES,
    EventCodec,
    EventError,
    Relation,
    Schema,
    UpdateEvent,
    encode_event,
)
from shared.events.orderbook import OrderBookAdaptor
from shared.events.readers import (
    FORMATS,
    SourceError,
    SourceRecord,
    read_csv,
    read_jsonl,
    read_orderbook,
    read_source,
)

__all__ = [
    "CODECS",
    "COLUMN_TYPES",
    "FORMATS",
    "EventCodec",
    "EventError",
    "OrderBookAdaptor",
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
]
