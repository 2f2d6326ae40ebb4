"""State stores for engine state with atomic state+offset checkpoints."""

from __future__ import annotations

from pathlib import Path

from ivmstream.state.base import (
    CommitStats,
    FaultHook,
    PartitionCheckpoint,
    StateChanges,
    StateError,
    StateStore,
)
from ivmstream.state.envelope import Envelope, check_envelope, envelope_for
from ivmstream.state.memory import MemoryStore

BACKENDS = ("rocksdb", "redis", "memory")


def open_store(
    backend: str,
    namespace: str,
    *,
    state_dir: str | Path | None = None,
    redis_url: str | None = None,
    fault_hook: FaultHook | None = None,
) -> StateStore:
    """Open a backend by name; ``namespace`` separates services and consumer groups."""
    if backend == "memory":
        return MemoryStore()
    if backend == "rocksdb":
        from ivmstream.state.rocksdb import RocksDBStore

        return RocksDBStore(state_dir or "state", namespace, fault_hook=fault_hook)
    if backend == "redis":
        if not redis_url:
            raise StateError("the redis state backend needs --redis URL")
        from ivmstream.redis_client import connect
        from ivmstream.state.redis import RedisStore

        return RedisStore(connect(redis_url), namespace, fault_hook=fault_hook)
    raise StateError(f"unknown state backend {backend!r} (known: {', '.join(BACKENDS)})")


__all__ = [
    "BACKENDS",
    "CommitStats",
    "Envelope",
    "MemoryStore",
    "PartitionCheckpoint",
    "StateChanges",
    "StateError",
    "StateStore",
    "check_envelope",
    "envelope_for",
    "open_store",
]
