"""Static evaluation of a view tree from base relations, bottom-up (docs/fivm/algorithm.md §2.4).

Every view from scratch: leaves from the base tuples (with their composed lifts), indicator leaves from
the supports, and each V@X as the hash join of its children grouped by its keys. It shares no code with
the trigger path, so the debug checker (``check``) can compare the two; a re-evaluation
baseline is this function run after every batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ivmstream.services.fivm.query import Query
from ivmstream.services.fivm.rings import Ring
from ivmstream.services.fivm.views import Key
from ivmstream.services.fivm.viewtree import INDICATOR, LEAF, ViewNode, ViewTree


def evaluate(
    tree: ViewTree, query: Query, ring: Ring[Any], bases: Mapping[str, Mapping[Key, int]]
) -> dict[str, dict[Key, Any]]:
    """View name -> its contents (no zero payloads) over the base relations ``bases`` (name -> tuples)."""
    occ = {o.name: o for o in query.occurrences}
    out: dict[str, dict[Key, Any]] = {}

    def ev(node: ViewNode) -> dict[Key, Any]:
        res: dict[Key, Any] = {}
        if node.kind in (LEAF, INDICATOR):
            o = occ[node.relation or ""]
            for t, m in bases.get(o.base, {}).items():
                if not m:
                    continue
                b = dict(zip(o.columns, t, strict=True))
                key = tuple(b[v] for v in node.keys)
                if node.kind == INDICATOR:
                    res[key] = ring.one()
                    continue
                p = ring.one()
                for v in node.composed_lifted:
                    p = ring.mul(p, ring.lift(v, b[v]))
                p = ring.scale(m, p)
                res[key] = ring.add(res[key], p) if key in res else p
        else:
            rows: list[tuple[dict[str, Any], list[Any]]] = [({}, [])]
            bound: set[str] = set()
            for child in node.children:
                data = ev(child)
                shared = [i for i, v in enumerate(child.keys) if v in bound]
                index: dict[Key, list[tuple[Key, Any]]] = {}
                for k, p in data.items():
                    index.setdefault(tuple(k[i] for i in shared), []).append((k, p))
                nxt = []
                for b, pays in rows:
                    probe = tuple(b[child.keys[i]] for i in shared)
                    for k, p in index.get(probe, ()):
                        nb = dict(b)
                        nb.update(zip(child.keys, k, strict=True))
                        nxt.append((nb, [*pays, p]))
                rows = nxt
                bound |= set(child.keys)
            for b, pays in rows:
                p = ring.one()
                for q in pays:
                    p = ring.mul(p, q)
                if node.lift and node.var is not None:
                    p = ring.mul(ring.lift(node.var, b[node.var]), p)
                key = tuple(b[v] for v in node.keys)
                res[key] = ring.add(res[key], p) if key in res else p
        res = {k: p for k, p in res.items() if not ring.is_zero(p)}
        out[node.name] = res
        return res

    for root in tree.roots:
        ev(root)
    return out
