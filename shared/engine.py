"""The Engine protocol every service's algorithm (and every baseline) implements.

Engines are pure: no Kafka, Redis, RocksDB or Spark. The runtime, ``replay``, benchmarks and oracle
tests all drive them through this one protocol, so an engine can be swapped for its baseline by name.
Engines must be deterministic: the same events in the same order give the same state, result and
snapshot (randomized engines seed their RNG from configuration and input position).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ivmstream.events import UpdateEvent
from ivmstream.events.columns import EventColumns
from ivmstream.events.encoding import json_bytes as json_bytes  # re-exported to services by the SDK

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


# One entry of an engine's incrementally checkpointed state: (map name, entry key, value); a value of
# None in a change list deletes the entry. Map names are short identifiers without NUL bytes.
Entry = tuple[str, bytes, bytes]
EntryChange = tuple[str, bytes, bytes | None]


@runtime_checkable
class IncrementalEngine(Protocol):
    """Optional: an engine whose state is named maps of byte entries, checkpointed by what changed.

    The runtime writes ``changed_entries()`` with the input offset in one atomic store write, so a
    checkpoint costs what changed since the previous one, not what is stored; a restart rebuilds the
    engine with ``restore_entries`` from a scan of everything stored. ``snapshot()``/``restore()`` stay
    (bootstrap, tests), and restoring either way must give the same engine.
    """

    def changed_entries(self) -> list[EntryChange]:
        """Entries put or deleted since the previous call (or since restore); the log then starts empty.

        Recording starts when a checkpoint takes the state: before its first ``changed_entries``,
        ``all_entries`` or ``restore_entries`` call an engine keeps no log (``replay``, benchmarks,
        bootstraps and workers checkpointing whole snapshots never call them, so nothing would read
        it), and it answers that first ``changed_entries`` with every entry (what it changed since it
        was empty). ``restore`` from a snapshot stops recording again. Between checkpoints the log holds
        at most one native record per changed entry; entries are encoded when a checkpoint takes them."""
        ...

    def all_entries(self) -> Iterator[Entry]:
        """Every entry of the current state (a first checkpoint, a bootstrap, a layout conversion)."""
        ...

    def restore_entries(self, entries: Iterable[Entry]) -> None:
        """Replace this (fresh) instance's state with the given entries, in any order."""
        ...


def is_incremental(engine: object) -> bool:
    return isinstance(engine, IncrementalEngine)


@runtime_checkable
class ColumnarEngine(Protocol):
    """Optional: an engine that also takes a batch as columns (``ivmstream.events.columns``).

    The runtime hands each key's batch to ``apply_columns`` instead of ``apply`` when the engine has it,
    so the engine can work on whole columns rather than on one event object at a time. It must leave
    the engine exactly as ``apply`` of the same events in the same order would (state, result,
    checkpoint entries) and refuse the same events with the same reasons; a ``Rejection`` names the
    event's index in the batch, as from ``apply``. ``replay`` and the per-event apply mode keep
    calling ``apply``.

    An engine whose class sets ``decimal_text = True`` takes a decimal column's values written as plain
    decimal strings as those strings (``ivmstream.events.columns.decode_columns``), each read exactly as
    ``Decimal()`` of it; the others in such a column are ``Decimal`` objects.
    """

    def apply_columns(self, batch: EventColumns) -> list[Rejection]:
        """Apply the batch's events in order; return the ones refused (each left the state unchanged)."""
        ...


_TAKES_COLUMNS: dict[type, bool] = {}


def columnar_entry(engine: object) -> Callable[[EventColumns], list[Rejection]] | None:
    """``engine``'s ``apply_columns``, or None when it takes events only. Asked of the engine's class
    once (the runtime asks per key and batch, and a failed attribute lookup costs more than a dict's)."""
    cls = type(engine)
    takes = _TAKES_COLUMNS.get(cls)
    if takes is None:
        takes = _TAKES_COLUMNS[cls] = callable(getattr(cls, "apply_columns", None))
    return engine.apply_columns if takes else None  # type: ignore[attr-defined]


def takes_decimal_text(engine: object) -> bool:
    """Whether ``engine`` takes a decimal column's plain decimal strings as text (``ColumnarEngine``)."""
    return getattr(type(engine), "decimal_text", False) is True


@runtime_checkable
class CountsPendingChanges(Protocol):
    """Optional, for an IncrementalEngine: how many records its change log holds (tests, benchmarks)."""

    def pending_changes(self) -> int:
        """Records kept for the next ``changed_entries``: 0 until a checkpoint has taken the state, and
        at most one per entry changed since the last checkpoint."""
        ...


class StoredMap(NamedTuple):
    """Read access to one map of one key as last checkpointed, bound by the runtime to its state store.

    Engines stay pure: they see two callables, never a store. ``get`` answers one entry (None: absent);
    ``scan`` yields every stored entry of the map (for ``snapshot()`` and ``all_entries()``)."""

    get: Callable[[bytes], bytes | None]
    scan: Callable[[], Iterator[tuple[bytes, bytes]]]


@runtime_checkable
class StoreBackedEngine(Protocol):
    """Optional, for an IncrementalEngine: maps it keeps in the state store instead of in memory.

    A key's state may then outgrow what one process wants to hold: the engine reads those maps
    through ``StoredMap`` (keeping a bounded cache) and still reports their puts and deletes in
    ``changed_entries()``. The runtime does not load those maps on restore; it calls
    ``attach_stored_maps`` on each new engine before ``restore_entries`` or ``apply``. Read-through is
    exactly-once because the store holds exactly the last checkpoint and the engine keeps every entry
    changed since then in memory until ``changed_entries()`` hands it out (the runtime commits those
    before the next ``apply``). An engine never attached (replay, tests, bootstrap, the snapshot layout)
    keeps everything in memory.
    """

    def store_backed_maps(self) -> Collection[str]:
        """Names of the maps read through the store (empty: none, everything stays resident)."""
        ...

    def attach_stored_maps(self, maps: Mapping[str, StoredMap]) -> None:
        """Read each named map through the store from now on (called once, on a fresh engine)."""
        ...


def store_backed_maps(engine: object) -> frozenset[str]:
    """The maps ``engine`` wants kept in the store (none for engines without the protocol)."""
    if isinstance(engine, StoreBackedEngine) and isinstance(engine, IncrementalEngine):
        return frozenset(engine.store_backed_maps())
    return frozenset()


class EngineStats(Protocol):
    """Optional: engines that report numeric gauges (sizes, thresholds, work) for Prometheus."""

    def stats(self) -> Mapping[str, float]: ...


class EngineError(ValueError):
    """An engine was configured or restored with something it cannot use."""
