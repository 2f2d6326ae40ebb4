"""The compiled ledger loop (services/vwap/_kernels.c) leaves exactly what its Python reference leaves
(services/vwap/kernels.py): the same bag and netted levels, in the same order, the same change log, the
same refusals and the same plan updates, on streams with deletes of absent tuples, non-positive
volumes, brokers out of range, unknown relations, multiplicities beyond 64 bits and exact decimals;
and an engine reaches the same state and answers on either loop."""

from __future__ import annotations

import copy
import subprocess
import sys
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.sdk import UpdateEvent
from ivmstream.services.vwap import engine as vwap_engine
from ivmstream.services.vwap import kernels

if kernels.compiled is None:  # never skipped: without the extension these tests fail, saying why
    pytest.fail(
        "the compiled vwap kernel ivmstream.services.vwap._kernels is not built. Build it with "
        "`make setup` (installs gcc and the Python headers if missing, then `pip install -e .` compiles "
        "services/vwap/_kernels.c), or, with a C compiler and the Python headers present, "
        "`.venv/bin/pip install -e .`",
        pytrace=False,
    )

C = kernels.compiled
COLUMNS = {rel: ("t", "id", "broker_id", "volume", "price") for rel in ("bids", "asks")}

# A small domain so tuples repeat and deletes hit live tuples; volumes of both signs and zero, ints
# beyond 64 bits and exact decimals; deltas of both signs beyond 64 bits too.
numbers = st.one_of(
    st.integers(-2, 6),
    st.sampled_from([2**64 + 1, 2**70, -(2**65)]),
    st.sampled_from([Decimal("1.5"), Decimal("2.50"), Decimal("-0.5"), Decimal("0")]),
)
deltas = st.one_of(st.integers(-3, 3), st.sampled_from([2**63, -(2**63) - 1, 2**70])).filter(bool)
rows = st.fixed_dictionaries(
    {
        "t": st.integers(0, 2),
        "id": st.integers(0, 2),
        "broker_id": st.integers(-1, 4),
        "volume": numbers,
        "price": numbers,
    }
)
events = st.lists(
    st.builds(UpdateEvent, st.sampled_from(["bids", "bids", "asks", "trades"]), rows, deltas), max_size=40
)


def run(loop: Any, evs: list[UpdateEvent], bag: Any, netted: Any, logged: bool, brokers: Any) -> Any:
    """Everything a run leaves and says, on its own copies of the bag and netted levels."""
    bag, netted = copy.deepcopy(bag), copy.deepcopy(netted)
    changed: set[Any] | None = set() if logged else None
    refused: list[Any] = []
    updates: list[Any] = []
    net = loop(
        evs,
        bag,
        COLUMNS,
        frozenset({"bids"}),
        netted,
        None if netted is not None else (lambda rel, row, d: updates.append((rel, dict(row), d))),
        changed,
        True,
        brokers,
        lambda i, ev, have: refused.append((i, ev.relation, have)),
    )
    levels = None if netted is None else {rel: list(lv.items()) for rel, lv in netted.items()}
    return net, {rel: list(ledger.items()) for rel, ledger in bag.items()}, levels, changed, refused, updates


@settings(max_examples=250, deadline=None)
@given(events, events, st.booleans(), st.booleans(), st.sampled_from([None, 3]))
def test_the_compiled_ledger_loop_leaves_what_the_python_loop_leaves(first, batch, netting, logged, brokers):
    # A bag left by an earlier batch, so deletes meet live tuples and tuples cancel to zero.
    bag: dict[str, dict[Any, int]] = {"bids": {}, "asks": {}}
    kernels.py_ledger_pass(first, bag, COLUMNS, frozenset(), None, None, None, False, None, lambda *a: None)
    netted = {"bids": {}} if netting else None
    want = run(kernels.py_ledger_pass, batch, bag, netted, logged, brokers)
    got = run(C.ledger_pass, batch, bag, netted, logged, brokers)
    assert got == want


def test_the_compiled_loop_raises_where_the_python_loop_raises():
    bad = [UpdateEvent("bids", {"t": 1, "id": 1, "broker_id": 0, "volume": 1}, 1)]  # no price column
    for loop in (kernels.py_ledger_pass, C.ledger_pass):
        with pytest.raises(KeyError):
            loop(bad, {"bids": {}}, COLUMNS, frozenset(), None, None, None, False, None, lambda *a: None)
    with pytest.raises(TypeError):
        C.ledger_pass([], {}, COLUMNS, frozenset(), None, None, [], True, None, print)  # changed: a list


def test_the_engine_uses_the_compiled_loop_unless_told_not_to():
    assert kernels.ACTIVE == "compiled" and kernels.ledger_pass is C.ledger_pass
    code = (
        "from ivmstream.services.vwap import kernels; "
        "print(kernels.ACTIVE, kernels.ledger_pass is kernels.py_ledger_pass)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"IVMSTREAM_PURE_PYTHON": "1"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["python", "True"]


# Order-book events as a plan takes them: positive prices (ints or decimals), volumes that are mostly
# valid, a few brokers, inserts and deletes.
book_rows = st.fixed_dictionaries(
    {
        "t": st.integers(0, 2),
        "id": st.integers(0, 2),
        "broker_id": st.integers(0, 3),
        "volume": st.one_of(st.integers(-1, 4), st.sampled_from([Decimal("1.5"), Decimal("0.25")])),
        "price": st.one_of(st.integers(1, 5), st.sampled_from([Decimal("2.5"), Decimal("4.75")])),
    }
)
book_batches = st.lists(
    st.lists(
        st.builds(UpdateEvent, st.sampled_from(["bids", "asks"]), book_rows, st.sampled_from([1, 1, -1, 2])),
        max_size=25,
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None)
@given(
    book_batches,
    st.sampled_from(["auto", "rpai", "crosscheck", "dbtoaster"]),
    st.sampled_from(["vwap", "vwap-paper", "mst"]),
)
def test_an_engine_reaches_the_same_state_on_either_loop(batches, strategy, query):
    if query == "mst" and strategy == "crosscheck":
        strategy = "rpai"
    engines = []
    for loop in (C.ledger_pass, kernels.py_ledger_pass):
        kernels_loop = kernels.ledger_pass
        kernels.ledger_pass = loop
        try:
            eng = vwap_engine.VwapEngine(query, strategy, {"brokers": 3} if query == "mst" else None)
            said = []
            for i, batch in enumerate(batches):
                if i == 2:
                    list(eng.all_entries())  # a checkpoint took the state: tuples are logged from here
                refusals = eng.apply(batch)
                said.append((list(refusals), eng.result()))
            engines.append((said, eng.snapshot(), sorted(eng.changed_entries())))
        finally:
            kernels.ledger_pass = kernels_loop
    assert engines[0] == engines[1]
