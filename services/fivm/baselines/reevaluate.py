"""Re-evaluation strategies: store the base relations, recompute the result after every delta.

docs/fivm/baselines.md §5. The state is the base relations (tuple -> multiplicity); the
result is derived from them, recomputed after each relation's delta (a round-robin stream's batch
holds one relation, so this is once per batch) and after a restore.

* ``f-re``: bottom-up over the fivm view tree, aggregates pushed past joins (``evaluate``).
* ``dbt-re``: a flat join, one relation at a time through indexes on the stored relations, then
  the lifts and the group-by (no factorization).
* ``reeval``: the matrix chain ``A1·A2·…·Ak`` recomputed as dense matrix products.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ivmstream.sdk import EngineError
from ivmstream.services.fivm.baselines.common import (
    ANY_ORDER_RINGS,
    ResultRing,
    fivm_tree,
    group,
    index_needs,
    initial_loading,
    int_view,
    plan_probes,
    query_ring,
    require,
    run_probes,
    transient_view,
)
from ivmstream.services.fivm.evaluate import evaluate
from ivmstream.services.fivm.query import Query
from ivmstream.services.fivm.rings.matrix import chain_product
from ivmstream.services.fivm.views import Key, View, sync_indexes


class Reevaluation:
    """Base relations as int views; ``_recompute`` fills ``_result`` (root name -> (keys, contents))."""

    def __init__(self, query: Query, rings: Sequence[str], any_order: bool) -> None:
        require(query, rings)
        self.query = query
        self.order, self.tree = fivm_tree(query)
        self.ring = ResultRing(query_ring(query, self.tree.lifted, any_order=any_order))
        self.updatable = frozenset(query.updatable)
        self.loading = initial_loading(query)
        self.supports: dict[str, Any] = {}
        self.dropped: dict[str, list[Key]] = {}
        self.views: dict[str, View] = {r.name: int_view(r.name, r.columns) for r in query.relations}
        self._result: list[tuple[str, tuple[str, ...], dict[Key, Any]]] = []

    def seal(self) -> None:
        self.loading = False

    def rebuild_derived(self) -> None:
        self._recompute()

    def apply_relation(self, base: str, delta: dict[Key, int]) -> None:
        self.views[base].add_all(delta.items())
        self._recompute()

    def roots(self) -> list[View]:
        return [transient_view(name, keys, self.ring, data) for name, keys, data in self._result]

    def _recompute(self) -> None:
        raise NotImplementedError

    def bases(self) -> dict[str, dict[Key, int]]:
        return {name: view.data for name, view in self.views.items()}


class FactorizedReevaluation(Reevaluation):
    """Strategy ``f-re``: every view of the fivm view tree from scratch (§5.1)."""

    def __init__(self, query: Query) -> None:
        super().__init__(query, ANY_ORDER_RINGS, any_order=False)
        self._recompute()

    def _recompute(self) -> None:
        fresh = evaluate(self.tree, self.query, self.ring.inner, self.bases())
        self._result = [(r.name, r.keys, fresh[r.name]) for r in self.tree.roots]


class FlatReevaluation(Reevaluation):
    """Strategy ``dbt-re``: the flat join, relation at a time, then aggregation (§5.2)."""

    def __init__(self, query: Query) -> None:
        super().__init__(query, ANY_ORDER_RINGS, any_order=False)
        # Aliases read their base relation's view with their own column names.
        self.probes, row = plan_probes((), [(o.base, o.columns, True) for o in query.occurrences])
        pos = {v: i for i, v in enumerate(row)}
        self.out = tuple(pos[v] for v in query.group_by)
        lifted = [v for v in self.tree.lifted if v not in query.group_by]
        self.block = getattr(self.ring.inner, "lift_block", None)
        self.lifted = tuple(lifted)
        self.lift_pos = tuple(pos[v] for v in lifted)
        sync_indexes(self.views, index_needs(self.probes))
        self._recompute()

    def _recompute(self) -> None:
        ring = self.ring.inner
        rows = run_probes([((), ring.one())], self.probes, self.views, ring)
        if self.block is not None and self.lifted:
            # One tuple of the flat join lifts every variable at once, (1, t, t tᵀ) for the cofactor ring.
            block, lifted, at = self.block, self.lifted, self.lift_pos
            rows = [(row, ring.mul(p, block(lifted, [row[i] for i in at]))) for row, p in rows]
            data = group(rows, self.out, (), ring)
        else:
            data = group(rows, self.out, tuple(zip(self.lifted, self.lift_pos, strict=True)), ring)
        self._result = [("Q", self.query.group_by, data)]

    def rebuild_derived(self) -> None:
        sync_indexes(self.views, index_needs(self.probes))
        self._recompute()


class MatrixReevaluation(Reevaluation):
    """Strategy ``reeval``: ``A = A1·A2·…·Ak`` as dense numpy products after every delta (§5.3).

    The relations, in configuration order, must form a chain ``A_i(X_{i-1}, X_i)`` with free
    variables ``X_0`` and ``X_k``; each variable's values are numbered in sorted order."""

    def __init__(self, query: Query) -> None:
        super().__init__(query, ("matrix",), any_order=True)
        rels = query.occurrences
        chain = [rels[0].columns[0]] + [r.columns[1] for r in rels]
        ok = len(rels) == len(query.relations) and all(
            len(r.columns) == 2 and r.columns[0] == chain[i] for i, r in enumerate(rels)
        )
        if not ok or len(set(chain)) != len(chain) or tuple(query.free) != (chain[0], chain[-1]):
            raise EngineError(
                "strategy reeval needs a matrix chain: relations A_i(X_{i-1}, X_i) in configuration order "
                "and free variables [X_0, X_k]"
            )
        self.chain = chain
        self._recompute()

    def _recompute(self) -> None:
        rels = self.query.relations
        domains: list[list[Any]] = []
        for i in range(len(self.chain)):
            values: set[Any] = set()
            if i > 0:
                values.update(t[1] for t in self.views[rels[i - 1].name].data)
            if i < len(rels):
                values.update(t[0] for t in self.views[rels[i].name].data)
            domains.append(sorted(values, key=lambda v: (type(v).__name__, v)))
        if any(not d for d in domains):
            self._result = [("Q", self.query.group_by, {})]
            return
        where = [{v: j for j, v in enumerate(d)} for d in domains]
        mats = []
        for i, r in enumerate(rels):
            mat = np.zeros((len(domains[i]), len(domains[i + 1])))
            for (a, b), m in self.views[r.name].data.items():
                mat[where[i][a], where[i + 1][b]] = m
            mats.append(mat)
        product = chain_product(mats)
        rows, cols = np.nonzero(product)
        first, last = domains[0], domains[-1]
        pairs = zip(rows.tolist(), cols.tolist(), strict=True)
        data = {(first[i], last[j]): float(product[i, j]) for i, j in pairs}
        self._result = [("Q", self.query.group_by, data)]


def factorized_reevaluation(query: Query) -> FactorizedReevaluation:
    return FactorizedReevaluation(query)


def flat_reevaluation(query: Query) -> FlatReevaluation:
    return FlatReevaluation(query)


def matrix_reevaluation(query: Query) -> MatrixReevaluation:
    return MatrixReevaluation(query)
