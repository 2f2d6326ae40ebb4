"""The compiled decoder's member names and column lists: names matched in place (the next column in
schema order, and the record's three fields) against the reference decoder, on schemas whose column names
share prefixes or hold non-ASCII characters, in every order and escaping; and ``decode_columns`` writing
rows whose keys and relations interleave against ``decode_grouped`` and a brute-force grouping; and the
ints a column reads again or after another value took their cache slot, against the records' values."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import EventCodec, Relation, Schema, UpdateEvent
from ivmstream.events.columns import decode_columns, event_columns
from tests.unit.codec_cases import grouped_outcome, outcome, reference

# Names a byte apart, one a prefix of another, an empty one, non-ASCII ones, and names around the 14 bytes
# the decoder compares in two words (a schema's names hold no quote, backslash or control character: the
# msgspec path refuses such a schema).
NAMES = Schema.of(
    Relation("p", (("price", "int"), ("pric", "int"), ("prices", "number"), ("", "str"))),
    Relation("q", (("ab", "int"), ("a", "int"), ("é", "int"), ("ñn", "str"), ("quantity_in_lots", "int"))),
    Relation("a_relation_named_at_length", (("exactly_14_abc", "int"), ("exactly_15_abcd", "int"))),
    Relation("pp", (("price", "float"),)),
    key_field="k",
)
NAMES_CODECS = (EventCodec(NAMES, compiled=True), EventCodec(NAMES, compiled=False))
MEMBER_NAMES = sorted(
    {c for rel in NAMES.relations.values() for c in rel.column_names}
    | {"k", "price ", " price", "Price", "pricé", "relation", "row", "delta", "a", "ab", "exactly_14_abd"}
)
GOOD_VALUES = {
    "int": st.integers(-5, 300),
    "number": st.integers(-5, 300) | st.floats(-9, 9),
    "str": st.text(max_size=3),
}
GOOD_VALUES["float"] = GOOD_VALUES["number"]
VALUES = st.one_of(st.integers(-5, 300), st.sampled_from((1.5, "x", "", None, True)))
TOP_NAMES = ("relation", "row", "delta", "relatio", "rows", "delta ", "Row")


def text_of(doc: list[tuple[str, Any]], escape: bool, spaced: bool) -> str:
    """A JSON object of (name, value) members in order (names may repeat), names escaped as json.dumps
    escapes them with ``escape``; ``spaced``: whitespace around every token."""
    sep = " " if spaced else ""
    members = []
    for name, value in doc:
        shown = json.dumps(name, ensure_ascii=escape)
        inner = text_of(value, escape, spaced) if isinstance(value, list) else json.dumps(value)
        members.append(f"{sep}{shown}{sep}:{sep}{inner}{sep}")
    return "{" + ",".join(members) + "}"


@st.composite
def named_records(draw: st.DrawFn) -> bytes:
    """A record of NAMES: its relation's columns in schema order (the in-place match), shuffled, with a
    column missing, repeated or replaced by a look-alike name, and top-level fields likewise varied."""
    relation = draw(st.sampled_from(sorted(NAMES.relations)))
    row: list[tuple[str, Any]] = [
        (col, draw(GOOD_VALUES[typ] if draw(st.integers(0, 9)) else VALUES))
        for col, typ in NAMES.relations[relation].columns
    ]
    row.insert(draw(st.integers(0, len(row))), ("k", draw(st.sampled_from(("a", "b", "é", 7)))))
    kind = draw(st.sampled_from(("as-is", "as-is", "as-is", "shuffle", "drop", "repeat", "rename")))
    if kind == "shuffle":
        row = list(draw(st.permutations(row)))
    elif kind in ("drop", "repeat", "rename"):
        i = draw(st.integers(0, len(row) - 1))
        if kind == "drop":
            del row[i]
        elif kind == "repeat":
            row.insert(draw(st.integers(0, len(row))), (row[i][0], draw(VALUES)))
        else:
            row[i] = (draw(st.sampled_from(MEMBER_NAMES)), row[i][1])
    top: list[tuple[str, Any]] = [
        ("relation", relation),
        ("row", row),
        ("delta", draw(st.sampled_from((1, -1, 2)))),
    ]
    top_kind = draw(st.sampled_from(("as-is", "as-is", "as-is", "shuffle", "rename")))
    if top_kind == "shuffle":
        top = list(draw(st.permutations(top)))
    elif top_kind == "rename":
        i = draw(st.integers(0, 2))
        top[i] = (draw(st.sampled_from(TOP_NAMES)), top[i][1])
    return text_of(top, draw(st.booleans()), draw(st.booleans())).encode()


@settings(max_examples=300, deadline=None)
@given(st.lists(named_records(), min_size=1, max_size=6))
def test_names_matched_in_place_decode_as_the_reference_does(values: list[bytes]) -> None:
    """Every record decodes (or is refused) by the compiled decoder as by the pure-Python and reference
    decoders, and its columns hold what its events hold."""
    compiled, pure = NAMES_CODECS
    want = [reference(pure, v) for v in values]
    assert [outcome(item) for item in compiled.decode_many(values)] == want
    assert [outcome(item) for item in pure.decode_many(values)] == want
    assert grouped_outcome(compiled.decode_grouped(values)) == grouped_outcome(pure.decode_grouped(values))
    decoded, groups, _ = pure.decode_grouped(values)
    errors, columns, records = decode_columns(compiled, values)
    assert [(i, outcome(e)) for i, e in errors] == [
        (i, outcome(d)) for i, d in enumerate(decoded) if not isinstance(d, UpdateEvent)
    ]
    assert list(columns) == list(groups)
    for key, events in groups.items():
        assert [outcome(decoded[i]) for i in records[key]] == [outcome(ev) for ev in events]
        for rel, part in event_columns(events).relations.items():
            got = columns[key].relations[rel]
            assert list(got.positions) == list(part.positions) and got.deltas == part.deltas
            assert {c: [(type(v), repr(v)) for v in vs] for c, vs in got.columns.items()} == {
                c: [(type(v), repr(v)) for v in vs] for c, vs in part.columns.items()
            }


TRADES = Schema.of(Relation("r", (("x", "int"),)), Relation("s", (("y", "int"),)), key_field="k")
TRADES_CODECS = (EventCodec(TRADES, compiled=True), EventCodec(TRADES, compiled=False))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(("r", "s")), st.sampled_from(("a", "b", "ab", "é", "", 5))),
        min_size=1,
        max_size=12,
    )
)
def test_interleaved_keys_and_relations_keep_their_columns(rows: list[tuple[str, Any]]) -> None:
    """Rows under keys and relations that follow one another, alternate or return (equal keys decoded as
    distinct str objects): each key's columns per relation hold its rows in batch order, for the compiled
    decoder as for the Python path, and the brute-force grouping of the rows says the same."""
    values = [
        json.dumps({"relation": rel, "row": {"x" if rel == "r" else "y": n, "k": key}, "delta": 1}).encode()
        for n, (rel, key) in enumerate(rows)
    ]
    want: dict[str, dict[str, list[int]]] = {}
    for n, (rel, key) in enumerate(rows):
        want.setdefault(str(key), {}).setdefault(rel, []).append(n)
    # the lists made with room for the batch's rows (a list given) hold what the lists grown row by row do
    assert TRADES_CODECS[0].column_lists(values) == TRADES_CODECS[0].column_lists(iter(values))  # type: ignore[arg-type]
    for codec in TRADES_CODECS:
        errors, columns, records = decode_columns(codec, values)
        assert errors == [] and list(columns) == list(want)
        for key, rels in want.items():
            assert sorted(records[key]) == records[key] == sorted(n for ns in rels.values() for n in ns)
            assert list(columns[key].relations) == list(rels)
            for rel, ns in rels.items():
                part = columns[key].relations[rel]
                assert part.columns == {"x" if rel == "r" else "y": ns} and part.deltas == [1] * len(ns)


# Ints beyond CPython's shared small ones (-5..256), from a pool small enough that a batch reads values
# again and larger than a column's 64 cache slots, so that values also displace one another.
POOL = st.lists(
    st.one_of(st.integers(-(10**17), 10**17), st.integers(257, 400), st.integers(-300, -6)),
    min_size=65,
    max_size=120,
    unique=True,
)


@settings(max_examples=100, deadline=None)
@given(POOL.flatmap(lambda pool: st.lists(st.tuples(*[st.sampled_from(pool)] * 3), min_size=1, max_size=300)))
def test_ints_read_again_decode_to_their_values(rows: list[tuple[int, int, int]]) -> None:
    """Ints a column reads again (the same object, kept in the column's slots) or after another value took
    their slot decode to the values the records hold, in every tier: event rows, columns, and the
    reference decoder."""
    schema = Schema.of(Relation("r", (("a", "int"), ("b", "number"), ("c", "exact"))))
    compiled, pure = EventCodec(schema, compiled=True), EventCodec(schema, compiled=False)
    values = [
        json.dumps({"relation": "r", "row": {"a": a, "b": b, "c": c}, "delta": 1}).encode()
        for a, b, c in rows
    ]
    want = [reference(pure, v) for v in values]
    assert [outcome(item) for item in compiled.decode_many(values)] == want
    assert [
        (
            "accepted",
            "r",
            (("a", "int", repr(a)), ("b", "int", repr(b)), ("c", "int", repr(c))),
            1,
            "int",
            None,
        )
        for a, b, c in rows
    ] == want
    _errors, columns, _records = decode_columns(compiled, values)
    part = columns[""].relations["r"]
    assert [type(v) for col in part.columns.values() for v in col] == [int] * (3 * len(rows))
    assert list(zip(*part.columns.values(), strict=True)) == rows
