"""The compiled decoder's batches: grouping by key in first-appearance order, any iterable and its
errors, no reference or memory leaks, the fallback seeing the original value object, and an
uninitialised decoder raising (the helpers in codec_cases.py)."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import EventCodec, EventError, Relation, Schema, UpdateEvent
from tests.unit.codec_cases import (
    PLAIN,
    SCHEMAS,
    TYPED,
    Recorder,
    batches,
    canonical_records,
    codec_module,
    codecs,
    grouped_outcome,
    mutated,
    outcome,
    reference,
)

# --- grouping -------------------------------------------------------------------------------------------


def kv(key: str, a: int, *, delta: int = 1, b: str = "x") -> bytes:
    """A record of relation u of TYPED; ``b`` is JSON string text (escapes allowed), ``a`` any integer."""
    return f'{{"relation":"u","row":{{"a":{a},"b":"{b}","k":"{key}"}},"delta":{delta}}}'.encode()


def test_grouping_by_key_in_first_appearance_order() -> None:
    """Groups map keys in first-appearance order to their events in input order; errors are only counted."""
    compiled, pure = codecs(TYPED)
    values = [
        kv("b", 1),
        kv("a", 2),
        b"junk",
        kv("b", 3, b="\\u00e9"),  # declined by C (an escape in the JSON text) and accepted by the fallback
        kv("c", 4, delta=0),  # rejected: "c" must not appear as a group
        None,
        b'{"relation":"u","row":{"a":5,"b":"","k":17},"delta":-1}',  # an integer key
        kv("a", 6),
        b'{"row":{"k":"d","a":7,"b":""},"delta":1,"relation":"u"}',  # declined: the row first
        kv("b", 8),
        b'{"relation":"u","row":{"a":"9","b":"","k":"a"},"delta":1}',  # rejected: a string in an int column
    ]
    decoded, groups, errors = compiled.decode_grouped(iter(values))
    assert errors == 4
    assert [outcome(item) for item in decoded] == [reference(pure, v) for v in values]
    assert list(groups) == ["b", "a", "17", "d"]
    assert {key: [ev.row["a"] for ev in events] for key, events in groups.items()} == {
        "b": [1, 3, 8],
        "a": [2, 6],
        "17": [5],
        "d": [7],
    }
    assert all(ev.key == key for key, events in groups.items() for ev in events)
    events = [item for item in decoded if isinstance(item, UpdateEvent)]
    assert sorted(map(id, events)) == sorted(id(ev) for evs in groups.values() for ev in evs)
    assert grouped_outcome((decoded, groups, errors)) == grouped_outcome(pure.decode_grouped(values))
    assert [outcome(item) for item in compiled.decode_many(values)] == [outcome(item) for item in decoded]


def test_grouping_without_key_field() -> None:
    """Without a key field there is one group, "", of the valid events in order, and none if all fail."""
    compiled, pure = codecs(PLAIN)
    good = [
        b'{"relation":"e","row":{},"delta":1}',
        b'{"relation":"t","row":{"x":1,"\xc3\xa7":"s","d":"1.5"},"delta":2}',  # a decimal column
        b'{"relation":"r","row":{"i":1,"f":2,"n":3,"s":"","b":false},"delta":3}',
    ]
    bad = [b"", b'{"relation":"e","row":{},"delta":0}', None, b'{"relation":"x","row":{},"delta":1}']
    values = [bad[0], good[0], bad[1], good[1], bad[2], good[2], bad[3]]
    for codec in (compiled, pure):
        decoded, groups, errors = codec.decode_grouped(values)
        assert errors == 4 and list(groups) == [""]
        assert [ev.delta for ev in groups[""]] == [1, 2, 3]
        assert [outcome(ev) for ev in groups[""]] == [reference(pure, v) for v in good]
        assert [id(ev) for ev in groups[""]] == [
            id(item) for item in decoded if isinstance(item, UpdateEvent)
        ]
        all_bad = codec.decode_grouped(bad)
        assert grouped_outcome(all_bad) == ([reference(pure, v) for v in bad], [], 4)
        assert all(isinstance(item, EventError) for item in all_bad[0])
        assert codec.decode_grouped([]) == ([], {}, 0)
        only_good = codec.decode_grouped(good)
        assert only_good[2] == 0 and [outcome(ev) for ev in only_good[1][""]] == [
            outcome(e) for e in only_good[0]
        ]


def test_grouping_accepts_any_iterable_and_propagates_its_errors() -> None:
    """decode_grouped takes generators; an exception raised while iterating must surface, not be swallowed."""
    compiled, _ = codecs(TYPED)

    def values() -> Iterator[bytes]:
        yield kv("a", 1)
        yield kv("b", 2, b="\\n")
        raise RuntimeError("broker went away")

    with pytest.raises(RuntimeError, match="broker went away"):
        compiled.decode_grouped(values())
    decoded, groups, errors = compiled.decode_grouped(v for v in [kv("a", 1), kv("a", 2)])
    assert [ev.row["a"] for ev in groups["a"]] == [1, 2] and errors == 0
    assert groups["a"] == decoded


# --- reference counts and memory ----------------------------------------------------------------------


def fresh_str(text: str) -> str:
    """A str object of its own (not the interned or cached one): its reference count is ours to watch."""
    return "".join(list(text))


LEAK_SCHEMA = Schema.of(
    Relation(
        fresh_str("trades"), ((fresh_str("quantity"), "int"), (fresh_str("price"), "float"), ("sym", "str"))
    ),
    Relation("fees", (("amount", "decimal"),)),
    key_field=fresh_str("account"),
)


def trade(
    quantity: Any, price: Any, sym: str, account: Any, delta: int = 1, *, row_first: bool = False
) -> bytes:
    row = {"quantity": quantity, "price": price, "sym": sym, "account": account}
    if row_first:
        return orjson.dumps({"row": row, "relation": "trades", "delta": delta})
    return orjson.dumps({"relation": "trades", "row": row, "delta": delta})


def leak_batch() -> list[Any]:
    """20000 records: decided in C, declined then accepted by the fallback, and rejected."""
    records: list[Any] = []
    for i in range(2000):
        acct = f"acct{i % 37}"
        escaped = (
            f'{{"relation":"trades","row":{{"quantity":{i},"price":2,"sym":"\\u0041","account":"{acct}"}},'
        )
        records += [
            trade(i, i / 4, "AB", acct),  # C
            trade(-i, 1.5, "é", i, -1),  # C, an integer key
            orjson.dumps(
                {"relation": "fees", "row": {"amount": "1.25", "account": acct}, "delta": 1}
            ),  # decimal
            (escaped + '"delta":2}').encode(),  # an escape: the fallback
            trade(i, 1.0, "x", acct, row_first=True),  # the fallback
            trade(10**18 + i, 1, "x", acct, 3),  # 19 digits: the fallback
            trade(i, 1.0, "x", acct, 0),  # rejected: zero delta
            trade("1", 1.0, "x", acct),  # rejected: wrong type
            orjson.dumps(
                {"relation": "trades", "row": {"quantity": 1, "account": acct}, "delta": 1}
            ),  # missing
            trade(i, 1.0, "x", acct) + b" x",  # rejected: trailing garbage
        ]
    return records


def test_no_reference_or_memory_leaks() -> None:
    """Every path through the C decoder releases what it takes: the names it shares with the schema, its
    events, and the memory of five passes over 20000 records of every kind."""
    compiled = EventCodec(LEAK_SCHEMA, compiled=True)
    trades = LEAK_SCHEMA.relations["trades"]
    watched: list[Any] = [trades.name, trades.columns[0][0], trades.columns[1][0], LEAK_SCHEMA.key_field]
    watched += [UpdateEvent, EventError]  # each live instance holds a reference to its class
    values = leak_batch()
    assert len(values) == 20000

    def one_pass() -> int:
        decoded, groups, errors = compiled.decode_grouped(values)
        assert len(decoded) == 20000 and errors == 8000 and len(groups) == 37 + 2000
        count = sum(len(events) for events in groups.values())
        del decoded, groups
        return count

    assert one_pass() == 12000  # warm-up: caches and free lists fill here
    gc.collect()
    before = [sys.getrefcount(obj) for obj in watched]
    tracemalloc.start()
    try:
        sizes = []
        for _ in range(4):  # passes 2 to 5
            assert one_pass() == 12000
            gc.collect()
            sizes.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert [sys.getrefcount(obj) for obj in watched] == before
    # A leak of even one small object per record would grow the traced memory by about 20000 x 3 x 50 bytes
    # = 3 MB between the 2nd and the 5th pass; a leak-free run stays flat except for allocator and cache
    # noise (msgspec/orjson string caches, free lists), which is far below 2 MB.
    assert sizes[-1] - sizes[0] < 2_000_000, sizes


def test_fallback_sees_the_original_value_object() -> None:
    """Declined values reach the fallback as the very objects given, so nothing is copied or re-encoded."""
    _, pure = codecs(TYPED)
    recorder = Recorder(pure)
    decoder = codec_module._compiled_decoder(TYPED, recorder)
    values: list[Any] = [kv("a", 1, b="\\t"), "text", bytearray(b"{}"), None]
    decoder.decode_grouped(values)
    assert all(a is b for a, b in zip(recorder.declined, values, strict=True))


def test_uninitialised_decoder_raises_instead_of_crashing() -> None:
    """A Decoder made without __init__ has no schema or fallback: a clear error, not a NULL call."""
    decoder = codec_module._fastjson.Decoder.__new__(codec_module._fastjson.Decoder)
    with pytest.raises(TypeError, match="__init__"):
        decoder.decode_grouped([b"{}"])


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        batches(),
        mutated(),
        st.sampled_from(SCHEMAS).flatmap(
            lambda s: st.tuples(st.just(s), st.lists(canonical_records(s), max_size=8))
        ),
    )
)
def test_columns_hold_what_the_grouped_events_hold(batch: tuple[Schema, list[bytes]]) -> None:
    """``decode_columns`` (the compiled decoder writing columns, and the Python path gathering them from
    events) against ``decode_grouped``: the same refusals at the same indexes, the same keys in the same
    order, each key's columns those of its events and its record indexes those of its events."""
    from ivmstream.events.columns import decode_columns, event_columns

    schema, values = batch
    compiled, pure = codecs(schema)
    decoded, groups, _ = compiled.decode_grouped(values)
    want_errors = [(i, outcome(d)) for i, d in enumerate(decoded) if not isinstance(d, UpdateEvent)]
    for codec in (compiled, pure):
        errors, columns, records = decode_columns(codec, values)
        assert [(i, outcome(e)) for i, e in errors] == want_errors
        assert list(columns) == list(groups)
        for key, events in groups.items():
            assert [decoded[i] for i in records[key]] == events
            want = event_columns(events)
            assert columns[key].size == want.size and list(columns[key].relations) == list(want.relations)
            for rel, part in want.relations.items():
                got = columns[key].relations[rel]
                assert list(got.positions) == list(part.positions) and got.deltas == part.deltas
                assert {c: [(type(v), repr(v)) for v in vs] for c, vs in got.columns.items()} == {
                    c: [(type(v), repr(v)) for v in vs] for c, vs in part.columns.items()
                }
