"""RocksDB state store (rocksdict): one database per input partition, committed with a WriteBatch.

One DB per partition (``<state_dir>/<namespace>/<topic>-<partition>``) lets workers sharing a
state volume hand partitions to each other on rebalance: the owner opens it on assignment and
closes it on revocation, and RocksDB's lock file guards against two owners at once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from shared.state.base import PartitionCheckpoint, StateError

_OFFSET = b"\x00offset"
_SNAP = b"k:"


class RocksDBStore:
    name = "rocksdb"

    def __init__(self, state_dir: str | Path, namespace: str, sync: bool = False) -> None:
        self.root = Path(state_dir) / namespace
        self._dbs: dict[tuple[str, int], Rdict] = {}
        self._write_opts = WriteOptions()
        self._write_opts.sync = sync
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"cannot create state directory {self.root}: {exc.strerror}") from None

    def _db(self, topic: str, partition: int) -> Rdict:
        db = self._dbs.get((topic, partition))
        if db is None:
            path = self.root / f"{topic}-{partition}"
            opts = Options(raw_mode=True)
            opts.create_if_missing(True)
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

    def load(self, topic: str, partition: int) -> PartitionCheckpoint:
        db = self._db(topic, partition)
        raw = db.get(_OFFSET)
        snapshots = {}
        for k, v in db.items(from_key=_SNAP):
            if not k.startswith(_SNAP):
                break
            snapshots[k[len(_SNAP) :].decode()] = v
        return PartitionCheckpoint(int(raw) if raw is not None else None, snapshots)

    def commit(self, topic: str, partition: int, offset: int, changes: Mapping[str, bytes]) -> int:
        db = self._db(topic, partition)
        batch = WriteBatch(raw_mode=True)
        size = 0
        for key, snap in changes.items():
            batch.put(_SNAP + key.encode(), snap)
            size += len(snap)
        batch.put(_OFFSET, str(offset).encode())
        db.write(batch, self._write_opts)
        return size

    def release(self, topic: str, partition: int) -> None:
        db = self._dbs.pop((topic, partition), None)
        if db is not None:
            db.close()

    def close(self) -> None:
        for tp in list(self._dbs):
            self.release(*tp)
