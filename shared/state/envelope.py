"""The checkpoint envelope: who wrote a partition's stored state, checked before it is restored.

State written by another service, another engine configuration (strategy, query, mode ...), an older
state version of the service or another store layout cannot be restored correctly: a worker given
such state refuses to start with one line naming both sides, instead of running on wrong state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ivmstream.state.base import StateError

LAYOUT = 2  # 1: whole snapshots only, no envelope; 2: envelope, snapshots and incremental entries


@dataclass(frozen=True)
class Envelope:
    service: str
    state_version: int
    options: Mapping[str, Any]  # the service's own options: they decide what the state means
    state_layout: str = "incremental"  # or "snapshot" (config key state_layout)
    layout: int = LAYOUT
    # a sharded query's partition: {"shard_by": variable, "shards": input partitions}; the state is the
    # slice of those shards, so it means nothing under another variable or partition count
    sharding: Mapping[str, Any] | None = None

    def to_bytes(self) -> bytes:
        body = {
            "service": self.service,
            "state_version": self.state_version,
            "options": self.options,
            "state_layout": self.state_layout,
            "layout": self.layout,
        }
        if self.sharding is not None:  # absent otherwise: unsharded envelopes keep their bytes
            body["sharding"] = self.sharding
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS, default=str)

    def describe(self) -> str:
        opts = ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.options.items()))
        shards = ""
        if self.sharding is not None:
            shards = f"; sharded by {self.sharding.get('shard_by')} over {self.sharding.get('shards')}"
        return (
            f"{self.service} state v{self.state_version} ({opts}; {self.state_layout} layout {self.layout}"
            f"{shards})"
        )

    @classmethod
    def parse(cls, raw: bytes) -> Envelope:
        try:
            body = orjson.loads(raw)
            return cls(
                body["service"],
                int(body["state_version"]),
                body["options"],
                body["state_layout"],
                int(body["layout"]),
                body.get("sharding"),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise StateError(f"unreadable checkpoint envelope {raw[:80]!r}") from None


def _short(v: Any) -> str:
    text = orjson.dumps(v, option=orjson.OPT_SORT_KEYS, default=str).decode()
    return text if len(text) <= 60 else text[:57] + "..."


def envelope_for(
    service: Any,
    options: Mapping[str, Any],
    state_layout: str = "incremental",
    sharding: Mapping[str, Any] | None = None,
) -> Envelope:
    """The envelope a worker of ``service`` with these (validated) options writes and expects: the
    options that decide what the state means, not tuning knobs declared with ``Option(state=False)``;
    ``sharding`` for a partition of a sharded query (see ``Envelope.sharding``)."""
    declared = getattr(service, "options", {})
    meaning = {k: v for k, v in options.items() if k not in declared or declared[k].state}
    canonical = orjson.loads(orjson.dumps(meaning, option=orjson.OPT_SORT_KEYS, default=str))
    return Envelope(service.name, service.state_version, canonical, state_layout, sharding=sharding)


def check_envelope(stored: bytes | None, expected: Envelope, where: str, has_state: bool) -> None:
    """Refuse state another engine wrote; state with no envelope at all predates layout 2."""
    if stored is None:
        if has_state:
            raise StateError(
                f"{where} holds state without a checkpoint envelope (written by an older ivmstream); "
                f"this worker runs {expected.describe()}: bootstrap into a new --state-dir/--group"
            )
        return
    if stored == expected.to_bytes():
        return
    theirs = Envelope.parse(stored)
    if theirs != expected:
        raise StateError(
            f"{where} holds {theirs.describe()}, but this worker runs {expected.describe()}: "
            "use the config that wrote it, or a new --group/--state-dir"
        )
