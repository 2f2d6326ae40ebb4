"""A RocksDB store's memory is one block cache and one write budget shared by its partition databases:
reads of every partition land in the one cache, which stays within its capacity (plus blocks in use)
however much is read, a resize applies to open databases, and the shared write budget flushes
memtables long before a database's own 8 MiB memtable would fill. Contents always equal a dict."""

from __future__ import annotations

import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.state import StateChanges
from ivmstream.state.rocksdb import RocksDBStore

ENV = b"envelope"
KIB = 1 << 10
PARTITIONS = 3
KEYS = st.sampled_from([f"k{i}" for i in range(40)])


def fill(store: RocksDBStore, per_partition: int, seed: int) -> dict[tuple[int, str], bytes]:
    """``per_partition`` bytes of incompressible 1 KiB values per partition, in commits of 64 keys."""
    rng = random.Random(seed)
    model: dict[tuple[int, str], bytes] = {}
    for p in range(PARTITIONS):
        for start in range(0, per_partition // KIB, 64):
            snapshots = {f"k{i:06d}": rng.randbytes(KIB) for i in range(start, start + 64)}
            store.commit("in", p, start + 64, StateChanges(snapshots=snapshots), ENV)
            model.update({(p, k): v for k, v in snapshots.items()})
    return model


def read_all(store: RocksDBStore, p: int) -> dict[str, bytes]:
    return dict(store.load("in", p).snapshots)


def within_capacity(store: RocksDBStore, capacity: int) -> bool:
    used = store.memory_usage()
    return used["block_cache"] <= capacity + used["block_cache_pinned"]


def test_partitions_share_one_bounded_block_cache_and_a_resize_applies_to_open_databases(tmp_path):
    capacity = 256 * KIB
    store = RocksDBStore(tmp_path, "ns", block_cache_bytes=capacity, write_buffer_bytes=512 * KIB)
    model = fill(store, 2 << 20, seed=1)
    for p in range(PARTITIONS):
        store._db("in", p).flush()  # every value in files, so reads go through the block cache
    assert read_all(store, 0) == {k: v for (p, k), v in model.items() if p == 0}
    after_one = store.memory_usage()["block_cache"]
    assert after_one > 0 and within_capacity(store, capacity)

    store.set_memory(64 << 20, 512 * KIB)  # room for every partition's blocks
    for p in range(1, PARTITIONS):
        assert read_all(store, p) == {k: v for (q, k), v in model.items() if q == p}
    assert store.memory_usage()["block_cache"] > after_one + capacity  # the other databases' blocks joined

    store.set_memory(capacity, 512 * KIB)  # shrinking evicts from the one cache every database uses
    assert within_capacity(store, capacity)
    for p in range(PARTITIONS):  # 6 MiB read through a 256 KiB cache
        read_all(store, p)
        assert within_capacity(store, capacity)
    store.close()


def test_the_shared_write_budget_flushes_memtables_of_every_partition(tmp_path):
    budget = 512 * KIB
    store = RocksDBStore(tmp_path, "ns", write_buffer_bytes=budget)
    written = 4 << 20  # per partition: half of one database's own 8 MiB memtable, so no flush of its own
    fill(store, written, seed=2)
    dbs = [store._db("in", p) for p in range(PARTITIONS)]
    deadline = time.monotonic() + 60  # the flushes the budget asked for run in the background
    while any(db.property_int_value("rocksdb.mem-table-flush-pending") for db in dbs) or any(
        db.property_int_value("rocksdb.num-running-flushes") for db in dbs
    ):
        assert time.monotonic() < deadline, "flushes still pending after 60 s"
        time.sleep(0.05)
    in_files = [db.property_int_value("rocksdb.total-sst-files-size") for db in dbs]
    # each partition alone went past the shared budget, so each flushed to files (on its own it would not)
    assert all(size is not None and size > 0 for size in in_files)
    assert store.memory_usage()["write_buffers"] > 0
    store.close()


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, PARTITIONS - 1),
            st.dictionaries(KEYS, st.none() | st.binary(max_size=3000)),
        ),
        max_size=25,
    )
)
def test_tiny_budgets_keep_the_contents_of_a_dict(commits):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        store = RocksDBStore(d, "ns", block_cache_bytes=16 * KIB, write_buffer_bytes=32 * KIB)
        model: dict[int, dict[str, bytes]] = {p: {} for p in range(PARTITIONS)}
        for offset, (p, changes) in enumerate(commits):
            puts = {k: v for k, v in changes.items() if v is not None}
            drops = {k for k, v in changes.items() if v is None}
            store.commit("in", p, offset, StateChanges(snapshots=puts, drop_snapshots=drops), ENV)
            model[p].update(puts)
            for k in drops:
                model[p].pop(k, None)
        store.close()
        again = RocksDBStore(d, "ns", block_cache_bytes=16 * KIB, write_buffer_bytes=32 * KIB)
        assert {p: read_all(again, p) for p in range(PARTITIONS)} == model
        again.close()


def test_config_sizes_reach_the_store(tmp_path):
    from ivmstream.config import build_config
    from ivmstream.runtime import Worker
    from ivmstream.runtime.harness import InMemoryCluster
    from ivmstream.services.reference.service import SERVICE

    config = build_config(SERVICE, {"rocksdb_block_cache_mib": 1, "rocksdb_write_buffer_mib": 2})
    store = RocksDBStore(tmp_path, "ns")  # the defaults until the worker sizes it
    worker = Worker(SERVICE, config, InMemoryCluster(), store)
    assert store.write_buffers.get_buffer_size() == 2 << 20
    fill(store, 2 << 20, seed=3)
    for p in range(PARTITIONS):  # 6 MiB read through the configured 1 MiB
        store._db("in", p).flush()
        read_all(store, p)
        assert within_capacity(store, 1 << 20)
    worker.consumer.close()
    store.close()
