"""The in-process checks: snapshot/restore at cut points, determinism across hash seeds, and refusals
that change nothing. They need only the service declaration and its workloads."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ivmstream.engine import CountsPendingChanges, Engine, Rejection, is_incremental
from ivmstream.events import UpdateEvent
from ivmstream.testing._cases import Case, child_environment, short

PROBE_SCALE = 1000  # a negated delta this many times larger deletes more copies than any workload holds


def _codes(rejections: Sequence[Rejection], offset: int = 0) -> list[tuple[int, str]]:
    return [(r.index + offset, r.code) for r in rejections]


def _assert_same_state(got: Engine, want: Engine, where: str) -> None:
    """Same result and same snapshot bytes, or an AssertionError saying which differs."""
    got_result, want_result = got.result(), want.result()
    if got_result != want_result:
        raise AssertionError(f"{where}: result {short(got_result)} != {short(want_result)}")
    got_snap, want_snap = got.snapshot(), want.snapshot()
    if got_snap != want_snap:
        at = next((i for i, (a, b) in enumerate(zip(got_snap, want_snap, strict=False)) if a != b), None)
        at = min(len(got_snap), len(want_snap)) if at is None else at
        raise AssertionError(
            f"{where}: snapshots differ at byte {at} of {len(got_snap)}/{len(want_snap)}: "
            f"{got_snap[max(0, at - 40) : at + 40]!r} != {want_snap[max(0, at - 40) : at + 40]!r}"
        )


def cut_points(n: int, count: int = 5) -> list[int]:
    """``count`` positions spread over ``0..n``, both ends included."""
    return sorted({n * i // (count - 1) for i in range(count)})


def check_snapshot_restore(case: Case, cuts: int = 5) -> int:
    """Per key, at each cut point: apply the events before it, snapshot, restore into a fresh engine
    and apply the rest; the result and final snapshot bytes equal those of an engine that applied the
    same two batches without stopping, and a restored engine snapshots to the bytes it was given.
    Returns the number of restores checked."""
    checked = 0
    for key, events in case.events_by_key().items():
        n = len(events)
        for cut in cut_points(n, cuts):
            where = f"{case}: key {key!r} restored after event {cut} of {n}"
            straight = case.engine()
            first = _codes(straight.apply(list(events[:cut])))
            rest = _codes(straight.apply(list(events[cut:])), cut)

            fresh = case.engine()
            before = _codes(fresh.apply(list(events[:cut])))
            snap = fresh.snapshot()
            restored = case.engine()
            restored.restore(snap)
            if restored.snapshot() != snap:
                raise AssertionError(f"{where}: snapshot -> restore -> snapshot changes the bytes")
            if restored.result() != fresh.result():
                raise AssertionError(f"{where}: the restored engine's result differs right after restore")
            after = _codes(restored.apply(list(events[cut:])), cut)
            if (before, after) != (first, rest):
                raise AssertionError(f"{where}: refusals differ: {before + after} != {first + rest}")
            _assert_same_state(restored, straight, where)
            if is_incremental(straight) and cut:
                _check_entries_restore(case, events, cut, where)
            checked += 1
    return checked


def _check_entries_restore(case: Case, events: Sequence[UpdateEvent], cut: int, where: str) -> None:
    """For an IncrementalEngine, the runtime's other checkpoint path: a full scan of the entries after
    the first batch, the changed entries after the second; a fresh engine rebuilt from what that stored
    is the same engine, and stays the same over the rest of the events."""
    half = cut // 2
    live: Any = case.engine()
    live.apply(list(events[:half]))
    live.changed_entries()  # a first checkpoint writes every entry instead
    stored = {(m, k): v for m, k, v in live.all_entries()}
    live.apply(list(events[half:cut]))
    for m, k, v in live.changed_entries():
        if v is None:
            stored.pop((m, k), None)
        else:
            stored[(m, k)] = v
    if stored != {(m, k): v for m, k, v in live.all_entries()}:
        raise AssertionError(f"{where}: the changed entries do not add up to the engine's entries")
    rebuilt: Any = case.engine()
    rebuilt.restore_entries([(m, k, v) for (m, k), v in stored.items()])
    _assert_same_entries(rebuilt, live, f"{where} (rebuilt from its changed entries)")
    rebuilt.apply(list(events[cut:]))
    live.apply(list(events[cut:]))
    _assert_same_entries(rebuilt, live, f"{where} (rebuilt from its changed entries, then the rest applied)")


def _assert_same_entries(got: Any, want: Any, where: str) -> None:
    """Same result and the same entries. Entries are restored in any order, so a snapshot's bytes
    (which may follow the order state was built in) are not compared on this path."""
    if got.result() != want.result():
        raise AssertionError(f"{where}: result {short(got.result())} != {short(want.result())}")
    mine, theirs = {(m, k): v for m, k, v in got.all_entries()}, {(m, k): v for m, k, v in want.all_entries()}
    if mine != theirs:
        differ = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        raise AssertionError(f"{where}: {len(differ)} entries differ, e.g. {short(differ[:3])}")


def state_digest(case: Case) -> dict[str, list[Any]]:
    """Per key: the final result (as published, JSON) and the SHA-256 of the final snapshot."""
    out: dict[str, list[Any]] = {}
    for key, events in sorted(case.events_by_key().items()):
        engine = case.engine()
        engine.apply(events)
        out[key] = [
            orjson.loads(orjson.dumps(engine.result())),
            hashlib.sha256(engine.snapshot()).hexdigest(),
        ]
    return out


def check_determinism(case: Case, env: Mapping[str, str] | None = None) -> None:
    """Two runs agree: one here and one in a child process with a different hash seed, so state that
    depends on set or dict iteration order of hashed strings shows up."""
    here = state_digest(case)
    child_env = {**child_environment(env), "PYTHONHASHSEED": str(_other_hash_seed())}
    proc = subprocess.run(
        [sys.executable, "-m", "ivmstream.testing", "digest", case.name, case.workload.name],
        capture_output=True,
        text=True,
        env=child_env,
        timeout=300,
    )
    if proc.returncode != 0:
        raise AssertionError(f"{case}: the second run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    there = json.loads(proc.stdout)
    if there.keys() != here.keys():
        raise AssertionError(f"{case}: keys differ between runs: {sorted(here)} != {sorted(there)}")
    for key in here:
        if here[key][0] != there[key][0]:
            raise AssertionError(
                f"{case}: key {key!r}: results differ between runs: {short(here[key][0])} != "
                f"{short(there[key][0])}"
            )
        if here[key][1] != there[key][1]:
            raise AssertionError(f"{case}: key {key!r}: snapshots differ between runs (hash seeds differ)")


def _other_hash_seed() -> int:
    own = os.environ.get("PYTHONHASHSEED", "")
    return 2 if own == "1" else 1


def probes(event: UpdateEvent) -> list[UpdateEvent]:
    """Well-formed events an engine may refuse, made from a workload event: the same event again (a
    duplicate insert), its undo, and its undo scaled far beyond any multiplicity the workload builds."""
    return [
        UpdateEvent(event.relation, dict(event.row), event.delta, event.key),
        UpdateEvent(event.relation, dict(event.row), -event.delta, event.key),
        UpdateEvent(event.relation, dict(event.row), -event.delta * PROBE_SCALE, event.key),
    ]


def probe_batch(
    events: Sequence[UpdateEvent], cut: int, window: int = 40, earlier: int = 20
) -> list[UpdateEvent]:
    """The next ``window`` events after ``cut``, each followed by its probes, after probes of up to
    ``earlier`` events spread over the ones already applied."""
    step = max(1, cut // earlier) if cut else 1
    batch = [p for ev in events[:cut:step] for p in probes(ev)]
    for ev in events[cut : cut + window]:
        batch.append(ev)
        batch += probes(ev)
    return batch


def check_rejections_change_nothing(case: Case) -> int:
    """Per key: apply the first half of the events, then a batch of workload events mixed with probes.
    Whatever the engine refused must have changed nothing: an engine given the same batch without the
    refused events accepts all of it and ends with the same result and snapshot bytes. Fails if no
    probe is refused for any key, since then nothing was checked. Returns the number of refusals."""
    refused = 0
    for key, events in case.events_by_key().items():
        cut = len(events) // 2
        where = f"{case}: key {key!r}, probes after event {cut} of {len(events)}"
        probed = case.engine()
        probed.apply(list(events[:cut]))
        rejections = probed.apply(probe_batch(events, cut))
        dropped = {r.index for r in rejections}
        for r in rejections:
            if not (isinstance(r.code, str) and r.code):
                raise AssertionError(f"{where}: refusal {r!r} has no reason code")

        clean = case.engine()
        clean.apply(list(events[:cut]))
        kept = [ev for i, ev in enumerate(probe_batch(events, cut)) if i not in dropped]
        again = clean.apply(kept)
        if again:
            raise AssertionError(
                f"{where}: without the refused events, the batch still had refusals {_codes(again)[:5]}: "
                "a refused event changed the state"
            )
        _assert_same_state(probed, clean, f"{where} ({len(rejections)} refused)")
        refused += len(rejections)
    if not refused:
        raise AssertionError(
            f"{case}: no probe (duplicate, undo or scaled undo of a workload event) was refused, so "
            "refusals were not checked; the workload should make some of these impossible"
        )
    return refused


def check_change_log(case: Case) -> int:
    """Per key, for an IncrementalEngine that counts its pending changes: it keeps none while no
    checkpoint has taken its state (``replay``); its first ``changed_entries`` is every entry; after
    more events the changes it hands out add up to its entries and leave it holding none. Returns the
    number of keys checked (0: the engine counts no pending changes, nothing to check)."""
    probe = case.engine()
    if not (is_incremental(probe) and isinstance(probe, CountsPendingChanges)):
        return 0
    checked = 0
    for key, events in case.events_by_key().items():
        engine: Any = case.engine()
        where = f"{case}: key {key!r}"
        half = len(events) // 2
        engine.apply(list(events[:half]))
        engine.apply(list(events[half:]))
        if engine.pending_changes():
            raise AssertionError(
                f"{where}: {engine.pending_changes()} changes logged after {len(events)} events with no "
                "checkpoint (nothing will read them)"
            )
        stored = {(m, k): v for m, k, v in engine.changed_entries()}
        if stored != {(m, k): v for m, k, v in engine.all_entries()}:
            raise AssertionError(f"{where}: the first changed_entries() is not every entry")
        engine.apply(list(events[:half]))  # again: the workload's events as further changes
        for m, k, v in engine.changed_entries():
            if v is None:
                stored.pop((m, k), None)
            else:
                stored[(m, k)] = v
        if engine.pending_changes():
            raise AssertionError(f"{where}: changes still logged right after changed_entries()")
        if stored != {(m, k): v for m, k, v in engine.all_entries()}:
            raise AssertionError(f"{where}: the changed entries do not add up to the engine's entries")
        checked += 1
    return checked
