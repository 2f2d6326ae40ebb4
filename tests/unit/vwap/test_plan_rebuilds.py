"""What strategy ``auto`` rebuilds plans with (docs/vwap/algorithm.md §3.5, §6.5): the bulk build from
the live tuples gives the state that replaying them gives, and every plan counts the live domain
values its cost model reads exactly as the bag has them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ivmstream.services.vwap import auto
from ivmstream.services.vwap.engine import create_engine
from ivmstream.services.vwap.exact import exact_context
from ivmstream.services.vwap.plans import make_plan
from tests.unit.vwap.book_streams import book_events, op

BULK = ("mst", "psp", "sq1", "sq2")  # the rpai plans built from the live tuples rather than the levels


def live_book(query, ops, decimals):
    engine = create_engine(query, "recompute")
    engine.apply(book_events(ops, decimals=decimals, asks=True))
    return engine


def replayed(engine, strategy):
    plan = make_plan(engine.query, strategy, engine.params)
    with exact_context():
        for rel in engine.info.reads:
            cols = engine._columns[rel]
            for vals, m in engine.bag[rel].items():
                plan.update(rel, dict(zip(cols, vals, strict=True)), m)
    return plan


@pytest.mark.parametrize("query", BULK)
@given(ops=st.lists(op, max_size=60), decimals=st.booleans())
def test_a_bulk_build_holds_what_replaying_the_tuples_holds(query, ops, decimals):
    engine = live_book(query, ops, decimals)
    bulk = engine._build_plan("rpai", engine.bag, None)
    slow = replayed(engine, "rpai")
    with exact_context():
        assert bulk.result() == slow.result()
    for a, b in zip(bulk.trees(), slow.trees(), strict=True):
        a.check()
        assert list(a.items()) == list(b.items())
    assert bulk.domain() == slow.domain()


@pytest.mark.parametrize(
    ("query", "strategy"), [(q, s) for q in sorted(auto.MODELS) for s in auto.candidates(q)]
)
@given(ops=st.lists(op, max_size=60), decimals=st.booleans())
def test_every_candidate_counts_the_live_domain_values(query, strategy, ops, decimals):
    engine = live_book(query, ops, decimals)
    column = "volume" if query == "psp" else "price"
    want = {
        (rel, dict(zip(engine._columns[rel], vals, strict=True))[column])
        for rel in engine.info.reads
        for vals in engine.bag[rel]
    }
    assert replayed(engine, strategy).domain() == len(want)
    assert engine._build_plan(strategy, engine.bag, None).domain() == len(want)
