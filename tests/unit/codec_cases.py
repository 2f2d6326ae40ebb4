"""What the compiled decoder's tests share (test_codec_compiled*.py): outcomes compared type by type,
the schemas and their codecs, generated records in every legal serialization, and the batch check
that holds the compiled decoder, the pure Python one and the reference decoder to one verdict."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import strategies as st

from ivmstream.events import EventCodec, EventError, Relation, Schema, UpdateEvent
from ivmstream.events import codec as codec_module
from tests.unit.extension_checks import require_built

require_built(
    codec_module._fastjson,
    "event decoder",
    "ivmstream.events._fastjson",
    "shared/events/_fastjson*.c",
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


class Recorder:
    """A fallback that records what the C decoder declined, then decodes it as the codec would."""

    def __init__(self, codec: EventCodec) -> None:
        self.codec = codec
        self.declined: list[Any] = []

    def __call__(self, value: Any) -> UpdateEvent | EventError:
        self.declined.append(value)
        return self.codec._decode_declined(value)


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
