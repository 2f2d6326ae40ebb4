"""Store-backed maps through the partition runtime on every state backend: a reference engine whose bag
is read through the store with a tiny cache gives exactly the results, snapshots and checkpoint
contents of the fully resident one, after every batch and across random checkpoints and crashes; the
restore does not load the bag; and a store that cannot serve single entries is refused at start."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.config import build_config
from ivmstream.events import UpdateEvent
from ivmstream.runtime.partition import PartitionState, store_backing
from ivmstream.service import load_service
from ivmstream.services.reference.engine import BagEngine
from ivmstream.state import MemoryStore, StateError, StateStore
from tests.unit.reference.bag_oracle import brute

RELATIONS = {
    "r": {"a": "int", "p": "decimal"},
    "s": {"b": "str"},
    "n": {"x": "number", "e": "exact"},  # values equal in Python but written differently: one member
}
TOPIC, PART, ENVELOPE = "in", 0, b"{}"


def r_event(a: int, p: int, d: int) -> UpdateEvent:
    return UpdateEvent("r", {"a": a, "p": Decimal(p) / 4}, d)


def n_event(x: Any, e: Any, d: int) -> UpdateEvent:
    return UpdateEvent("n", {"x": x, "e": e}, d)


deltas = st.sampled_from([1, 1, 2, -1, -1, -2, 3])
events = st.one_of(
    st.builds(r_event, st.integers(0, 4), st.integers(-3, 3), deltas),
    st.builds(lambda b, d: UpdateEvent("s", {"b": b}, d), st.sampled_from("vwxyz"), deltas),
    st.builds(
        n_event,
        st.sampled_from([0, 0.0, -0.0, 1, 1.0, 2.5]),
        st.sampled_from([1, Decimal("1"), Decimal("1.0"), Decimal("1.5"), Decimal("1.50")]),
        deltas,
    ),
)
batches = st.lists(
    st.tuples(
        st.lists(st.tuples(st.sampled_from("kl"), events), min_size=1, max_size=8),
        st.sampled_from(["", "", "checkpoint", "checkpoint", "crash"]),
    ),
    max_size=25,
)


@contextmanager
def memory_store() -> Iterator[Callable[[], StateStore]]:
    store = MemoryStore()
    yield lambda: store


@contextmanager
def rocksdb_store() -> Iterator[Callable[[], StateStore]]:
    from ivmstream.state.rocksdb import RocksDBStore

    root = tempfile.mkdtemp(prefix="ivmstream-backed-")
    store = RocksDBStore(root, "t")
    try:
        yield lambda: store
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)


class Run:
    """One partition through ``PartitionState`` on one store, checkpointing and crashing as a worker does."""

    def __init__(self, store: StateStore, resident: int | None) -> None:
        self.store = store
        self.factory = lambda: BagEngine(RELATIONS, resident_entries=resident)
        self.backed = store_backing(store, self.factory(), incremental=True)
        self.state = self._restore()

    def _restore(self) -> PartitionState:
        cp = self.store.load(TOPIC, PART, skip_maps=self.backed)
        return PartitionState(
            TOPIC, PART, self.factory, cp, store=self.store if self.backed else None, backed=self.backed
        )

    def apply(self, batch: list[tuple[str, UpdateEvent]]) -> None:
        for key, ev in batch:
            self.state.engine(key).apply([ev])
            self.state.dirty.add(key)

    def checkpoint(self, offset: int) -> None:
        self.store.commit(TOPIC, PART, offset, self.state.take_changes(), ENVELOPE)
        self.state.committed_offset = offset

    def crash(self) -> int:
        """Everything since the last checkpoint is lost; the partition is restored from the store."""
        self.store.release(TOPIC, PART)
        self.state = self._restore()
        return self.state.committed_offset or 0

    def stored(self) -> dict[str, list[tuple[str, bytes, bytes]]]:
        return {k: sorted(v) for k, v in self.store.load(TOPIC, PART).entries.items()}


def check_backed_equals_resident(backed_store: StateStore, plan: list, cache: int) -> None:
    backed, resident = Run(backed_store, cache), Run(MemoryStore(), None)
    assert backed.backed == {"bag"} and resident.backed == frozenset()
    batches = [b for b, _ in plan]
    i = 0
    acts = {n: act for n, (_b, act) in enumerate(plan)}
    while i < len(batches):
        for run in (backed, resident):
            run.apply(batches[i])
        i += 1
        for key in backed.state.engines.keys() | resident.state.engines.keys():
            b, r = backed.state.engine(key), resident.state.engine(key)
            assert b.result() == r.result()
            assert sorted(b.all_entries()) == sorted(r.all_entries())
            assert b.bag.resident <= max(cache, b.bag.dirty)
            per_key = [ev for batch in batches[:i] for k, ev in batch if k == key]
            assert {rel: r.result()["relations"][rel]["distinct"] for rel in RELATIONS} == {
                rel: sum(1 for m in bag.values() if m) for rel, bag in brute(per_key, RELATIONS)[0].items()
            }
        act = acts.pop(i - 1, "")
        if act == "checkpoint":
            backed.checkpoint(i)
            resident.checkpoint(i)
            assert backed.stored() == resident.stored()
            for key, engine in backed.state.engines.items():
                assert engine.bag.resident <= cache  # after a checkpoint nothing is pinned
                assert engine.snapshot() == resident.state.engines[key].snapshot()
        elif act == "crash":
            i = backed.crash()
            assert resident.crash() == i
            for engine in backed.state.engines.values():
                assert engine.bag.resident == 0  # restored without loading the bag
    backed.checkpoint(len(batches) + 1)
    resident.checkpoint(len(batches) + 1)
    assert backed.stored() == resident.stored()
    for key, engine in resident.state.engines.items():
        assert backed.state.engine(key).snapshot() == engine.snapshot()


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
@settings(max_examples=60)
@given(plan=batches, cache=st.integers(2, 8))
def test_tiny_cache_equals_fully_resident_on_local_stores(backend, plan, cache):
    with {"memory": memory_store, "rocksdb": rocksdb_store}[backend]() as store:
        check_backed_equals_resident(store(), plan, cache)


@settings(max_examples=40)
@given(plan=batches, cache=st.integers(2, 8))
def test_tiny_cache_equals_fully_resident_on_redis(redis_server, plan, cache):
    import redis

    from ivmstream.state.redis import RedisStore

    client = redis.Redis.from_url(redis_server.url)
    try:
        check_backed_equals_resident(RedisStore(client, f"backed-{uuid.uuid4().hex[:10]}"), plan, cache)
    finally:
        client.close()


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_restore_reads_neither_the_bag_nor_more_than_it_touches(backend):
    with {"memory": memory_store, "rocksdb": rocksdb_store}[backend]() as make:
        store = make()
        run = Run(store, 3)
        run.apply([("k", UpdateEvent("s", {"b": f"t{i}"}, 1)) for i in range(50)])
        run.checkpoint(1)
        assert len(run.stored()["k"]) == 51  # 50 tuples and the aggregates
        cp = store.load(TOPIC, PART, skip_maps={"bag"})
        assert [m for m, _e, _v in cp.entries["k"]] == ["s"]
        run.crash()
        engine = run.state.engines["k"]
        assert engine.bag.resident == 0 and engine.result()["relations"]["s"]["distinct"] == 50
        engine.apply([UpdateEvent("s", {"b": "t7"}, -1)])
        assert engine.bag.misses == 1 and engine.bag.resident == 1


class SnapshotsOnly:
    """A store without single-entry reads."""

    name = "snapshots-only"

    def load(self, topic: str, partition: int, skip_maps: Any = ()) -> Any:
        raise AssertionError("not reached")


def test_a_store_that_cannot_read_entries_is_refused_at_start_in_one_line():
    from ivmstream.runtime import Worker
    from ivmstream.runtime.harness import InMemoryCluster

    service = load_service("reference")
    config = build_config(
        service, {"input_topic": "in", "output_topic": "out", "dlq_topic": "dlq", "resident_entries": 8}
    )
    with pytest.raises(StateError) as err:
        Worker(service, config, InMemoryCluster(), SnapshotsOnly())  # type: ignore[arg-type]
    assert "state store snapshots-only cannot back map bag" in str(err.value)
    assert "\n" not in str(err.value)
    resident = build_config(service, {"input_topic": "in", "output_topic": "out", "dlq_topic": "dlq"})
    assert store_backing(SnapshotsOnly(), service.engine(resident.options), incremental=True) == frozenset()  # type: ignore[arg-type]
