"""The Engine protocol every service's algorithm (and every baseline) implements.

Engines are pure: no Kafka, Redis, RocksDB or Spark. The runtime, ``replay``, benchmarks and oracle
tests all drive them through this one protocol, so an engine can be swapped for its baseline by name.
Engines must be deterministic: the same events in the same order give the same state, result and
snapshot (randomized engines seed their RNG from configuration and input position).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from shared.events import UpdateEvent

JSON = Any  # a value orjson can serialize


class Rejection(NamedTuple):
    """An event the engine refused (e.g. deleting an absent edge); it changed nothing."""

    index: int  # position within the batch passed to ``apply``
    code: str  # stable low-cardinality reason, used as a metrics label
    detail: str


@runtime_checkable
class Engine(Protocol):
    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        """Apply the events in order; return the ones refused (each left the state unchanged)."""
        ...

    def result(self) -> JSON:
        """The current query result, JSON-serializable."""
        ...

    def snapshot(self) -> bytes:
        """The full state, enough for ``restore`` on a fresh instance to continue identically."""
        ...

    def restore(self, data: bytes) -> None:
        """Replace this instance's state with a snapshot taken by the same engine class."""
        ...


class EngineStats(Protocol):
    """Optional: engines that report numeric gauges (sizes, thresholds, work) for Prometheus."""

    def stats(self) -> Mapping[str, float]: ...


class EngineError(ValueError):
    """An engine was configured or restored with something it cannot use."""
