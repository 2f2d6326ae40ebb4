"""State round trips every fivm strategy must pass: restore mid-stream from a snapshot and from
shuffled entries, and checkpoints folded into a store equal the engine's entries."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.engine import FivmEngine
from tests.unit.entry_store import fold_changes


def check_restore_mid_stream(
    config: dict[str, Any], batches: Sequence[list[UpdateEvent]], cut: int, seed: int
) -> None:
    """An engine restored after ``batches[:cut]`` (from its snapshot, and from its entries in a shuffled
    order) continues exactly like the live one: refusals, results and snapshots after every batch."""
    live = FivmEngine(config)
    for batch in batches[:cut]:
        live.apply(batch)
    snap = live.snapshot()
    from_snapshot = FivmEngine(config)
    from_snapshot.restore(snap)
    entries = list(live.all_entries())
    random.Random(seed).shuffle(entries)
    from_entries = FivmEngine(config)
    from_entries.restore_entries(entries)
    assert from_snapshot.snapshot() == snap
    assert from_entries.snapshot() == snap
    assert from_entries.result() == live.result()
    for batch in batches[cut:]:
        want = live.apply(batch)
        assert from_snapshot.apply(batch) == want
        assert from_entries.apply(batch) == want
        assert from_snapshot.result() == live.result()
        assert from_entries.result() == live.result()
        assert from_entries.snapshot() == live.snapshot()


def check_checkpoints_fold(
    config: dict[str, Any], batches: Sequence[list[UpdateEvent]], checkpoint_after: Sequence[bool]
) -> None:
    """A store applying each checkpoint's puts and deletes (checkpoints after the batches marked True)
    holds exactly the engine's entries, and an engine restored from it equals the live one."""
    engine = FivmEngine(config)
    store: dict[tuple[str, bytes], bytes] = {}
    for batch, checkpoint in zip(batches, checkpoint_after, strict=True):
        engine.apply(batch)
        if not checkpoint:
            continue  # changes accumulate until the next checkpoint
        fold_changes(store, engine.changed_entries())
        assert store == {(n, k): v for n, k, v in engine.all_entries()}
        restored = FivmEngine(config)
        restored.restore_entries([(n, k, v) for (n, k), v in store.items()])
        assert restored.snapshot() == engine.snapshot()
        assert restored.result() == engine.result()
        assert restored.changed_entries() == list(restored._meta_entries())
