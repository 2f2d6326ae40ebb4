"""The compiled decoder (shared/events/_fastjson.c) gives exactly the reference decoder's verdicts.

It parses canonical records straight into UpdateEvents and declines everything else to the Python fallback.
A wrong "accept" there silently corrupts a view, so every path is compared with ``decode_slow`` type by type:
1 == 1.0 == True and 0.0 == -0.0 in Python, which a plain ``==`` on events would let through.
"""

from __future__ import annotations

import gc
import json
import re
import sys
import tracemalloc
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import EventCodec, EventError, Relation, Schema, UpdateEvent
from ivmstream.events import codec as codec_module

if codec_module._fastjson is None:  # never skipped: without the extension these tests fail, saying why
    pytest.fail(
        "the compiled event decoder ivmstream.events._fastjson is not built. Build it with `make setup` "
        "(installs gcc and the Python headers if missing, then `pip install -e .` compiles "
        "shared/events/_fastjson.c), or, with a C compiler and the Python headers present, "
        "`.venv/bin/pip install -e .`",
        pytrace=False,
    )

# --- outcomes ---------------------------------------------------------------------------------------

Outcome = tuple[Any, ...]


def outcome(item: UpdateEvent | EventError) -> Outcome:
    """A decoded item as plain, type-strict data: value types and reprs, so 1, 1.0, True and -0.0 differ."""
    if isinstance(item, EventError):
        return ("rejected", item.code)
    assert type(item) is UpdateEvent, item
    row = tuple((col, type(v).__name__, repr(v)) for col, v in item.row.items())
    return ("accepted", item.relation, row, item.delta, type(item.delta).__name__, item.key)


def reference(codec: EventCodec, value: Any) -> Outcome:
    """The verdict of the reference decoder, which raises EventError for a rejection."""
    try:
        return outcome(codec.decode_slow(value))
    except EventError as err:
        return outcome(err)


def accepted(relation: str, row: dict[str, Any], delta: int = 1, key: str | None = None) -> Outcome:
    """The expected outcome of an accepted record, built from the Python values it must decode to."""
    return outcome(UpdateEvent(relation, row, delta, key))


def rejected(code: str) -> Outcome:
    return ("rejected", code)


# --- schemas ----------------------------------------------------------------------------------------

PLAIN = Schema.of(
    Relation.of("r", i="int", f="float", n="number", s="str", b="bool"),
    Relation("t", (("x", "exact"), ("ç", "str"), ("d", "decimal"))),  # decimal columns: Decimal() in C
    Relation("ex", (("x", "exact"), ("n", "number"))),
    Relation("e", ()),
    Relation("é", (("ü", "int"), ("s", "str"))),
)
KEYED = Schema.of(
    Relation.of("r", i="int", f="float", s="str", b="bool"),
    Relation("t", (("x", "exact"), ("n", "number"), ("d", "decimal"))),
    Relation("e", ()),
    Relation("ç", (("ñ", "float"),)),
    key_field="k",
)
KEYED_UNICODE = Schema.of(
    Relation("trades", (("qty", "int"), ("px", "number"), ("sym", "str"))), key_field="clé"
)
SINGLE = Schema.of(
    Relation.of("every", i="int", f="float", n="number", s="str", b="bool", d="decimal", x="exact")
)
SCHEMAS = (PLAIN, KEYED, KEYED_UNICODE, SINGLE)

# (compiled, pure) per schema, built once: codecs are meant to be built once and reused per batch.
CODECS = {id(s): (EventCodec(s, compiled=True), EventCodec(s, compiled=False)) for s in SCHEMAS}


def codecs(schema: Schema) -> tuple[EventCodec, EventCodec]:
    return CODECS[id(schema)]


# --- generated values -------------------------------------------------------------------------------

BOUNDARY_INTS = (
    0,
    1,
    -1,
    7,
    10**17,
    10**18 - 1,
    -(10**18 - 1),
    10**18,
    -(10**18),
    10**19,
    -(10**19),
    2**53,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64 - 1,
    2**64,
    10**20,
    -(10**20),
    10**30,
)
INTS = st.one_of(
    st.integers(-1000, 1000),
    st.integers(-(2**64), 2**64),
    st.integers(-(10**40), 10**40),
    st.sampled_from(BOUNDARY_INTS),
)
SPECIAL_FLOATS = (
    0.0,
    -0.0,
    1.0,
    -1.5,
    0.1,
    1e308,
    -1e308,
    1.7976931348623157e308,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    1e16,
    1e18,
    1e19,
    1e22,
    float(2**53 + 1),
    float(10**18 - 1),
    float(2**63),
    float(10**20),
    123456789.125,
    1e-7,
)
FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(SPECIAL_FLOATS),
    st.integers(-(10**30), 10**30).map(float),
)
SPECIAL_STRINGS = (
    "",
    '"',
    "\\",
    '\\"',
    '"}',
    "\x00",
    "\x1f",
    "\t\n\r",
    "\x7f",
    "é",
    "ç",
    "😀",
    "\u2028",
    "\ufeff",
    "\\u0072",
    "1.5",
    "-0",
    "1e5",
    "NaN",
    "Infinity",
    "r",
    "k",
    " 7 ",
    "99999999999999999999",
)
STRINGS = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"]), max_size=8), st.sampled_from(SPECIAL_STRINGS)
)
DECIMAL_STRINGS = st.one_of(
    st.sampled_from(("1.5", "-0.25", "1e3", "1E+5", "-0", "0.000", "7", "123456789012345678901234567890.5")),
    st.decimals(allow_nan=False, allow_infinity=False).map(str),
)
SCALARS = st.one_of(INTS, FLOATS, STRINGS, st.booleans(), st.none())
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(STRINGS, inner, max_size=3)),
    max_leaves=6,
)
# Per column type, the JSON values the reference decoder accepts (and some of the edge cases of each).
GOOD = {
    "int": INTS,
    "float": st.one_of(FLOATS, INTS),
    "number": st.one_of(FLOATS, INTS),
    "str": STRINGS,
    "bool": st.booleans(),
    "decimal": st.one_of(INTS, FLOATS, DECIMAL_STRINGS),
    "exact": st.one_of(INTS, FLOATS, DECIMAL_STRINGS),
}
KEYS = st.one_of(STRINGS, INTS)
DELTAS = st.one_of(
    st.sampled_from((1, -1, 2, -3)),
    st.integers(-(10**6), 10**6),
    st.sampled_from((0, 10**18 - 1, 10**18, -(2**63), 2**63, 2**64, 10**20, True, False, 1.0, -0.0, 0.5)),
    st.sampled_from(("1", None, [1], {"d": 1})),
)
BAD_RELATIONS = ("R", "", "rr", "u", "c\u0327", "e ", 3, None, 1.5, True, ["r"], {"r": 1})
COLUMN_POOL = sorted(
    {col for s in SCHEMAS for rel in s.relations.values() for col in rel.column_names}
    | {"k", "clé", "zz", "", "I", "k ", "relation", "row", "c\u0327"}
)


class Obj(list[tuple[str, Any]]):
    """A JSON object as its (name, value) members in order: unlike a dict it can repeat a name."""


def plain(doc: Any) -> Any:
    """``doc`` with every Obj as a dict (last duplicate wins, like the JSON parsers)."""
    if isinstance(doc, Obj):
        return {k: plain(v) for k, v in doc}
    return doc


def has_duplicates(doc: Any) -> bool:
    if isinstance(doc, Obj):
        names = [k for k, _ in doc]
        return len(set(names)) != len(names) or any(has_duplicates(v) for _, v in doc)
    return False


# name -> (item separator, name separator, escape non-ASCII, whitespace inside braces, around the text)
STYLES: dict[str, tuple[str, str, bool, str, str]] = {
    "compact": (",", ":", False, "", ""),
    "spaces": (", ", ": ", True, "", ""),  # json.dumps' default: spaces and \uXXXX escapes
    "indent": (",\n  ", ": ", False, "\n  ", "\n"),
    "odd-ws": ("\t,\r\n ", " \t:\n", False, " \r\n\t", "\n\t "),
}


def dump(doc: Any, style: str) -> str:
    """JSON text of ``doc`` built by hand, so that objects can carry duplicate names."""
    item_sep, name_sep, ascii_only, pad, _ = STYLES[style]
    if isinstance(doc, Obj):
        members = (json.dumps(k, ensure_ascii=ascii_only) + name_sep + dump(v, style) for k, v in doc)
        return "{" + pad + item_sep.join(members) + pad + "}"
    return json.dumps(doc, ensure_ascii=ascii_only, separators=(item_sep, name_sep))


def serialize(doc: Any, style: str) -> bytes:
    """The record as bytes: by orjson (the canonical form producers write), json.dumps, or by hand."""
    if not has_duplicates(doc):
        if style == "orjson":
            try:
                return orjson.dumps(plain(doc))
            except orjson.JSONEncodeError:  # an integer beyond 64 bits: orjson cannot write it
                return dump(doc, "compact").encode()
        if style == "json.dumps":
            return json.dumps(plain(doc)).encode()
        if style == "json.dumps-indent":
            return json.dumps(plain(doc), indent=2, ensure_ascii=False).encode()
    if style not in STYLES:
        style = "compact"
    return (STYLES[style][4] + dump(doc, style) + STYLES[style][4]).encode()


SERIALIZATIONS = st.sampled_from(("orjson", "orjson", "orjson", "json.dumps", "json.dumps-indent", *STYLES))


# How a member list is varied: mostly not at all (one draw decides, to keep generation cheap).
PERTURBATIONS = st.sampled_from(
    ("none",) * 8 + ("shuffle", "shuffle", "drop", "extra", "repeat-first", "repeat-last")
)


def perturb(draw: st.DrawFn, members: list[tuple[str, Any]], pool: list[str], values: Any) -> list[Any]:
    """Sometimes reorder the members, drop one, add an unknown one, or repeat one with another value."""
    kind = draw(PERTURBATIONS)
    members = list(members)
    if kind == "none" or (not members and kind != "extra"):
        return members
    if kind == "shuffle":
        return list(draw(st.permutations(members)))
    if kind == "extra":
        members.insert(draw(st.integers(0, len(members))), (draw(st.sampled_from(pool)), draw(values)))
        return members
    i = draw(st.integers(0, len(members) - 1))
    if kind == "drop":
        del members[i]
    elif kind == "repeat-first":  # another value first: the original, last, wins
        members.insert(0, (members[i][0], draw(values)))
        members.append(members.pop(i + 1))
    else:  # another value last: it wins
        members.append((members[i][0], draw(values)))
    return members


@st.composite
def documents(draw: st.DrawFn, schema: Schema) -> Any:
    """A record as a document (Obj members), mostly near-valid for the schema so both paths get exercised."""
    names = list(schema.relations)
    relation = draw(st.one_of(st.sampled_from(names), st.sampled_from(names), st.sampled_from(BAD_RELATIONS)))
    rel = schema.relations.get(relation) if type(relation) is str else None
    if rel is None:  # an unknown relation with the row of a known one
        rel = schema.relations[draw(st.sampled_from(names))]
    row: list[tuple[str, Any]] = []
    for col, typ in rel.columns:
        choice = draw(st.integers(0, 19))
        if choice == 0:
            continue  # missing
        row.append((col, draw(ANY_JSON if choice == 1 else GOOD[typ])))
    key_field = schema.key_field
    if key_field is not None and draw(st.integers(0, 19)) > 0:
        kv = draw(KEYS if draw(st.integers(0, 9)) > 0 else ANY_JSON)
        row.insert(draw(st.integers(0, len(row))), (key_field, kv))
    row = perturb(draw, row, COLUMN_POOL, GOOD["int"] | ANY_JSON)
    row_value: Any = Obj(row) if draw(st.integers(0, 29)) > 0 else draw(ANY_JSON)
    delta = draw(DELTAS)
    top = [("relation", relation), ("row", row_value), ("delta", delta)]
    top = perturb(draw, top, ["relation", "row", "delta", "extra", "Relation", ""], ANY_JSON)
    return Obj(top)


@st.composite
def batches(draw: st.DrawFn) -> tuple[Schema, list[bytes]]:
    schema = draw(st.sampled_from(SCHEMAS))
    docs = draw(st.lists(st.tuples(documents(schema), SERIALIZATIONS), min_size=1, max_size=4))
    return schema, [serialize(doc, style) for doc, style in docs]


def grouped_outcome(
    result: tuple[list[UpdateEvent | EventError], dict[str, list[UpdateEvent]], int],
) -> tuple[list[Outcome], list[tuple[str, list[Outcome]]], int]:
    decoded, groups, errors = result
    return (
        [outcome(item) for item in decoded],
        [(key, [outcome(ev) for ev in events]) for key, events in groups.items()],
        errors,
    )


def expected_groups(schema: Schema, verdicts: list[Outcome]) -> list[tuple[str, list[Outcome]]]:
    """The grouping the contract defines: accepted events per key ("" without key field), first seen first."""
    groups: dict[str, list[Outcome]] = {}
    for v in verdicts:
        if v[0] == "accepted":
            groups.setdefault(v[5] if schema.key_field is not None else "", []).append(v)
    return list(groups.items())


def check_batch(schema: Schema, values: list[Any]) -> None:
    """Compiled == pure == reference per value, for decode_many and decode_grouped alike."""
    compiled, pure = codecs(schema)
    assert compiled.compiled and not pure.compiled
    ref = [reference(pure, v) for v in values]
    got_pure = [outcome(item) for item in pure.decode_many(values)]
    got_compiled = [outcome(item) for item in compiled.decode_many(values)]
    for value, r, p, c in zip(values, ref, got_pure, got_compiled, strict=True):
        assert c == r, f"compiled disagrees with the reference on {value!r}"
        assert p == r, f"pure-Python disagrees with the reference on {value!r}"
    result = compiled.decode_grouped(values)
    decoded, groups, errors = result
    assert grouped_outcome(result) == grouped_outcome(pure.decode_grouped(values))
    assert grouped_outcome(result) == (
        ref,
        expected_groups(schema, ref),
        sum(r[0] == "rejected" for r in ref),
    )
    # the grouped events are the decoded ones, not copies (in input order without a key field)
    events = [id(item) for item in decoded if isinstance(item, UpdateEvent)]
    grouped = [id(ev) for evs in groups.values() for ev in evs]
    assert sorted(grouped) == sorted(events)
    if schema.key_field is None:
        assert grouped == events
    assert errors == sum(isinstance(item, EventError) for item in decoded)


# --- the extension is built and used ------------------------------------------------------------------


def test_compiled_decoder_is_used_unless_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once built, every codec uses the C decoder unless IVMSTREAM_PURE_PYTHON=1 or compiled=False."""
    monkeypatch.delenv(codec_module.PURE_PYTHON_ENV, raising=False)
    assert EventCodec(PLAIN).compiled is True
    codec = EventCodec(KEYED, compiled=True)
    assert codec.compiled is True
    assert EventCodec(KEYED, compiled=False).compiled is False
    ev = codec.decode_many([b'{"relation":"r","row":{"i":1,"f":2,"s":"x","b":true,"k":7},"delta":-2}'])[0]
    assert outcome(ev) == accepted("r", {"i": 1, "f": 2.0, "s": "x", "b": True}, -2, "7")
    monkeypatch.setenv(codec_module.PURE_PYTHON_ENV, "1")
    assert EventCodec(PLAIN).compiled is False
    assert EventCodec(PLAIN, compiled=True).compiled is True


class Recorder:
    """A fallback that records what the C decoder declined, then decodes it as the codec would."""

    def __init__(self, codec: EventCodec) -> None:
        self.codec = codec
        self.declined: list[Any] = []

    def __call__(self, value: Any) -> UpdateEvent | EventError:
        self.declined.append(value)
        return self.codec._decode_declined(value)


def test_canonical_records_are_decided_in_c_and_the_rest_declined() -> None:
    """The differential tests would pass vacuously if C declined everything: check what it decides itself."""
    _, pure = codecs(KEYED)
    recorder = Recorder(pure)
    decoder = codec_module._compiled_decoder(KEYED, recorder)
    mine = [
        b'{"relation":"r","row":{"i":1,"f":2.5,"s":"x","b":false,"k":"a"},"delta":1}',
        b'{"delta":-7,"relation":"r","row":{"k":3,"b":true,"s":"","f":-1,"i":999999999999999999}}',
        b' {\n"relation" : "e" ,\t"row" : { "k" : "\xc3\xa7" } , "delta" : 2 }\r\n',
        b'{"relation":"\xc3\xa7","row":{"\xc3\xb1":1e5,"k":"z"},"delta":1}',
        b'{"relation":"t","row":{"x":-12,"n":1.5,"d":1,"k":"a"},"delta":1}',
        b'{"relation":"t","row":{"x":"2.50","n":1,"d":-0.1,"k":"a"},"delta":1}',
        b'{"relation":"t","row":{"x":1e2,"n":1,"d":"-7E+3","k":"a"},"delta":1}',
    ]
    declined = [
        b'{"relation":"r","row":{"i":1,"f":2.5,"s":"\\u0078","b":false,"k":"a"},"delta":1}',  # an escape
        b'{"relation":"r","row":{"i":1000000000000000000,"f":2.5,"s":"x","b":false,"k":"a"},"delta":1}',
        b'{"row":{"i":1,"f":2.5,"s":"x","b":false,"k":"a"},"relation":"r","delta":1}',  # row first
        b'{"relation":"r","row":{"i":1,"i":2,"f":2.5,"s":"x","b":false,"k":"a"},"delta":1}',  # duplicate
        b'{"relation":"r","row":{"i":1,"f":2.5,"s":"x","b":false,"k":"a"},"delta":0}',  # invalid
        b'{"relation":"e","row":{"k":1.5},"delta":1}',
        b'{"relation":"t","row":{"x":1,"n":1,"d":" 1.5","k":"a"},"delta":1}',  # Decimal() reads it; not C
        b'{"relation":"t","row":{"x":1,"n":1,"d":"1e1234567890","k":"a"},"delta":1}',  # a long exponent
        b"[]",
        None,
        "{}",
    ]
    decoded, groups, errors = decoder.decode_grouped(mine + declined)
    assert recorder.declined == declined
    assert [outcome(item) for item in decoded] == [reference(pure, v) for v in mine + declined]
    assert [outcome(item) for item in decoded[: len(mine)]] == [
        accepted("r", {"i": 1, "f": 2.5, "s": "x", "b": False}, 1, "a"),
        accepted("r", {"i": 999999999999999999, "f": -1.0, "s": "", "b": True}, -7, "3"),
        accepted("e", {}, 2, "ç"),
        accepted("ç", {"ñ": 100000.0}, 1, "z"),
        accepted("t", {"x": -12, "n": 1.5, "d": Decimal(1)}, 1, "a"),
        accepted("t", {"x": Decimal("2.50"), "n": 1, "d": Decimal("-0.1")}, 1, "a"),
        accepted("t", {"x": Decimal("100.0"), "n": 1, "d": Decimal("-7E+3")}, 1, "a"),
    ]
    assert list(groups) == ["a", "3", "ç", "z"] and errors == 5


# --- differential tests -------------------------------------------------------------------------------


@settings(max_examples=2000, deadline=None)
@given(batches())
def test_compiled_pure_and_reference_agree_on_generated_records(batch: tuple[Schema, list[bytes]]) -> None:
    """Records as producers write them and in every legal variation: each path must give the same verdict."""
    schema, values = batch
    check_batch(schema, values)


MUTATION_BYTES = b'{}[]:,"\\ -+.eE0123456789tfnul\x00\x1f\x80\xff'
INT64 = st.one_of(st.integers(-1000, 1000), st.integers(-(2**63), 2**64 - 1))  # what orjson can write
CANONICAL_VALUES = {
    "int": INT64,
    "float": st.one_of(FLOATS, st.integers(-(10**6), 10**6)),
    "number": st.one_of(FLOATS, INT64),
    "str": st.text(st.characters(exclude_categories=["Cs"]), max_size=6),
    "bool": st.booleans(),
    "decimal": st.one_of(st.integers(-1000, 1000), DECIMAL_STRINGS),
    "exact": st.one_of(INT64, FLOATS, DECIMAL_STRINGS),
}


@st.composite
def canonical_records(draw: st.DrawFn, schema: Schema) -> bytes:
    """A valid event as orjson writes it: the form the C decoder is built for."""
    name = draw(st.sampled_from(list(schema.relations)))
    row = {col: draw(CANONICAL_VALUES[typ]) for col, typ in schema.relations[name].columns}
    if schema.key_field is not None:
        row[schema.key_field] = draw(st.one_of(st.text(max_size=4), INT64))
    delta = draw(INT64.filter(bool))
    return orjson.dumps({"relation": name, "row": row, "delta": delta})


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Schema, list[bytes]]:
    schema = draw(st.sampled_from(SCHEMAS))
    out = []
    for value in draw(st.lists(canonical_records(schema), min_size=1, max_size=4)):
        data = bytearray(value)
        for _ in range(draw(st.integers(1, 4))):
            op = draw(st.sampled_from(("delete", "insert", "replace", "truncate", "insert")))
            pos = draw(st.integers(0, max(len(data) - 1, 0)))
            byte = draw(st.sampled_from(MUTATION_BYTES))
            if op == "delete" and data:
                del data[pos]
            elif op == "insert":
                data.insert(pos, byte)
            elif op == "replace" and data:
                data[pos] = byte
            elif op == "truncate":
                del data[pos:]
        out.append(bytes(data))
    return schema, out


@settings(max_examples=1500, deadline=None)
@given(mutated())
def test_compiled_and_reference_agree_on_mutated_records(batch: tuple[Schema, list[bytes]]) -> None:
    """Byte-level damage to canonical records hits the C parser's every branch; it must only ever decline."""
    schema, values = batch
    check_batch(schema, values)


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"",
        b"   ",
        b"null",
        b"{}",
        b"[]",
        b"\x00",
        b"\xff",
        b'"\xff"',
        b'{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"\xff","b":true},"delta":1}',
        b'{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"\xed\xa0\x80","b":true},"delta":1}',  # a surrogate
        b'{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"\xc3","b":true},"delta":1}',  # truncated UTF-8
        b'{"relation":"\xff","row":{},"delta":1}',
        b'{"relation":"e","row":{"\xff":1},"delta":1}',
        b'{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"a\x00b","b":true},"delta":1}',  # raw NUL
        b'{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"a\\u0000b","b":true},"delta":1}',
        b'{"relation":"e","row":{},"delta":1}\x00',
        b'\x00{"relation":"e","row":{},"delta":1}',
        '{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"\u00e9","b":true},"delta":1}',  # str, not bytes
        '{"relation":"e","row":{},"delta":1}',
        '{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"\ud800","b":true},"delta":1}',  # a lone surrogate
        bytearray(b'{"relation":"e","row":{},"delta":1}'),
        memoryview(b'{"relation":"e","row":{},"delta":1}'),
    ],
)
def test_raw_values_agree(value: Any) -> None:
    """Values that are not canonical JSON at all: declined by C, and the same verdict every way."""
    check_batch(PLAIN, [value])


# --- explicit edge cases ------------------------------------------------------------------------------

# One relation per column type, each with the single column "v", and a key field: one record per case.
TYPED = Schema.of(
    *(Relation(typ, (("v", typ),)) for typ in ("int", "float", "number", "str", "bool", "decimal", "exact")),
    Relation("u", (("a", "int"), ("b", "str"))),
    key_field="k",
)
CODECS[id(TYPED)] = (EventCodec(TYPED, compiled=True), EventCodec(TYPED, compiled=False))


def typed(typ: str, text: str, key: str = '"K"') -> bytes:
    return f'{{"relation":"{typ}","row":{{"v":{text},"k":{key}}},"delta":1}}'.encode()


def verdicts(schema: Schema, value: Any) -> tuple[Outcome, Outcome, Outcome]:
    """(compiled decode_many, pure decode_many, reference) outcomes of one value."""
    compiled, pure = codecs(schema)
    [c] = compiled.decode_many([value])
    [p] = pure.decode_many([value])
    return outcome(c), outcome(p), reference(pure, value)


def value_of(typ: str, v: Any, key: str = "K") -> Outcome:
    return accepted(typ, {"v": v}, 1, key)


# Beyond 64 bits (below -2**63 or above 2**64-1) orjson reads an integer as a float: the reference refuses it.
# (typ, JSON text, expected outcome)
NUMBER_CASES = [
    # 18 digits: the largest the C parser reads itself
    ("int", "999999999999999999", value_of("int", 999999999999999999)),
    ("int", "-999999999999999999", value_of("int", -999999999999999999)),
    ("float", "999999999999999999", value_of("float", 1e18)),
    ("number", "999999999999999999", value_of("number", 999999999999999999)),
    ("exact", "-999999999999999999", value_of("exact", -999999999999999999)),
    # 19 digits: declined, still 64-bit integers for the reference
    ("int", "1000000000000000000", value_of("int", 10**18)),
    ("int", "9223372036854775807", value_of("int", 2**63 - 1)),
    ("int", "-9223372036854775808", value_of("int", -(2**63))),
    ("int", "9223372036854775808", value_of("int", 2**63)),
    ("float", "9223372036854775808", value_of("float", float(2**63))),
    ("number", "-9223372036854775808", value_of("number", -(2**63))),
    ("exact", "9223372036854775808", value_of("exact", 2**63)),
    # 20 digits within 64 bits
    ("int", "18446744073709551615", value_of("int", 2**64 - 1)),
    ("int", "10000000000000000000", value_of("int", 10**19)),
    ("number", "10000000000000000000", value_of("number", 10**19)),
    ("exact", "18446744073709551615", value_of("exact", 2**64 - 1)),
    # beyond 64 bits: refused, never rounded to a float
    ("int", "-9223372036854775809", rejected("integer-out-of-range")),
    ("int", "18446744073709551616", rejected("integer-out-of-range")),
    ("int", "99999999999999999999", rejected("integer-out-of-range")),
    ("float", "99999999999999999999", rejected("integer-out-of-range")),
    ("number", "99999999999999999999", rejected("integer-out-of-range")),
    ("number", "-9223372036854775809", rejected("integer-out-of-range")),
    ("exact", "99999999999999999999", rejected("integer-out-of-range")),
    ("decimal", "99999999999999999999", rejected("integer-out-of-range")),
    ("decimal", "18446744073709551615", value_of("decimal", Decimal(2**64 - 1))),
    # signs and zeros
    ("int", "-0", value_of("int", 0)),
    ("float", "-0", value_of("float", 0.0)),  # the integer 0, as a float
    ("float", "-0.0", value_of("float", -0.0)),
    ("number", "-0", value_of("number", 0)),
    ("number", "-0.0", value_of("number", -0.0)),
    ("exact", "-0", value_of("exact", 0)),
    ("exact", "-0.0", value_of("exact", Decimal("-0.0"))),
    # exponents
    ("float", "1E5", value_of("float", 100000.0)),
    ("float", "1e-5", value_of("float", 1e-05)),
    ("float", "1.5e+3", value_of("float", 1500.0)),
    ("number", "1E5", value_of("number", 100000.0)),
    ("number", "1e-5", value_of("number", 1e-05)),
    ("number", "1.5e+3", value_of("number", 1500.0)),
    ("number", "1e0", value_of("number", 1.0)),
    ("float", "1e-400", value_of("float", 0.0)),
    ("float", "1e400", rejected("non-finite-number")),
    ("float", "1.7976931348623157e308", value_of("float", 1.7976931348623157e308)),
    ("float", "5e-324", value_of("float", 5e-324)),
    ("float", "2.4703282292062328e-324", value_of("float", 5e-324)),  # just above half the least subnormal
    ("float", "0.1000000000000000055511151231257827021181583404541015625", value_of("float", 0.1)),
    ("float", "9007199254740993.0", value_of("float", 9007199254740992.0)),  # a tie: to even
    # integers in float columns round as float(int)
    ("float", "3", value_of("float", 3.0)),
    ("float", "9007199254740993", value_of("float", float(2**53 + 1))),
    ("float", "-9007199254740995", value_of("float", float(-(2**53) - 3))),
    ("float", "123456789012345678", value_of("float", float(123456789012345678))),
    # exact: ints stay ints, the rest is a Decimal of what was written (via the fallback)
    ("exact", "7", value_of("exact", 7)),
    ("exact", "1.5", value_of("exact", Decimal("1.5"))),
    ("exact", "1E5", value_of("exact", Decimal("100000.0"))),
    ("exact", '"1.50"', value_of("exact", Decimal("1.50"))),
    ("exact", '"NaN"', rejected("wrong-type")),
    ("exact", "true", rejected("wrong-type")),
    ("decimal", "7", value_of("decimal", Decimal(7))),
    ("decimal", "0.1", value_of("decimal", Decimal("0.1"))),
    ("decimal", '"2.50"', value_of("decimal", Decimal("2.50"))),
    # not JSON numbers
    ("int", "01", rejected("malformed-json")),
    ("int", "-01", rejected("malformed-json")),
    ("float", "00.5", rejected("malformed-json")),
    ("number", "1.", rejected("malformed-json")),
    ("number", ".5", rejected("malformed-json")),
    ("number", "+1", rejected("malformed-json")),
    ("number", "1.e5", rejected("malformed-json")),
    ("number", "1e", rejected("malformed-json")),
    ("number", "-", rejected("malformed-json")),
    ("int", "0x10", rejected("malformed-json")),
    ("number", "NaN", rejected("non-finite-number")),
    ("float", "Infinity", rejected("non-finite-number")),
    # wrong JSON types
    ("int", "true", rejected("wrong-type")),
    ("int", "1.0", rejected("wrong-type")),
    ("int", '"1"', rejected("wrong-type")),
    ("float", "false", rejected("wrong-type")),
    ("number", "true", rejected("wrong-type")),
    ("bool", "1", rejected("wrong-type")),
    ("bool", "tru", rejected("malformed-json")),
    ("bool", "True", rejected("malformed-json")),
    ("bool", "true", value_of("bool", True)),
    ("str", "1", rejected("wrong-type")),
    ("str", "[]", rejected("wrong-type")),
    ("int", "null", rejected("null-value")),
    ("str", "null", rejected("null-value")),
    ("bool", "nul", rejected("malformed-json")),
    # strings
    ("str", '""', value_of("str", "")),
    ("str", '"a\\u0062"', value_of("str", "ab")),
    ("str", '"\\ud83d\\ude00"', value_of("str", "😀")),
    ("str", '"\\ud800"', rejected("invalid-utf8")),
    ("str", '"\\"\\\\\\/\\b\\f\\n\\r\\t"', value_of("str", '"\\/\b\f\n\r\t')),
    ("str", '"\x7f"', value_of("str", "\x7f")),
    ("str", '"\t"', rejected("malformed-json")),  # a raw control character
    ("str", '"\\x41"', rejected("malformed-json")),
]


@pytest.mark.parametrize(("typ", "text", "expected"), NUMBER_CASES)
def test_column_value_edge_cases(typ: str, text: str, expected: Outcome) -> None:
    """Each column type on the literals where parsers differ: digits, signs, exponents, zeros, escapes."""
    value = typed(typ, text)
    c, p, r = verdicts(TYPED, value)
    assert r == expected, value
    assert c == r, value
    assert p == r, value


KEY_CASES = [
    ('"abc"', value_of("int", 1, "abc")),
    ('""', value_of("int", 1, "")),
    ('"\\u00e7"', value_of("int", 1, "ç")),
    ("12", value_of("int", 1, "12")),
    ("-0", value_of("int", 1, "0")),
    ("999999999999999999", value_of("int", 1, "999999999999999999")),
    ("-9223372036854775808", value_of("int", 1, "-9223372036854775808")),
    ("18446744073709551615", value_of("int", 1, "18446744073709551615")),
    ("18446744073709551616", rejected("integer-out-of-range")),  # orjson would read a float
    ("99999999999999999999", rejected("integer-out-of-range")),
    ("1.5", rejected("wrong-type")),
    ("1.0", rejected("wrong-type")),
    ("1e2", rejected("wrong-type")),
    ("true", rejected("wrong-type")),
    ("false", rejected("wrong-type")),
    ("null", rejected("wrong-type")),
    ("[1]", rejected("wrong-type")),
    ("01", rejected("malformed-json")),
]


@pytest.mark.parametrize(("key", "expected"), KEY_CASES)
def test_key_field_edge_cases(key: str, expected: Outcome) -> None:
    """The partition key: a string, or an integer as its decimal text; nothing else."""
    value = typed("int", "1", key)
    c, p, r = verdicts(TYPED, value)
    assert r == expected, value
    assert c == r, value
    assert p == r, value


def test_missing_key_and_key_only_row() -> None:
    """The key field is neither a column nor an extra: the C parser tracks it apart from the columns."""
    for value, expected in [
        (b'{"relation":"int","row":{"v":1},"delta":1}', rejected("missing-key")),
        (b'{"relation":"u","row":{"k":"a","a":1},"delta":1}', rejected("missing-column")),
        (
            b'{"relation":"u","row":{"b":"x","k":"a","a":-5},"delta":1}',
            accepted("u", {"a": -5, "b": "x"}, 1, "a"),
        ),
        (b'{"relation":"u","row":{"a":1,"b":"x","k":"a","z":1},"delta":1}', rejected("unexpected-column")),
    ]:
        c, p, r = verdicts(TYPED, value)
        assert c == p == r == expected, value


CANONICAL = b'{"relation":"u","row":{"a":12,"b":"x y","k":"K"},"delta":-3}'
CANONICAL_OUTCOME = accepted("u", {"a": 12, "b": "x y"}, -3, "K")


def with_whitespace(ws: bytes) -> bytes:
    """CANONICAL with ``ws`` around every token (but not inside strings)."""
    parts = re.split(rb'("(?:[^"\\]|\\.)*")', CANONICAL)  # odd indexes: the strings
    out = [
        part if i % 2 else re.sub(rb"([{}\[\]:,])", lambda m: ws + m[1] + ws, part)
        for i, part in enumerate(parts)
    ]
    return ws + ws.join(out) + ws


@pytest.mark.parametrize("ws", [b" ", b"\t", b"\n", b"\r", b"\r\n", b" \t\n\r  "])
def test_whitespace_everywhere(ws: bytes) -> None:
    """JSON whitespace between any two tokens changes nothing, and the C parser skips it itself."""
    value = with_whitespace(ws)
    assert value.count(ws) >= 10 and orjson.loads(value) == orjson.loads(CANONICAL)
    c, p, r = verdicts(TYPED, value)
    assert c == p == r == CANONICAL_OUTCOME, value
    recorder = Recorder(codecs(TYPED)[1])
    codec_module._compiled_decoder(TYPED, recorder).decode_grouped([value])
    assert recorder.declined == []


@pytest.mark.parametrize("ws", [b"\x0b", b"\x0c", b"\xc2\xa0", b"\x00"])
def test_non_json_whitespace_is_malformed(ws: bytes) -> None:
    """Vertical tab, form feed, NBSP and NUL are not JSON whitespace anywhere."""
    for value in (ws + CANONICAL, CANONICAL + ws, CANONICAL.replace(b":12", b":" + ws + b"12")):
        c, p, r = verdicts(TYPED, value)
        assert c == p == r == rejected("malformed-json"), value


@pytest.mark.parametrize(
    "value",
    [
        CANONICAL + b"x",
        CANONICAL + b"}",
        CANONICAL + b",",
        CANONICAL + b" {}",
        CANONICAL + b"1",
        CANONICAL + CANONICAL,
        CANONICAL.replace(b',"k":"K"}', b',"k":"K",}'),  # trailing comma in the row
        CANONICAL.replace(b"-3}", b"-3,}"),  # trailing comma in the event
        CANONICAL.replace(b"{", b"{,", 1),
        CANONICAL.replace(b'"a":12', b'"a"12'),
        CANONICAL.replace(b'"a":12', b'"a"::12'),
        CANONICAL.replace(b'"a":12', b"a:12"),
        CANONICAL.replace(b'"a":12', b"'a':12"),
        CANONICAL[:-1],
        CANONICAL[:-2] + b"}",
    ],
)
def test_malformed_records_are_rejected(value: bytes) -> None:
    """Trailing garbage, trailing commas and broken syntax: the C parser must not stop early and accept."""
    c, p, r = verdicts(TYPED, value)
    assert c == p == r == rejected("malformed-json"), value


def test_trailing_whitespace_is_fine() -> None:
    """Only whitespace may follow the object (Kafka producers often end records with a newline)."""
    c, p, r = verdicts(TYPED, CANONICAL + b" \n\t\r")
    assert c == p == r == CANONICAL_OUTCOME


@pytest.mark.parametrize(
    "value",
    [
        CANONICAL.replace(b'"u"', b'"\\u0075"'),  # the relation name escaped
        CANONICAL.replace(b'"relation"', b'"\\u0072elation"'),  # a member name escaped
        CANONICAL.replace(b'"a":', b'"\\u0061":'),  # a column name escaped
        CANONICAL.replace(b'"k":', b'"\\u006b":'),  # the key field's name escaped
        CANONICAL.replace(b'"K"', b'"\\u004b"'),  # the key escaped
        CANONICAL.replace(b'"x y"', b'"x\\u0020y"'),
    ],
)
def test_escapes_decode_like_plain_text(value: bytes) -> None:
    """An escaped name or value is declined by C and then accepted by the fallback with the same result."""
    c, p, r = verdicts(TYPED, value)
    assert c == p == r == CANONICAL_OUTCOME, value


@pytest.mark.parametrize("escaped", ['"\\u00e7"', '"\\u00E7"', '"ç"'])
def test_non_ascii_relation_and_column_names(escaped: str) -> None:
    """A non-ASCII relation or column name matches as UTF-8 bytes, escaped (json.dumps' default) or not."""
    value = ('{"relation":' + escaped + ',"row":{"\\u00f1":2,"k":"K"},"delta":1}').encode()
    c, p, r = verdicts(KEYED, value)
    assert c == p == r == accepted("ç", {"ñ": 2.0}, 1, "K"), value
    # json.dumps escapes non-ASCII by default, orjson writes UTF-8: the same event either way
    doc = {"relation": "é", "row": {"ü": 5, "s": "ça"}, "delta": 1}
    for text in (json.dumps(doc).encode(), orjson.dumps(doc), json.dumps(doc, ensure_ascii=False).encode()):
        c, p, r = verdicts(PLAIN, text)
        assert c == p == r == accepted("é", {"ü": 5, "s": "ça"}), text
    # a decomposed ç (c + combining cedilla) is another name
    c, p, r = verdicts(KEYED, value.replace(escaped.encode(), '"c\u0327"'.encode()))
    assert c == p == r == rejected("unknown-relation")


def members(*parts: bytes) -> bytes:
    return b"{" + b",".join(parts) + b"}"


REL = b'"relation":"u"'
ROW = b'"row":{"a":1,"b":"","k":"K"}'
ONE = b'"delta":1'
ROW_OUTCOME = accepted("u", {"a": 1, "b": ""}, 1, "K")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (members(ROW, REL, ONE), ROW_OUTCOME),
        (members(ONE, b'"row":{"b":"","k":"K","a":1}', REL), ROW_OUTCOME),
        (members(b'"delta":2', REL, ROW), accepted("u", {"a": 1, "b": ""}, 2, "K")),
        # duplicates: the last one wins
        (members(b'"relation":"int"', REL, ROW, ONE), ROW_OUTCOME),
        (members(REL, ROW, b'"relation":"int"', ONE), rejected("missing-column")),
        (members(REL, ROW, ONE, b'"delta":0'), rejected("zero-delta")),
        (members(REL, ROW, b'"delta":0', b'"delta":5'), accepted("u", {"a": 1, "b": ""}, 5, "K")),
        (members(REL, ROW, b'"row":{"a":2,"b":"","k":"L"}', ONE), accepted("u", {"a": 2, "b": ""}, 1, "L")),
        (members(REL, b'"row":{"a":"x","a":1,"b":"","k":"K"}', ONE), ROW_OUTCOME),
        (members(REL, b'"row":{"a":1,"a":"x","b":"","k":"K"}', ONE), rejected("wrong-type")),
        (members(REL, b'"row":{"a":1,"b":"","k":"K","k":7}', ONE), accepted("u", {"a": 1, "b": ""}, 1, "7")),
        (members(REL, b'"row":{"a":1,"b":"","k":"K","k":null}', ONE), rejected("wrong-type")),
        # members missing, unknown or of the wrong type
        (members(REL, ROW), rejected("missing-field")),
        (members(REL, ROW, ONE, b'"ts":1'), rejected("unknown-field")),
        (members(REL, b'"row":[]', ONE), rejected("not-an-object")),
        (members(b'"relation":"e"', ROW, ONE), rejected("unknown-relation")),
        (members(b'"relation":null', ROW, ONE), rejected("unknown-relation")),
        (members(REL, ROW, b'"delta":true'), rejected("bad-delta")),
        (members(REL, ROW, b'"delta":1.0'), rejected("bad-delta")),
        (members(REL, ROW, b'"delta":"1"'), rejected("bad-delta")),
        (members(REL, ROW, b'"delta":-0'), rejected("zero-delta")),
        (members(REL, ROW, b'"delta":99999999999999999999'), rejected("integer-out-of-range")),
        (members(REL, ROW, b'"delta":-9223372036854775809'), rejected("integer-out-of-range")),
        (members(REL, ROW, b'"delta":-9223372036854775808'), accepted("u", {"a": 1, "b": ""}, -(2**63), "K")),
        (
            members(REL, ROW, b'"delta":18446744073709551615'),
            accepted("u", {"a": 1, "b": ""}, 2**64 - 1, "K"),
        ),
        (members(REL, ROW, b'"delta":999999999999999999'), accepted("u", {"a": 1, "b": ""}, 10**18 - 1, "K")),
    ],
)
def test_member_order_duplicates_and_shape(value: bytes, expected: Outcome) -> None:
    """Member order is free and a repeated name takes its last value (as orjson does); C declines both
    a row before its relation and any repeated name, so the fallback must get them right."""
    c, p, r = verdicts(TYPED, value)
    assert r == expected, value
    assert c == r, value
    assert p == r, value


@pytest.mark.parametrize(
    "value",
    [
        b'{"row":{"qty":1,"px":2,"sym":"x","cl\xc3\xa9":"a"},"delta":1}',
        b'{"delta":1,"row":{"qty":1,"px":2,"sym":"x","cl\xc3\xa9":"a"}}',
        b'{"row":{"qty":1,"px":2,"sym":"x","cl\\u00e9":"a"},"delta":1}',
    ],
)
def test_single_relation_schema_still_requires_the_relation_member(value: bytes) -> None:
    """With one relation there is nothing to choose, but a record without "relation" is still malformed."""
    c, p, r = verdicts(KEYED_UNICODE, value)
    assert r == rejected("missing-field")
    assert c == r, value
    assert p == r, value


def test_zero_column_relation() -> None:
    """A relation without columns: only ``{}`` (plus the key) is a valid row."""
    for schema, row, expected in [
        (PLAIN, b"{}", accepted("e", {})),
        (PLAIN, b" { } ", accepted("e", {})),
        (PLAIN, b'{"i":1}', rejected("unexpected-column")),
        (KEYED, b'{"k":"z"}', accepted("e", {}, 1, "z")),
        (KEYED, b"{}", rejected("missing-key")),
        (KEYED, b'{"k":"z","k":"y"}', accepted("e", {}, 1, "y")),
    ]:
        value = b'{"relation":"e","row":' + row + b',"delta":1}'
        c, p, r = verdicts(schema, value)
        assert c == p == r == expected, (value, schema.key_field)


def test_wide_relations_at_the_column_limit() -> None:
    """62 columns (plus the key) fit the C decoder's bit mask; 63 are declined; both decode correctly."""
    for width in (61, 62, 63, 64):
        rel = Relation("w", tuple((f"c{j}", "int") for j in range(width)))
        schema = Schema.of(rel, key_field="k")
        compiled = EventCodec(schema, compiled=True)
        row = {f"c{j}": j for j in range(width)}
        for value in (
            orjson.dumps({"relation": "w", "row": {**row, "k": "x"}, "delta": 1}),
            orjson.dumps({"relation": "w", "row": {"k": "x", **dict(reversed(row.items()))}, "delta": 1}),
            orjson.dumps({"relation": "w", "row": {**row, "c0": True, "k": "x"}, "delta": 1}),
            orjson.dumps({"relation": "w", "row": {**row}, "delta": 1}),
            orjson.dumps({"relation": "w", "row": {**row, "k": "x", "c999": 1}, "delta": 1}),
        ):
            [item] = compiled.decode_many([value])
            assert outcome(item) == reference(compiled, value), (width, value)
        canonical = orjson.dumps({"relation": "w", "row": {**row, "k": "x"}, "delta": 1})
        [item] = compiled.decode_many([canonical])
        assert outcome(item) == accepted("w", row, 1, "x")
        recorder = Recorder(compiled)
        codec_module._compiled_decoder(schema, recorder).decode_grouped([canonical])
        assert recorder.declined == ([] if width <= 62 else [canonical]), width


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
