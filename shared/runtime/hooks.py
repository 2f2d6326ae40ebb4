"""What a worker reports as it runs, for metrics, tests and benchmarks to attach to.

Each hook is a list of callables, called in order with one small record. A worker asks whether a list is
empty before building its record, so an unattached hook costs one truth test per batch (never a call
per input record): the hot loops stay as fast as with no hooks at all."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BatchApplied:
    """One consumed batch decoded, applied and published. ``broadcast``: read from a sharded query's
    broadcast topic rather than its input topic."""

    records: int
    applied: int
    published: int
    seconds: float
    broadcast: bool = False


@dataclass(frozen=True, slots=True)
class CheckpointWritten:
    """Outputs flushed and the changed partitions' state and offsets stored (``partitions`` of them: zero
    when nothing had changed since the last checkpoint)."""

    partitions: int
    bytes: int
    entries: int
    seconds: float


@dataclass(frozen=True, slots=True)
class PartitionsChanged:
    """Partitions taken (restored and positioned: ``seconds`` it took) or given up (checkpointed first
    unless ``lost``)."""

    topic: str
    partitions: tuple[int, ...]
    seconds: float = 0.0
    lost: bool = False


@dataclass(frozen=True, slots=True)
class RecordsRefused:
    """Records of ``topic:partition`` dead-lettered, how many per reason code."""

    topic: str
    partition: int
    counts: Mapping[str, int]


@dataclass
class Hooks:
    """A worker's sensors: append a callable to a list to be told of each such event."""

    batch_received: list[Callable[[int], None]] = field(default_factory=list)
    batch_applied: list[Callable[[BatchApplied], None]] = field(default_factory=list)
    checkpoint_written: list[Callable[[CheckpointWritten], None]] = field(default_factory=list)
    partitions_assigned: list[Callable[[PartitionsChanged], None]] = field(default_factory=list)
    partitions_revoked: list[Callable[[PartitionsChanged], None]] = field(default_factory=list)
    records_refused: list[Callable[[RecordsRefused], None]] = field(default_factory=list)


def fire(hooks: Sequence[Callable[[T], None]], record: T) -> None:
    """Call each of ``hooks`` with ``record``."""
    for hook in hooks:
        hook(record)
