"""Debug mode: the invariants of docs/fivm/algorithm.md §5.2, checked after every propagated delta.

Debug mode keeps every base relation's support, so each materialized view can be re-evaluated from
scratch (``ivmstream.services.fivm.evaluate``) and compared with what the triggers maintained. Cost: a full
evaluation per delta; for tests and small inputs only.
"""

from __future__ import annotations

import math
from typing import Any

from ivmstream.services.fivm.evaluate import evaluate
from ivmstream.services.fivm.maintain import FivmMaintainer
from ivmstream.services.fivm.viewtree import INDICATOR


class InvariantError(AssertionError):
    """A maintained view disagrees with its definition: an engine bug."""


def check_invariants(maint: FivmMaintainer, rel_tol: float = 1e-9) -> None:
    ring = maint.ring
    bases = {r: s.data for r, s in maint.supports.items()}
    if set(bases) != set(maint.relations):
        raise InvariantError("debug checks need the support of every relation (debug: true)")
    # 3. exactly μ(τ, U) is stored (U = every relation while loading)
    target = maint.target_views()
    if set(maint.views) != target:
        raise InvariantError(f"stored views {sorted(maint.views)} differ from μ = {sorted(target)}")
    fresh = evaluate(maint.tree, maint.query, ring, bases)
    for name, view in maint.views.items():
        # 2. no zero payloads, and every index agrees with the view
        for key, p in view.data.items():
            if ring.is_zero(p):
                raise InvariantError(f"{name}[{key}] stores a zero payload")
        for pos, index in view.indexes.items():
            rebuilt: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
            for key in view.data:
                rebuilt.setdefault(tuple(key[i] for i in pos), set()).add(key)
            if {b: set(ks) for b, ks in index.items()} != rebuilt:
                raise InvariantError(f"index {pos} of {name} disagrees with the view")
        # 1. the view equals its definition over the current relations
        want = fresh[name]
        for key in set(view.data) | set(want):
            got_p = view.data.get(key, ring.zero())
            want_p = want.get(key, ring.zero())
            if not _close(ring.to_json(got_p), ring.to_json(want_p), rel_tol):
                raise InvariantError(
                    f"{name}[{key}] = {ring.to_json(got_p)}, its definition gives {ring.to_json(want_p)}"
                )
    # 4. indicator counts = number of supporting tuples per projection
    for plans in maint.plans.values():
        for plan in plans:
            if plan.kind != INDICATOR:
                continue
            counts: dict[tuple[Any, ...], int] = {}
            for t in bases[maint.query_base(plan.occurrence)]:
                a = tuple(t[i] for i in plan.key_pos)
                counts[a] = counts.get(a, 0) + 1
            if counts != maint.counts[plan.leaf]:
                raise InvariantError(f"indicator counts of {plan.leaf} disagree with the support")


def _close(a: Any, b: Any, rel_tol: float) -> bool:
    """JSON values equal up to a relative tolerance on floats (ints and strings exactly)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel_tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rel_tol) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, int | float) and isinstance(b, int | float):
            return math.isclose(a, b, rel_tol=rel_tol, abs_tol=rel_tol)
        return False
    return bool(a == b)
