"""DBToaster's TPC-H Q17a on the vwap plans (Q17's correlation with a SUM, no part selection).

Oracles: a literal evaluation over the live bag written here (Fractions), after every update of
small random streams with deletes, duplicates and cutoff ties; the three strategies agree with it.
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.sdk import UpdateEvent
from ivmstream.services.vwap.engine import VwapEngine
from ivmstream.services.vwap.exact import exact_context
from ivmstream.services.vwap.plans.tpch import make_tpch_plan, tpch_params
from tests.unit.vwap.test_vwap_tpch import OPS, Q17_QTY, drive, li, part, q17_insert

STRATS = ("recompute", "dbtoaster", "rpai")
FRACTIONS = (Fraction(1, 200), Fraction(1, 4), Fraction(1, 2), Fraction(1))


class Bag:
    """The live bag of lineitem and part, and Q17a evaluated on it literally."""

    def __init__(self, fraction: Fraction) -> None:
        self.fraction = fraction
        self.rows: dict[tuple[str, tuple[tuple[str, Any], ...]], int] = {}

    def update(self, rel: str, row: dict[str, Any], mult: int) -> None:
        key = (rel, tuple(sorted(row.items())))
        n = self.rows.get(key, 0) + mult
        if n:
            self.rows[key] = n
        else:
            del self.rows[key]

    def answer(self) -> Fraction:
        live = [(rel, dict(items), m) for (rel, items), m in self.rows.items()]
        lineitems = [(r, m) for rel, r, m in live if rel == "lineitem"]
        total = Fraction(0)
        for rel, p, pm in live:
            if rel != "part":
                continue
            inner = sum(
                (Fraction(l2["quantity"]) * m2 for l2, m2 in lineitems if l2["partkey"] == p["partkey"]),
                Fraction(0),
            )
            for item, lm in lineitems:
                if item["partkey"] == p["partkey"] and Fraction(item["quantity"]) < self.fraction * inner:
                    total += Fraction(item["extendedprice"]) * lm * pm
        return total


class Tee:
    def __init__(self, bag: Bag, plans: dict[str, Any]) -> None:
        self.bag, self.plans = bag, plans

    def update(self, rel: str, row: dict[str, Any], mult: int) -> None:
        self.bag.update(rel, row, mult)
        for p in self.plans.values():
            p.update(rel, row, mult)


def check(bag: Bag, plans: dict[str, Any]) -> Fraction:
    want = bag.answer()
    with exact_context():
        for strategy, p in plans.items():
            got = p.result()
            assert set(got) == {"sum_extendedprice"}, got
            assert Fraction(str(got["sum_extendedprice"])) == want, (strategy, got, want)
        for tree in plans["rpai"].trees():
            tree.check()
    return want


def make(fraction: Fraction) -> tuple[Bag, dict[str, Any]]:
    return Bag(fraction), {s: make_tpch_plan("q17a", s, {"fraction": fraction}) for s in STRATS}


@settings(max_examples=150, derandomize=True, database=None, deadline=None)
@given(ops=OPS, fraction=st.sampled_from(FRACTIONS))
def test_q17a_strategies_equal_the_literal_sql_after_every_update(
    ops: list[tuple[int, int, int]], fraction: Fraction
) -> None:
    bag, plans = make(fraction)
    tee = Tee(bag, plans)
    with exact_context():
        for _ in drive(ops, q17_insert, {"tee": tee}):
            check(bag, plans)


def test_q17a_has_no_part_selection_and_a_strict_cutoff_on_the_sum() -> None:
    bag, plans = make(Fraction(1, 2))
    tee = Tee(bag, plans)
    with exact_context():
        tee.update("part", part(1, brand="Brand#11", container="SM PKG"), 1)  # any part qualifies
        tee.update("lineitem", li(1, 2, 10), 1)
        tee.update("lineitem", li(1, 2, 20, ln=2), 1)  # Σqty 4: cutoff 2, strict: nothing qualifies
        assert check(bag, plans) == 0
        tee.update("lineitem", li(1, 1, 5, ln=3), 1)  # Σqty 5: cutoff 2.5, both 2s and the 1 qualify
        assert check(bag, plans) == 35
        tee.update("part", part(1, brand="Brand#11", container="SM PKG"), 1)  # a duplicate part doubles it
        assert check(bag, plans) == 70
        tee.update("lineitem", li(1, 2, 20, ln=2), -1)  # Σqty 3: cutoff 1.5, only the 1
        assert check(bag, plans) == 10


def test_q17a_params_and_engine() -> None:
    assert tpch_params("q17a") == {"fraction": Fraction(1, 200)}
    engine = VwapEngine("q17a", "rpai", {"fraction": Fraction(1, 2)})
    rng = random.Random(7)
    events = [UpdateEvent("part", part(pk), 1) for pk in (1, 2)]
    events += [
        UpdateEvent("lineitem", li(rng.choice((1, 2)), rng.choice(Q17_QTY), 3, ln=i), 1) for i in range(30)
    ]
    assert not engine.apply(events)
    bag = Bag(Fraction(1, 2))
    for ev in events:
        bag.update(ev.relation, dict(ev.row), ev.delta)
    assert Fraction(str(engine.plan.result()["sum_extendedprice"])) == bag.answer() > 0
