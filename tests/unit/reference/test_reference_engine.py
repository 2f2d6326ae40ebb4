"""The reference engine against a brute-force multiset (snapshot/restore is checked by the conformance
suite, as for every service)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.services.reference.engine import BagEngine
from tests.unit.reference.bag_oracle import brute

RELATIONS = {"r": {"a": "int", "p": "decimal"}, "s": {"b": "str"}}

events = st.lists(
    st.one_of(
        st.builds(
            lambda a, p, d: UpdateEvent("r", {"a": a, "p": Decimal(p) / 4}, d),
            st.integers(0, 3),
            st.integers(-8, 8),
            st.sampled_from([1, 1, 2, -1, -2]),
        ),
        st.builds(
            lambda b, d: UpdateEvent("s", {"b": b}, d), st.sampled_from("xyz"), st.sampled_from([1, -1, 3])
        ),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(events)
def test_matches_brute_force_after_every_update(evs):
    engine = BagEngine(RELATIONS)
    for n in range(1, len(evs) + 1):
        rejected = engine.apply(evs[n - 1 : n])
        bags, refused = brute(evs[:n], RELATIONS)
        assert [r.index for r in rejected] == ([0] if refused and refused[-1] == n - 1 else [])
        res = engine.result()
        for rel in ("r", "s"):
            assert res["relations"][rel]["count"] == sum(bags[rel].values())
            assert res["relations"][rel]["distinct"] == sum(1 for m in bags[rel].values() if m)
        assert res["relations"]["r"]["sums"]["a"] == sum(t[0] * m for t, m in bags["r"].items())
        assert Decimal(res["relations"]["r"]["sums"]["p"]) == sum(t[1] * m for t, m in bags["r"].items())
        assert engine.stats()["applied"] == n - len(refused)


def test_fingerprint_depends_on_the_bag_only():
    a, b = UpdateEvent("s", {"b": "x"}, 1), UpdateEvent("s", {"b": "y"}, 1)
    undo = UpdateEvent("s", {"b": "y"}, -1)
    prints = []
    for seq in ([a, b], [b, a], [a, b, b], [a, b, b, undo], [a]):
        e = BagEngine(RELATIONS)
        e.apply(seq)
        prints.append(e.result()["fingerprint"])
    assert prints[0] == prints[1] == prints[3]  # same bag, any order or history
    assert len({prints[0], prints[2], prints[4]}) == 3  # a duplicate or a loss changes it


def test_allow_negative_accepts_deletes_below_zero():
    e = BagEngine(RELATIONS, allow_negative=True)
    assert e.apply([UpdateEvent("s", {"b": "x"}, -2)]) == []
    assert e.result()["relations"]["s"]["count"] == -2
