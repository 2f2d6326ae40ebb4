"""Per-batch execution of trigger plans with payloads in columns (docs/fivm/algorithm.md §2.14).

The per-tuple trigger multiplies one small payload at a time, so in Python its cost is the fixed
overhead of each numpy call, not the arithmetic. Here one relation delta climbs the same compiled
plan as a whole: the leaf's lifts are built for all tuples at once, sibling payloads are gathered into
columns, products are row-wise (``mul_rows``) and the group-by is one sort and ``np.add.reduceat``
(``sum_by``). Only looking up siblings and storing the resulting keys stay per key.

The whole path is computed before any view changes (a step never reads a view of its own path, §2.5),
so a delta the columns cannot represent exactly (int64 counts that could overflow) is refused before
anything moved and the per-tuple trigger runs instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from ivmstream.services.fivm import kernels
from ivmstream.services.fivm.rings.cofactor import (
    Cofactor,
    CofactorRing,
    CofactorRows,
    RowCofactor,
    mul_chain,
    sum_by,
    tri_size,
)
from ivmstream.services.fivm.triggers import GET, INDEX, LeafPlan, Step
from ivmstream.services.fivm.views import Key, View

# Counts stay exact in int64 (and in the float64 factors products use) below this bound.
_COUNT_LIMIT = 1 << 52


class Unrepresentable(Exception):
    """Counts this batch could overflow in int64 columns: run the per-tuple trigger instead."""


def supports(ring: Any) -> bool:
    """Column payloads exist for the float cofactor ring (the exact ring keeps Python ints, §8)."""
    return isinstance(ring, CofactorRing) and not ring.exact


def leaf_rows(ring: CofactorRing, plan: LeafPlan, delta: Mapping[Key, int]) -> tuple[list[Key], CofactorRows]:
    """δ of the leaf in columns: ``m · (1, x, x xᵀ)`` per tuple over the composed lifted variables,
    one row per tuple (not yet grouped by the leaf's keys)."""
    tuples = list(delta)
    try:
        mults = np.fromiter(delta.values(), dtype=np.int64, count=len(tuples))
    except OverflowError:  # beyond int64
        raise Unrepresentable from None
    if len(mults) and (mults.min() <= -_COUNT_LIMIT or mults.max() >= _COUNT_LIMIT):
        raise Unrepresentable
    keys = project(tuples, plan.key_pos)
    n = len(tuples)
    if not plan.lifted:
        return keys, CofactorRows(0, mults, np.zeros((n, 0)), np.zeros((n, 0)))
    positions = [i for _, i in plan.lifted]
    lo = ring.index[plan.lifted[0][0]]
    x = np.empty((n, len(positions)))
    kernels.columns_into(tuples, positions, x)
    sums, quad = np.empty((n, len(positions))), np.empty((n, tri_size(len(positions))))
    kernels.lift_into(x, mults, sums, quad)
    return keys, CofactorRows(lo, mults, sums, quad)


def project(rows: Sequence[Key], positions: Sequence[int]) -> list[Key]:
    """``tuple(row[i] for i in positions)`` of every row, in C-level loops (rows of one arity)."""
    if rows and len(rows[0]) == len(positions) and tuple(positions) == tuple(range(len(positions))):
        return list(rows)  # every row whole: a star's probes and the leaf keys of its root
    if len(positions) == 1:
        return list(zip(map(itemgetter(positions[0]), rows)))
    if not positions:
        return [()] * len(rows)
    return list(map(itemgetter(*positions), rows))


def group(keys: Sequence[Key], rows: CofactorRows) -> tuple[list[Key], CofactorRows]:
    """Equal keys summed, keys in order of first appearance, zero rows dropped (§2.5 step 1)."""
    distinct = list(dict.fromkeys(keys))
    if len(distinct) < len(keys):
        ids = {k: i for i, k in enumerate(distinct)}
        gid = np.fromiter(map(ids.__getitem__, keys), dtype=np.int64, count=len(keys))
        _, rows = sum_by(gid, rows)  # ids 0, 1, ... in order of first appearance: ``distinct``'s order
    if rows.counts.all():  # a row of non-zero count is non-zero: no scan of its sums and products
        return distinct, rows
    live = (rows.counts != 0) | rows.sums.any(axis=1) | rows.quad.any(axis=1)
    if live.all():
        return distinct, rows
    picked = np.flatnonzero(live)
    return [distinct[i] for i in picked.tolist()], take(rows, picked)


def take(rows: CofactorRows, picked: npt.NDArray[np.intp]) -> CofactorRows:
    return CofactorRows(rows.lo, rows.counts[picked], rows.sums[picked], rows.quad[picked])


def step_rows(
    ring: CofactorRing, step: Step, views: Mapping[str, View], keys: list[Key], delta: CofactorRows
) -> tuple[list[Key], CofactorRows]:
    """One step of the trigger (§2.5 step 2) for every delta row at once."""
    rows: list[Key] = keys
    source: list[int] | None = None  # the delta row of each join row (None: row i is delta row i)
    gathered: list[list[Cofactor]] = []  # per joined sibling, its payload for each join row
    probes = step.probes
    if probes and all(probe.mode == GET for probe in probes):
        # Point lookups only (a star's siblings): all siblings in one pass, a row's key hashed once.
        keylists: dict[tuple[int, ...], list[Key]] = {}
        for probe in probes:
            if probe.probe not in keylists:
                keylists[probe.probe] = project(rows, probe.probe)
        datas = [views[probe.view].data for probe in probes]
        gathered, source, rows = kernels.probe_all(datas, [keylists[p.probe] for p in probes], rows)
        if not rows:
            return [], take(delta, np.zeros(0, dtype=np.intp))
        probes = ()
    for probe in probes:
        view = views[probe.view]
        data = view.data
        found: list[Cofactor] = []
        keep: list[int] | None = []  # the join row each new row extends (None: row i extends row i)
        if probe.mode == GET:
            found, keep, rows = kernels.probe_get(data, project(rows, probe.probe), rows)
        else:
            keep = []
            ext = probe.extend
            joined: list[Key] = []
            for j, row in enumerate(rows):
                matches = (
                    view.lookup(probe.index, tuple([row[i] for i in probe.probe]))
                    if probe.mode == INDEX
                    else list(data)
                )
                for k in matches:
                    joined.append(row + tuple([k[i] for i in ext]))
                    keep.append(j)
                    found.append(data[k])
            rows = joined
        if keep is not None:
            source = keep if source is None else [source[j] for j in keep]
            gathered = [[g[j] for j in keep] for g in gathered]
        gathered.append(found)
        if not rows:
            return [], take(delta, np.zeros(0, dtype=np.intp))
    slots = [delta if source is None else take(delta, np.asarray(source, dtype=np.intp))]
    slots.extend(CofactorRows.of(payloads) for payloads in gathered)
    _check_counts(slots)
    factors = [slots[i] for i in step.mul_order]
    if step.lift_pos >= 0 and step.lift_var in ring.index:
        x = np.empty((len(rows), 1))
        kernels.columns_into(rows, (step.lift_pos,), x)
        ones = np.ones(len(x), dtype=np.int64)
        factors.append(CofactorRows(ring.index[step.lift_var], ones, x, x * x))
    return group(project(rows, step.out), mul_chain(factors))


def _check_counts(slots: Sequence[CofactorRows]) -> None:
    """The product of the largest counts must stay exact in int64 and float64 (else: per tuple)."""
    bound = 1
    for s in slots:
        if len(s.counts):
            bound *= int(np.abs(s.counts).max())
    if bound >= _COUNT_LIMIT:
        raise Unrepresentable


def propagate(
    ring: CofactorRing, plan: LeafPlan, views: Mapping[str, View], delta: Mapping[Key, int]
) -> list[tuple[View, list[tuple[Key, Cofactor]]]]:
    """The view changes one relation delta causes along ``plan``'s path, computed without changing
    any view; raises ``Unrepresentable`` when the columns cannot hold it exactly."""
    keys, rows = group(*leaf_rows(ring, plan, delta))
    changes: list[tuple[View, list[tuple[Key, Cofactor]]]] = []
    target = views.get(plan.leaf)
    if target is not None and keys:
        changes.append((target, payloads(keys, rows)))
    for step in plan.steps:
        if not keys:
            break
        keys, rows = step_rows(ring, step, views, keys, rows)
        target = views.get(step.view)
        if target is not None and keys:
            changes.append((target, payloads(keys, rows)))
    return changes


def payloads(keys: Sequence[Key], rows: CofactorRows) -> list[tuple[Key, Cofactor]]:
    """One payload per row: a ``RowCofactor`` naming its row of the columns, made read-only once (a
    view of a read-only array is read-only), so no row is copied, viewed or checked again."""
    block = CofactorRows.__new__(CofactorRows)  # contiguous, so the compiled gather reads its rows
    block.lo, block.counts = rows.lo, rows.counts
    block.sums, block.quad = np.ascontiguousarray(rows.sums), np.ascontiguousarray(rows.quad)
    block.sums.flags.writeable = False
    block.quad.flags.writeable = False
    return kernels.payload_rows(RowCofactor, list(keys), rows.lo, rows.counts.tolist(), block)


def apply_changes(changes: Sequence[tuple[View, list[tuple[Key, Any]]]]) -> None:
    for view, delta in changes:
        view.add_nonzero(delta)
