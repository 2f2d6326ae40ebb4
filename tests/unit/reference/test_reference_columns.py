"""The reference engine's columnar entry (``apply_columns``) against its per-event ``apply`` and a
brute-force multiset (the bag in memory: through the compiled batch update where its column types
allow): the same refusals (index, reason, detail), results, statistics of what was applied
and checkpoint entries, for every column type, with duplicates, deletes below zero, equal values written
differently ("1.5" and "1.50", 1 and 1.0) and batches of several relations; the bag kept in memory or read
through a store."""

from __future__ import annotations

from decimal import Decimal
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.engine import StoredMap
from ivmstream.events import Relation, Schema, UpdateEvent
from ivmstream.events.codec import EventCodec
from ivmstream.events.columns import event_columns
from ivmstream.services.reference.engine import BagEngine, member_hash, member_hashes
from tests.unit.reference.bag_oracle import brute

RELATIONS = {
    "r": {"a": "int", "p": "decimal", "f": "float", "n": "number", "x": "exact"},
    "s": {"b": "str", "ok": "bool"},
    "e": {},  # no columns: every event is the one empty tuple
    "d": {"a": "int", "p": "decimal", "b": "str"},  # types the compiled batch update (bag_rows) writes
}
CODEC = EventCodec(Schema.of(*(Relation.of(name, **cols) for name, cols in RELATIONS.items())))

r_rows = st.fixed_dictionaries(
    {
        "a": st.integers(0, 3),
        "p": st.sampled_from(["1.5", "1.50", "-0", "0", "2", "2.000", "0.25"]),
        "f": st.sampled_from([0.0, -0.0, 1.5, 2]),
        "n": st.sampled_from([1, 1.0, 2.5, 3]),
        "x": st.sampled_from([1, "1.0", "2.50", 7]),
    }
)
d_rows = st.fixed_dictionaries(
    {
        "a": st.integers(-2, 2),
        "p": st.sampled_from(["1.5", "1.50", "-0", "0", "2E+1", "20"]),
        "b": st.sampled_from("xy"),
    }
)
s_rows = st.fixed_dictionaries({"b": st.sampled_from("xyz"), "ok": st.booleans()})
deltas = st.sampled_from([1, 1, 1, 2, -1, -2])
raw_events: st.SearchStrategy[tuple[str, dict[str, Any], int]] = st.one_of(
    st.tuples(st.just("r"), r_rows, deltas),
    st.tuples(st.just("s"), s_rows, st.sampled_from([1, -1, 3])),
    st.tuples(st.just("e"), st.just({}), st.sampled_from([1, -1])),
    st.tuples(st.just("d"), d_rows, deltas),
)


def decoded(raw: list[tuple[str, dict, int]]) -> list[UpdateEvent]:
    """Events as the runtime gets them: through the codec (rows in schema order, typed values)."""
    return [CODEC.validate({"relation": rel, "row": row, "delta": d}) for rel, row, d in raw]


def batches_of(events: list[UpdateEvent], cuts: list[int]) -> list[list[UpdateEvent]]:
    bounds = sorted({c % (len(events) + 1) for c in cuts} | {0, len(events)})
    return [events[a:b] for a, b in pairwise(bounds)]


class DictStore:
    """One key's stored entries, as the runtime's store holds them after each checkpoint."""

    def __init__(self) -> None:
        self.entries: dict[bytes, bytes] = {}

    def stored_map(self) -> StoredMap:
        return StoredMap(self.entries.get, lambda: iter(list(self.entries.items())))

    def commit(self, changes: list) -> None:
        for map_name, key, value in changes:
            if map_name == "bag":
                if value is None:
                    self.entries.pop(key, None)
                else:
                    self.entries[key] = value


@settings(max_examples=150, deadline=None)
@given(
    st.lists(raw_events, max_size=40),
    st.lists(st.integers(0, 40), max_size=6),
    st.booleans(),
    st.sampled_from([None, 2]),
)
def test_columns_give_what_apply_gives_and_what_brute_force_says(raw, cuts, allow_negative, resident):
    events = decoded(raw)
    per_event = BagEngine(RELATIONS, allow_negative, resident)
    columnar = BagEngine(RELATIONS, allow_negative, resident)
    stores = (DictStore(), DictStore())
    if resident is not None:
        per_event.attach_stored_maps({"bag": stores[0].stored_map()})
        columnar.attach_stored_maps({"bag": stores[1].stored_map()})
    seen = 0
    refused: list[int] = []
    for batch in batches_of(events, cuts):
        want = per_event.apply(batch)
        got = columnar.apply_columns(event_columns(batch))
        assert got == want
        refused += [seen + r.index for r in got]
        seen += len(batch)
        assert columnar.result() == per_event.result()
        assert columnar.stats()["applied"] == per_event.stats()["applied"]
        entries = columnar.changed_entries(), per_event.changed_entries()
        assert sorted(entries[0], key=repr) == sorted(entries[1], key=repr)
        for store, changes in zip(stores, entries, strict=True):
            store.commit(changes)
        assert stores[0].entries == stores[1].entries
    bags, brute_refused = brute(events, RELATIONS) if not allow_negative else (None, [])
    assert refused == brute_refused
    if bags is not None:
        result = columnar.result()["relations"]
        for rel in RELATIONS:
            assert result[rel]["count"] == sum(bags[rel].values())
            assert result[rel]["distinct"] == sum(1 for m in bags[rel].values() if m)
        assert Decimal(result["r"]["sums"]["p"]) == sum(t[1] * m for t, m in bags["r"].items())
        assert Decimal(result["d"]["sums"]["p"]) == sum(t[1] * m for t, m in bags["d"].items())
        assert result["d"]["sums"]["a"] == sum(t[0] * m for t, m in bags["d"].items())
    assert sorted(columnar.all_entries()) == sorted(per_event.all_entries())


@given(st.lists(raw_events, min_size=1, max_size=20))
def test_member_keys_of_a_column_are_the_members_of_its_rows(raw):
    engine = BagEngine(RELATIONS)
    events = decoded(raw)
    for rel, part in event_columns(events).relations.items():
        rows = [tuple(events[i].row.values()) for i in part.positions]
        keys = engine.member_keys(rel, part.columns, len(part))
        assert keys == [engine.member(rel, row) for row in rows]
        assert member_hashes(keys) == [member_hash(k) for k in keys]
