"""RocksDB state store (rocksdict): one database per input partition, committed with a WriteBatch.

One DB per partition (``<state_dir>/<namespace>/<topic>-<partition>``) lets workers sharing a
state volume hand partitions to each other on rebalance: the owner opens it on assignment and
closes it on revocation, and RocksDB's lock file guards against two owners at once. Keys follow
``ivmstream.state.base``'s layout, so one key's entries are one prefix scan.

Memory: every database a store opens shares one LRU block cache (data, index and filter blocks, so
the index of a growing state is charged to it too) and one write-buffer manager (all memtables), so a
worker's RocksDB memory is bounded by two sizes however many partitions it owns and however much they
store, rather than growing with both.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from rocksdict import BlockBasedOptions, Cache, Options, Rdict, WriteBatch, WriteBufferManager, WriteOptions

from ivmstream.engine import Entry
from ivmstream.state.base import (
    BROADCAST_OFFSET_KEY,
    ENTRY_PREFIX,
    ENVELOPE_KEY,
    OFFSET_KEY,
    ORIGINS_KEY,
    ROCKSDB_BLOCK_CACHE_MIB,
    ROCKSDB_WRITE_BUFFER_MIB,
    SNAPSHOT_PREFIX,
    CommitStats,
    FaultHook,
    PartitionCheckpoint,
    StateChanges,
    StateError,
    entry_key,
    entry_prefix,
    group_entries,
    split_entry_key,
)
from ivmstream.state.staging import stage_entries

MEMTABLE_BYTES = 8 << 20  # one memtable of one partition database; all of them share the write budget
MIB = 1 << 20


class RocksDBStore:
    name = "rocksdb"

    def __init__(
        self,
        state_dir: str | Path,
        namespace: str,
        sync: bool = False,
        fault_hook: FaultHook | None = None,
        *,
        block_cache_bytes: int = ROCKSDB_BLOCK_CACHE_MIB * MIB,
        write_buffer_bytes: int = ROCKSDB_WRITE_BUFFER_MIB * MIB,
    ) -> None:
        self.root = Path(state_dir) / namespace
        self.block_cache = Cache(block_cache_bytes)
        # allow_stall off: past the budget the manager flushes the largest memtables instead of blocking
        self.write_buffers = WriteBufferManager(write_buffer_bytes, False)
        self._dbs: dict[tuple[str, int], Rdict] = {}
        self._write_opts = WriteOptions()
        self._write_opts.sync = sync
        self._fault = fault_hook or (lambda _point: None)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"cannot create state directory {self.root}: {exc.strerror}") from None

    def _db(self, topic: str, partition: int) -> Rdict:
        db = self._dbs.get((topic, partition))
        if db is None:
            path = self.root / f"{topic}-{partition}"
            opts = self._options()
            deadline = time.monotonic() + 30.0
            while True:  # the previous owner may still be closing it during a rebalance
                try:
                    db = Rdict(str(path), opts)
                    break
                except Exception as exc:
                    if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                        raise StateError(f"cannot open RocksDB state at {path}: {exc}") from None
                    time.sleep(0.1)
            self._dbs[(topic, partition)] = db
        return db

    def set_memory(self, block_cache_bytes: int, write_buffer_bytes: int) -> None:
        """Resize the shared block cache and write budget (open databases included: they share both)."""
        self.block_cache.set_capacity(block_cache_bytes)
        self.write_buffers.set_buffer_size(write_buffer_bytes)

    def memory_usage(self) -> dict[str, int]:
        """Bytes the shared block cache holds (``pinned``: of them, blocks in use) and the memtables hold."""
        return {
            "block_cache": self.block_cache.get_usage(),
            "block_cache_pinned": self.block_cache.get_pinned_usage(),
            "write_buffers": self.write_buffers.get_usage(),
        }

    def _options(self) -> Options:
        """A partition database's options: its blocks and memtables are charged to the store's shared
        cache and write budget. Without them each database would keep its own 8 MiB cache, its index
        and filter blocks outside any cache (growing with its files), and 64 MiB memtables."""
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        table = BlockBasedOptions()
        table.set_block_cache(self.block_cache)
        table.set_cache_index_and_filter_blocks(True)
        table.set_pin_l0_filter_and_index_blocks_in_cache(True)  # the hottest files' index stays put
        opts.set_block_based_table_factory(table)
        opts.set_write_buffer_manager(self.write_buffers)
        opts.set_write_buffer_size(MEMTABLE_BYTES)
        opts.set_max_write_buffer_number(2)
        return opts

    @staticmethod
    def _scan(db: Rdict, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        for k, v in db.items(from_key=prefix):
            if not k.startswith(prefix):
                break
            yield k, v

    @staticmethod
    def _entry_keys(db: Rdict) -> Iterator[str]:
        """Each key with entries, once: after a key's first entry the iterator seeks past the key (a map
        name's bytes are UTF-8, never 0xff), so its entries are never read into Python."""
        it = db.iter()
        it.seek(ENTRY_PREFIX)
        while it.valid():
            k = it.key()
            if not k.startswith(ENTRY_PREFIX):
                break
            key = split_entry_key(k)[0]
            yield key
            it.seek(entry_prefix(key) + b"\xff")

    @staticmethod
    def _scan_skipping(db: Rdict, skip_maps: Collection[str]) -> Iterator[tuple[bytes, bytes]]:
        """Every ``e:`` entry except those of ``skip_maps``: on the first entry of a skipped map of a key
        the iterator seeks past that map, so its entries are never read into Python."""
        it = db.iter()
        it.seek(ENTRY_PREFIX)
        while it.valid():
            k = it.key()
            if not k.startswith(ENTRY_PREFIX):
                break
            _key, map_name, entry = split_entry_key(k)
            if map_name in skip_maps:
                it.seek(k[: len(k) - len(entry) - 1] + b"\x01")  # "<map>\0" + anything sorts below "<map>\1"
                continue
            yield k, it.value()
            it.next()

    def load(self, topic: str, partition: int, skip_maps: Collection[str] = ()) -> PartitionCheckpoint:
        db = self._db(topic, partition)
        raw = db.get(OFFSET_KEY)
        snapshots = {k[len(SNAPSHOT_PREFIX) :].decode(): v for k, v in self._scan(db, SNAPSHOT_PREFIX)}
        rows = self._scan_skipping(db, skip_maps) if skip_maps else self._scan(db, ENTRY_PREFIX)
        entries = group_entries(rows)
        broadcast = db.get(BROADCAST_OFFSET_KEY)
        return PartitionCheckpoint(
            int(raw) if raw is not None else None,
            snapshots,
            entries,
            db.get(ENVELOPE_KEY),
            int(broadcast) if broadcast is not None else None,
            db.get(ORIGINS_KEY),
        )

    def commit(
        self, topic: str, partition: int, offset: int, changes: StateChanges, envelope: bytes
    ) -> CommitStats:
        db = self._db(topic, partition)
        batch = WriteBatch(raw_mode=True)
        size = 0
        for key in changes.drop_snapshots:
            batch.delete(SNAPSHOT_PREFIX + key.encode())
        for key, snap in changes.snapshots.items():
            batch.put(SNAPSHOT_PREFIX + key.encode(), snap)
            size += len(snap)
        put, delete = batch.put, batch.delete
        for key, changed in changes.entries.items():  # each map's runs of puts in key order (staging)
            size += stage_entries(put, delete, entry_prefix(key), changed)
        batch.put(ENVELOPE_KEY, envelope)
        batch.put(OFFSET_KEY, str(offset).encode())
        if changes.broadcast_offset is not None:
            batch.put(BROADCAST_OFFSET_KEY, str(changes.broadcast_offset).encode())
        if changes.origins is not None:
            batch.put(ORIGINS_KEY, changes.origins)
        self._fault("checkpoint-staged")  # tests: a crash here must leave the previous checkpoint whole
        db.write(batch, self._write_opts)
        return CommitStats(size, changes.entry_count)

    def load_header(self, topic: str, partition: int) -> PartitionCheckpoint:
        db = self._db(topic, partition)
        raw, broadcast = db.get(OFFSET_KEY), db.get(BROADCAST_OFFSET_KEY)
        return PartitionCheckpoint(
            int(raw) if raw is not None else None,
            envelope=db.get(ENVELOPE_KEY),
            broadcast_offset=int(broadcast) if broadcast is not None else None,
            origins=db.get(ORIGINS_KEY),
        )

    def stored_keys(self, topic: str, partition: int) -> list[str]:
        """Snapshot keys and each key with entries."""
        db = self._db(topic, partition)
        keys = {k[len(SNAPSHOT_PREFIX) :].decode() for k, _v in self._scan(db, SNAPSHOT_PREFIX)}
        keys.update(self._entry_keys(db))
        return sorted(keys)

    def has_keys(self, topic: str, partition: int, keys: Sequence[str]) -> list[bool]:
        """One seek to the key's entry prefix, else a snapshot lookup, per key (entries first: the layout
        of incremental engines, the common one)."""
        db = self._db(topic, partition)
        it = db.iter()
        out = []
        for key in keys:
            prefix = entry_prefix(key)
            it.seek(prefix)
            if it.valid() and it.key().startswith(prefix):
                out.append(True)
            else:
                out.append(db.get(SNAPSHOT_PREFIX + key.encode()) is not None)
        return out

    def count_keys(self, topic: str, partition: int) -> int:
        """Snapshot keys, plus each key with entries and no snapshot (seeking past each key's entries)."""
        db = self._db(topic, partition)
        snapshots = sum(1 for _ in self._scan(db, SNAPSHOT_PREFIX))
        return snapshots + sum(1 for key in self._entry_keys(db) if SNAPSHOT_PREFIX + key.encode() not in db)

    def load_key(
        self, topic: str, partition: int, key: str, skip_maps: Collection[str] = ()
    ) -> tuple[bytes | None, list[Entry]]:
        db = self._db(topic, partition)
        entries = group_entries(self._scan(db, entry_prefix(key)), skip_maps).get(key, [])
        return db.get(SNAPSHOT_PREFIX + key.encode()), entries

    def get_entry(self, topic: str, partition: int, key: str, map_name: str, entry: bytes) -> bytes | None:
        """One stored entry, for maps an engine keeps in the store rather than in memory."""
        return self._db(topic, partition).get(entry_key(entry_prefix(key), map_name, entry))

    def scan_entries(
        self, topic: str, partition: int, key: str, map_name: str
    ) -> Iterator[tuple[bytes, bytes]]:
        """Every stored entry of one map of one key: one prefix scan."""
        prefix = entry_key(entry_prefix(key), map_name, b"")
        n = len(prefix)
        for k, v in self._scan(self._db(topic, partition), prefix):
            yield k[n:], v

    def size_bytes(self, topic: str, partition: int) -> int | None:
        db = self._db(topic, partition)
        try:
            live = db.property_int_value("rocksdb.estimate-live-data-size") or 0
            mem = db.property_int_value("rocksdb.cur-size-all-mem-tables") or 0
        except Exception:  # a property this RocksDB build does not offer
            return None
        return int(live) + int(mem)

    def release(self, topic: str, partition: int) -> None:
        db = self._dbs.pop((topic, partition), None)
        if db is not None:
            db.close()

    def close(self) -> None:
        for tp in list(self._dbs):
            self.release(*tp)
