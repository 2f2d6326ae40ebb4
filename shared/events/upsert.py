"""``upsert-json``: a topic of current rows, one per primary key (a compacted table topic, a Debezium
topic flattened by its ``ExtractNewRecordState`` transform): a value is the row's new image, a null
value deletes it. The row's previous image, which the record does not carry, is the last one kept for
its key (``ivmstream.events.changes.ImageTable``)."""

from __future__ import annotations

from collections.abc import Mapping

from ivmstream.events.changes import Change, ChangeSpec, Decoded, identity_of, load_record
from ivmstream.events.codec import EventError


class UpsertDecoder:
    """One input's upsert records -> changes keyed by primary key (the record key, else the
    ``primary_key`` columns of the row)."""

    format = "upsert-json"

    def __init__(self, spec: ChangeSpec, types: Mapping[str, Mapping[str, str]]) -> None:
        self.spec = spec

    def decode(self, key: bytes | None, value: bytes | None) -> Decoded:
        try:
            row = None
            if value is not None:
                row = load_record(value)
                if type(row) is not dict:
                    raise EventError(
                        "not-an-object", f"a row must be a JSON object, got {type(row).__name__}"
                    )
            identity = identity_of(key, row, self.spec.primary_key)
            if identity is None:
                raise EventError(
                    "missing-primary-key",
                    "the record has no key and the row lacks the primary_key columns"
                    if row is not None
                    else "a delete (null value) without a record key",
                )
            return [Change(None, None, row, identity, row is None)]
        except EventError as err:
            err.__traceback__ = None
            return err
