"""A partition keeping at most ``resident_keys`` engines (shared/runtime/partition.py) behaves as one that
keeps them all: after random batches over many keys, checkpoints and evictions, every key's result and
state equal an unbounded partition's, dirty engines are never dropped, and at most ``resident_keys``
engines remain after each checkpoint."""

from __future__ import annotations

import random
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.config import resolve_options
from ivmstream.engine import is_incremental
from ivmstream.events import UpdateEvent
from ivmstream.runtime.partition import PartitionState
from ivmstream.services.reference.service import SERVICE as REFERENCE
from ivmstream.services.triangles.service import SERVICE as TRIANGLES
from ivmstream.state import MemoryStore, PartitionCheckpoint
from ivmstream.state.envelope import Envelope

ENV = Envelope("test", 1, {}).to_bytes()


def item(rng: random.Random, delta: int | None = None) -> UpdateEvent:
    return UpdateEvent(
        "items",
        {"item": rng.choice("abcde"), "qty": rng.randint(1, 9), "price": Decimal(rng.randint(1, 99)) / 10},
        rng.choice([1, 1, 1, -1]) if delta is None else delta,
    )


def edge(rng: random.Random) -> UpdateEvent:
    a, b = rng.sample(range(6), 2)
    return UpdateEvent("E", {"src": a, "dst": b}, 1)


CASES: dict[str, tuple[Any, dict[str, Any], Callable[[random.Random], UpdateEvent]]] = {
    "reference": (REFERENCE, {"allow_negative": True}, item),
    "triangles": (TRIANGLES, {"mode": "graph", "strategy": "ivm-eps"}, edge),
}


def partition(service, options, store: MemoryStore, bound: int | None, layout: bool) -> PartitionState:
    if bound is None:
        cp = store.load("in", 0)
        return PartitionState("in", 0, lambda: service.engine(options), cp, incremental=layout)
    return PartitionState(
        "in",
        0,
        lambda: service.engine(options),
        store.load_header("in", 0),
        incremental=layout,
        loader=store,
        resident_keys=bound,
    )


@pytest.mark.parametrize("case", sorted(CASES))
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    bound=st.integers(1, 4),
    keys=st.integers(1, 12),
    incremental=st.booleans(),
    restarts=st.lists(st.integers(0, 9), max_size=2),
)
def test_a_bounded_partition_equals_an_unbounded_one(case, seed, bound, keys, incremental, restarts):
    service, given_options, event = CASES[case]
    options = resolve_options(service, given_options)
    rng = random.Random(seed)
    bounded_store, full_store = MemoryStore(), MemoryStore()
    bounded = partition(service, options, bounded_store, bound, incremental)
    full = partition(service, options, full_store, None, incremental)
    for step in range(10):
        for _ in range(rng.randint(1, 3 * keys)):
            key = f"k{rng.randrange(keys)}"
            events = [event(rng) for _ in range(rng.randint(1, 3))]
            for state in (bounded, full):
                state.engine(key).apply(list(events))
                state.dirty.add(key)
        for store, state in ((bounded_store, bounded), (full_store, full)):
            store.commit("in", 0, step + 1, state.take_changes(), ENV)
        resident = len(bounded.engines)
        assert bounded.evict_idle() == max(0, resident - bound)  # none is dirty after a checkpoint
        assert len(bounded.engines) == min(bound, resident)
        assert bounded.key_count == len(full.engines)
        if step in restarts:  # a restarted worker: the bounded one reads keys on demand
            bounded = partition(service, options, bounded_store, bound, incremental)
            full = partition(service, options, full_store, None, incremental)
    assert bounded.results() == {k: e.result() for k, e in full.engines.items()}
    for key, engine in full.engines.items():
        mine = bounded.engine(key)
        if is_incremental(engine):
            assert sorted(mine.all_entries()) == sorted(engine.all_entries())  # type: ignore[attr-defined]
        else:
            assert mine.snapshot() == engine.snapshot()


def test_engines_changed_since_the_last_checkpoint_are_never_dropped():
    options = resolve_options(REFERENCE, {})
    store = MemoryStore()
    state = partition(REFERENCE, options, store, 1, True)
    rng = random.Random(1)
    for key in ("a", "b", "c"):
        state.engine(key).apply([item(rng, 1)])
        state.dirty.add(key)
    assert state.evict_idle() == 0 and len(state.engines) == 3  # nothing checkpointed yet
    store.commit("in", 0, 1, state.take_changes(), ENV)
    state.engine("a").apply([item(rng, 1)])
    state.dirty.add("a")
    assert state.evict_idle() == 2  # b and c, the clean ones; a changed since the checkpoint stays
    assert set(state.engines) == {"a"} and state.stored_only_keys() == ["b", "c"]
    assert state.key_count == 3 and state.all_keys() == ["a", "b", "c"]
    before = state.engine("b").result()  # read back from the store
    assert state.stored_only_keys() == ["c"] and before == state.results()["b"]
    assert state.key_count == 3 and state.has_state("c") and not state.has_state("d")


def test_the_store_is_asked_which_keys_it_holds_not_an_index():
    """The partition keeps no list of stored keys: a key is looked up in the store when first seen (in a
    batch via ``prefetch``), the count follows what the store holds, and a restarted partition counts the
    stored keys without loading them."""
    options = resolve_options(REFERENCE, {})  # a delete of an absent item is refused: no state
    store = MemoryStore()
    state = partition(REFERENCE, options, store, 1, True)
    rng = random.Random(2)
    for key, delta in (("empty", -1), ("a", 1), ("b", 1)):
        state.engine(key).apply([item(rng, delta)])
        state.dirty.add(key)
    store.commit("in", 0, 1, state.take_changes(), ENV)
    assert store.stored_keys("in", 0) == ["a", "b"]
    assert state.evict_idle() == 2 and list(state.engines) == ["b"]  # the least recently used go
    assert state.key_count == 2  # "empty" left nothing in the store, so it is not counted
    restarted = partition(REFERENCE, options, store, 1, True)
    assert restarted.key_count == 2 and not restarted.engines
    restarted.prefetch(["a", "new"])
    assert restarted.has_state("a") and not restarted.has_state("new") and restarted.key_count == 2
    assert restarted.engine("a").result() == state.results()["a"]
    restarted.engine("new")
    assert restarted.key_count == 3 and restarted.all_keys() == ["a", "b", "new"]


def test_the_cache_of_store_answers_is_bounded():
    options = resolve_options(REFERENCE, {})
    store = MemoryStore()
    state = PartitionState(
        "in",
        0,
        lambda: REFERENCE.engine(options),
        store.load_header("in", 0),
        loader=store,
        resident_keys=1,
        known_keys=5,
    )
    state.prefetch(f"k{i}" for i in range(50))
    assert len(state._known) == 5
    for i in range(50):
        assert not state.has_state(f"k{i}")
    assert len(state._known) == 5


def test_a_bound_without_a_store_that_reads_single_keys_is_refused():
    options = resolve_options(REFERENCE, {})
    with pytest.raises(ValueError, match="needs a store that loads single keys"):
        PartitionState("in", 0, lambda: REFERENCE.engine(options), PartitionCheckpoint(), resident_keys=3)
