"""A ledger's checkpoint entries written in C (``kernels.compiled_bag_entries``) are byte for byte those
of the Python reference (``kernels.py_bag_entries``) and of a brute-force encoding of each tuple, for
every live tuple and for a change log with tuples no longer live (left out where they were not live at
the checkpoint either): ints at and beyond the edges of 64
bits, strings, booleans and exact decimals (which take the reference's encoding), multiplicities beyond
64 bits; and an engine restored from its entries holds the same ledger."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.sdk import UpdateEvent
from ivmstream.services.vwap import kernels
from ivmstream.services.vwap.engine import VwapEngine
from ivmstream.services.vwap.exact import to_json
from tests.unit.extension_checks import require_built

require_built(kernels.compiled, "vwap kernels", "ivmstream.services.vwap._kernels", "services/vwap/_*.c")

EDGES = [0, 1, -1, 2**30 - 1, 2**30, 2**62, 2**63 - 1, -(2**63), 2**63, 2**64 - 1]
ints = st.one_of(st.integers(-5, 300), st.sampled_from(EDGES), st.integers(-(2**63), 2**64 - 1))
values = st.one_of(
    ints,
    ints,
    st.text(max_size=4),
    st.booleans(),
    st.decimals(allow_nan=False, allow_infinity=False, places=2, min_value=-1000, max_value=1000),
)
tuples = st.lists(values, min_size=1, max_size=6).map(tuple)
ledgers = st.dictionaries(tuples, st.one_of(st.integers(1, 5), st.integers(2**63, 2**64 - 1)), max_size=30)
relations = st.sampled_from(["bids", "asks", 'r"\\é'])


def brute(rel: str, vals: tuple[Any, ...], m: int | None) -> tuple[str, bytes, bytes | None]:
    """The entry of one tuple, encoded here: a decimal as its exact JSON form (``exact.to_json``)."""
    shown = [to_json(v) if isinstance(v, Decimal) else v for v in vals]
    return "b", orjson.dumps([rel, *shown]), None if m is None else orjson.dumps(m)


@settings(max_examples=60, deadline=None)
@given(ledgers, relations, st.data())
def test_entries_equal_the_reference_and_brute_force(ledger: kernels.Ledger, rel: str, data: Any) -> None:
    every = kernels.compiled_bag_entries(ledger, rel, None)
    assert every == kernels.py_bag_entries(ledger, rel, None)
    assert every == [brute(rel, vals, m) for vals, m in ledger.items()]
    gone = data.draw(st.lists(tuples, max_size=5))
    order = data.draw(st.permutations(list(ledger) + gone))
    touched = {vals: data.draw(st.booleans()) for vals in order}  # live at the checkpoint or not
    changed = kernels.compiled_bag_entries(ledger, rel, touched)
    assert changed == kernels.py_bag_entries(ledger, rel, touched)
    expected = [brute(rel, vals, ledger.get(vals)) for vals, was in touched.items() if vals in ledger or was]
    assert changed == expected


def test_a_value_orjson_refuses_raises_as_in_the_reference() -> None:
    ledger = {(2**64, 1): 1}
    with pytest.raises(TypeError):
        kernels.py_bag_entries(ledger, "bids", None)
    with pytest.raises(TypeError):
        kernels.compiled_bag_entries(ledger, "bids", None)


def _events(stream: list[tuple[int, ...]]) -> list[UpdateEvent]:
    """Order-book events over few distinct tuples (the i-th event of every batch has id i, so tuples recur
    across batches and deletes hit live tuples and absent ones)."""
    return [
        UpdateEvent("bids", {"t": i, "id": i, "broker_id": 0, "volume": v, "price": p * 10**10}, d or 1)
        for i, (p, v, d) in enumerate(stream)
    ]


ops = st.lists(st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(-2, 2)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(ops, ops, ops)
def test_changed_entries_bring_the_stored_entries_to_the_state(
    first: list[tuple[int, ...]], second: list[tuple[int, ...]], third: list[tuple[int, ...]]
) -> None:
    """A checkpoint's entries changed by the next checkpoints' are the engine's entries then: no delete
    is missing (a tuple live at the previous checkpoint) and none is written for an entry the store
    does not hold (a tuple inserted and deleted in between)."""
    engine = VwapEngine("vwap", "rpai")
    engine.apply(_events(first))
    stored = {(m, k): v for m, k, v in engine.all_entries()}
    for batch in (second, third):
        engine.apply(_events(batch))
        changes = engine.changed_entries()
        for m, k, v in changes:
            if v is None:
                assert (m, k) in stored
                del stored[(m, k)]
            else:
                stored[(m, k)] = v
        assert len({(m, k) for m, k, _ in changes}) == len(changes)
        assert stored == {(m, k): v for m, k, v in engine.all_entries()}


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(-1, 2)), min_size=1, max_size=40))
def test_an_engine_restored_from_its_entries_holds_the_same_ledger(stream: list[tuple[int, ...]]) -> None:
    engine = VwapEngine("vwap", "rpai")
    engine.apply(_events(stream))
    entries = list(engine.all_entries())
    reference = [e for rel in sorted(engine.bag) for e in kernels.py_bag_entries(engine.bag[rel], rel, None)]
    assert entries == reference + engine._scalar_entries()
    restored = VwapEngine("vwap", "rpai")
    restored.restore_entries(entries)
    assert restored.bag == engine.bag
    assert restored.result() == engine.result()
