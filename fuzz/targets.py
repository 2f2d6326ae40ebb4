"""What the fuzzer runs on each input, and what counts as a crash.

The first byte of an input picks a target; the rest is the input's text:

* ``json``: the rest, split at newlines, is a batch of record values for the three update decoders (the
  compiled one, the msgspec path and the reference ``decode_slow``) of a schema with one column of every
  type and a key field. Every record must get the same verdict from each (type-strict: 1, 1.0 and True
  differ), a rejection must carry a known reason code, and an accepted event must hold only values of its
  column's type (finite floats, 64-bit integers, exact decimals).
* ``csv``, ``tbl``, ``orderbook``, ``jsonl``: the rest is written to a file and read by that reader,
  whose records must then decode as above. A reader may refuse the whole input only with SourceError
  and must turn a bad line into an error record, never raise out of the middle of a file.

Any other exception (or a failed check, an AssertionError) is a crash: atheris keeps the input, and
once fixed it joins fuzz/corpus/, which tests/unit/hostile/test_fuzz.py replays.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

from ivmstream.events import (
    EventCodec,
    EventError,
    Relation,
    Schema,
    SourceError,
    SourceRecord,
    UpdateEvent,
    read_csv,
    read_jsonl,
    read_orderbook,
    read_tbl,
)
from ivmstream.events.reasons import INT_MAX, INT_MIN, REASONS

ALL_TYPES = Relation.of("t", i="int", f="float", n="number", s="str", b="bool", d="decimal", e="exact")
BOOK = Relation.of("bids", t="number", id="number", broker_id="number", volume="number", price="number")
SCHEMA = Schema.of(ALL_TYPES, Relation.of("u", i="int"), BOOK, key_field="k")
KEYLESS = Schema.of(ALL_TYPES, BOOK)
# A record size limit within libFuzzer's default input length (4096), so that the fuzzer reaches the
# oversized path, and still room for values nested deeper than Python's recursion limit.
LIMIT = 3000

_CODECS: list[tuple[EventCodec, EventCodec]] = [
    (
        EventCodec(schema, compiled=True, max_record_bytes=LIMIT),
        EventCodec(schema, compiled=False, max_record_bytes=LIMIT),
    )
    for schema in (SCHEMA, KEYLESS)
]


def _int(v: Any) -> bool:
    return type(v) is int and INT_MIN <= v <= INT_MAX


def _float(v: Any) -> bool:
    return type(v) is float and math.isfinite(v)


def _decimal(v: Any) -> bool:
    return type(v) is Decimal and v.is_finite()


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": _int,
    "float": _float,
    "number": lambda v: _int(v) or _float(v),
    "str": lambda v: type(v) is str,
    "bool": lambda v: type(v) is bool,
    "decimal": _decimal,
    "exact": lambda v: _int(v) or _decimal(v),
}


def outcome(item: Any) -> tuple[Any, ...]:
    """A verdict as plain, type-strict data."""
    if isinstance(item, EventError):
        return ("rejected", item.code)
    if type(item) is not UpdateEvent:
        raise AssertionError(f"a decoder returned {type(item).__name__}, neither an event nor an EventError")
    row = tuple((col, type(v).__name__, repr(v)) for col, v in item.row.items())
    return ("accepted", item.relation, row, item.delta, type(item.delta).__name__, item.key)


def check_accepted(schema: Schema, event: UpdateEvent) -> None:
    relation = schema.relations[event.relation]
    assert tuple(event.row) == relation.column_names, (event.row, relation)
    for col, typ in relation.columns:
        assert _TYPE_CHECKS[typ](event.row[col]), (col, typ, event.row[col])
    assert type(event.delta) is int and event.delta != 0 and INT_MIN <= event.delta <= INT_MAX
    assert (event.key is None) == (schema.key_field is None) and (event.key is None or type(event.key) is str)


def check_records(values: list[bytes | None]) -> None:
    """Every decoder of both schemas agrees on every value, and every verdict is well formed."""
    for compiled, pure in _CODECS:
        reference = []
        for value in values:
            try:
                reference.append(outcome(compiled.decode_slow(value)))
            except EventError as err:
                reference.append(outcome(err))
        for codec in (compiled, pure):
            many = [outcome(x) for x in codec.decode_many(values)]
            decoded, groups, errors = codec.decode_grouped(values)
            assert many == reference, (codec.compiled, values, many, reference)
            assert [outcome(x) for x in decoded] == reference
            assert errors == sum(1 for r in reference if r[0] == "rejected")
            assert sum(len(g) for g in groups.values()) == len(values) - errors
        for item, verdict in zip(compiled.decode_many(values), reference, strict=True):
            if verdict[0] == "rejected":
                assert verdict[1] in REASONS, verdict
            else:
                assert type(item) is UpdateEvent
                check_accepted(compiled.schema, item)


def check_reader(records: Iterable[SourceRecord]) -> None:
    values: list[bytes | None] = []
    for rec in records:
        assert type(rec) is SourceRecord and type(rec.value) is bytes
        assert rec.error is None or type(rec.error) is str
        if rec.error is None:
            values.append(rec.value)
    check_records(values)


def _read(target: str, path: Path) -> Iterable[SourceRecord]:
    if target == "csv":
        return read_csv(path, "t", key_field="k")
    if target == "tbl":
        return read_tbl(path, "t", ALL_TYPES.column_names, types=dict(ALL_TYPES.columns), key_field="k")
    if target == "orderbook":
        return read_orderbook(path, book="both", key="k")
    return read_jsonl(path, key_field="k")


TARGETS = ("json", "csv", "tbl", "orderbook", "jsonl")
_SCRATCH = Path(tempfile.gettempdir()) / f"ivmstream-fuzz-{os.getpid()}.txt"


def run_one(data: bytes) -> None:
    """One fuzz input (see the module docstring); raises on a crash."""
    if not data:
        return
    target, text = TARGETS[data[0] % len(TARGETS)], data[1:]
    if target == "json":
        check_records(list(text.split(b"\n")))
        return
    _SCRATCH.write_bytes(text)
    with contextlib.suppress(SourceError):  # refusing the whole input, in one line, is allowed
        check_reader(list(_read(target, _SCRATCH)))


def input_for(target: str, text: bytes) -> bytes:
    """The fuzz input that runs ``text`` through ``target`` (for seeds and regression inputs)."""
    return bytes([TARGETS.index(target)]) + text
