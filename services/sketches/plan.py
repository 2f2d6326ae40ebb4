"""Sketch-annotated operators: capture (non-incremental) and incremental maintenance of one plan.

Every operator works on annotated tuples ``(row, P)``: ``P`` is an int bitmask of global fragment ids
(docs/sketches/algorithm.md §2.2). Two evaluations share the operators:

* ``capture(db)``: the annotated result of the operator over a database view, as a list of
  ``(row, P, multiplicity)`` (§2.3). It is the bootstrap, the ``full`` baseline, the oracle of the
  tests and, over a fragment-restricted view, the data-skipping use path (§2.7).
* ``push(table, delta)`` / ``flush()``: incremental maintenance (§2.4). A batch's base-table deltas are
  pushed one table at a time (stateless operators and joins answer at once, stateful ones only absorb);
  then ``flush()`` lets each stateful operator emit one net output delta for the batch, bottom up.

Deltas are Z-sets: ``{(row, P): signed multiplicity}``, zero entries removed.

The shared types, the operator interface and the scan are in ``nodes``, aggregation in ``aggregate``
and ORDER BY in ``order_by``; this module holds selection, projection, union, join and the final
merge, and re-exports the rest (callers import the plan from here).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from ivmstream.services.sketches import folds
from ivmstream.services.sketches import state as S
from ivmstream.services.sketches.aggregate import AGG_KINDS, UNSET, Aggregate, GroupState
from ivmstream.services.sketches.bloom import BloomFilter
from ivmstream.services.sketches.nodes import (
    Annotated,
    DbView,
    Expr,
    Loaded,
    Node,
    Row,
    Scan,
    StateEntry,
    ZSet,
    _add,
    bits,
)
from ivmstream.services.sketches.order_by import TopK

__all__ = [
    "AGG_KINDS",
    "UNSET",
    "Aggregate",
    "Annotated",
    "DbView",
    "Expr",
    "Filter",
    "GroupState",
    "Join",
    "Loaded",
    "Merge",
    "Node",
    "Project",
    "Row",
    "Scan",
    "StateEntry",
    "TopK",
    "Union",
    "ZSet",
    "_add",
    "bits",
    "capture_sketch",
]


class Filter(Node):
    """σθ and HAVING (§2.4.2): keep tuples whose predicate is true; the sketch is unchanged."""

    def __init__(self, child: Node, predicate: Expr) -> None:
        self.children = (child,)
        self.predicate = predicate
        self.width = child.width

    def capture(self, db: DbView) -> Annotated:
        p = self.predicate
        return [e for e in self.children[0].capture(db) if p(e[0]) is True]

    def _keep(self, delta: ZSet) -> ZSet:
        """``delta``'s tuples whose predicate is true, kept in ``delta`` itself: an operator's output delta
        is a fresh dict nothing else holds, and only the dropped keys are hashed again."""
        p = self.predicate
        for k in [k for k in delta if p(k[0]) is not True]:
            del delta[k]
        return delta

    def push(self, table: str, delta: Mapping[Row, int]) -> ZSet:
        return self._keep(self.children[0].push(table, delta))

    def flush(self) -> ZSet:
        return self._keep(self.children[0].flush())

    def lookup(self, positions: tuple[int, ...], key: Row) -> Iterable[tuple[Row, int, int]]:
        p = self.predicate
        return (e for e in self.children[0].lookup(positions, key) if p(e[0]) is True)


class Project(Node):
    """Π (§2.4.3): compute the output expressions, keep the sketch, add up equal results."""

    def __init__(self, child: Node, exprs: Sequence[Expr]) -> None:
        self.children = (child,)
        self.exprs = tuple(exprs)
        self._row = folds.tuple_of(self.exprs)

    def capture(self, db: DbView) -> Annotated:
        return [(self._row(r), p, n) for r, p, n in self.children[0].capture(db)]

    def _map(self, delta: ZSet) -> ZSet:
        out: ZSet = {}
        for (r, p), n in delta.items():
            _add(out, (self._row(r), p), n)
        return out

    def push(self, table: str, delta: Mapping[Row, int]) -> ZSet:
        return self._map(self.children[0].push(table, delta))

    def flush(self) -> ZSet:
        return self._map(self.children[0].flush())


class Union(Node):
    """Bag union (§2.4.4)."""

    def __init__(self, children: Sequence[Node]) -> None:
        self.children = tuple(children)

    def capture(self, db: DbView) -> Annotated:
        return [e for c in self.children for e in c.capture(db)]

    @staticmethod
    def _sum(deltas: Iterable[ZSet]) -> ZSet:
        out: ZSet = {}
        for d in deltas:
            for k, n in d.items():
                _add(out, k, n)
        return out

    def push(self, table: str, delta: Mapping[Row, int]) -> ZSet:
        return self._sum(c.push(table, delta) for c in self.children)

    def flush(self) -> ZSet:
        return self._sum(c.flush() for c in self.children)


class Join(Node):
    """Equi/θ-join and cross product, materialised (§2.4.5): each side indexed by its join key.

    The sequential rule ``ΔL ⋈ R_old`` then ``L_new ⋈ ΔR`` needs no sign special cases and handles
    both inputs (and self-joins) changing in one batch. With ``bloom``, a delta tuple whose key the
    other side's filter rules out skips the lookup (§2.6.2); a filter learns a key before any lookup
    against that side can need it, so it never drops a match.
    """

    def __init__(
        self,
        left: Node,
        right: Node,
        left_key: Expr,
        right_key: Expr,
        residual: Expr | None,
        bloom: bool,
    ) -> None:
        self.children = (left, right)
        self.width = left.width + right.width
        self.left_key = left_key
        self.right_key = right_key
        self.residual = residual
        self.index: tuple[dict[Row, ZSet], dict[Row, ZSet]] = ({}, {})
        self.blooms = (BloomFilter(), BloomFilter()) if bloom else None
        self.probes = 0
        self.filtered = 0
        self.dirty: set[tuple[int, Row, Row, int]] = set()  # (side, key, row, P) changed since a checkpoint

    def capture(self, db: DbView) -> Annotated:
        left, right = (c.capture(db) for c in self.children)
        by_key: dict[Row, list[tuple[Row, int, int]]] = {}
        rk = self.right_key
        for r, p, n in right:
            k = rk(r)
            if None not in k:
                by_key.setdefault(k, []).append((r, p, n))
        out: Annotated = []
        lk, theta = self.left_key, self.residual
        for lr, lp, ln in left:
            k = lk(lr)
            if None in k:
                continue
            for rr, rp, rn in by_key.get(k, ()):
                row = lr + rr
                if theta is None or theta(row) is True:
                    out.append((row, lp | rp, ln * rn))
        return out

    def _side(self, side: int, delta: ZSet, out: ZSet) -> None:
        """Output ``delta ⋈ other side`` (its current contents), then apply ``delta`` to this side."""
        if not delta:
            return
        key = self.left_key if side == 0 else self.right_key
        mine, other = self.index[side], self.index[1 - side]
        bloom_other = self.blooms[1 - side] if self.blooms else None
        bloom_mine = self.blooms[side] if self.blooms else None
        theta = self.residual
        for (row, p), n in delta.items():
            k = key(row)
            if None in k:
                continue  # a NULL key joins nothing (SQL)
            if bloom_other is not None:
                self.probes += 1
                if not bloom_other.might_contain(k):
                    self.filtered += 1
                    matches = None
                else:
                    matches = other.get(k)
            else:
                matches = other.get(k)
            if matches:
                for (orow, op), on in matches.items():
                    joined = row + orow if side == 0 else orow + row
                    if theta is None or theta(joined) is True:
                        _add(out, (joined, p | op), n * on)
            bucket = mine.get(k)
            if bucket is None:
                bucket = mine[k] = {}
            _add(bucket, (row, p), n)
            self.dirty.add((side, k, row, p))
            if not bucket:
                del mine[k]
            if bloom_mine is not None and n > 0:
                bloom_mine.add(k)

    def _delta(self, dl: ZSet, dr: ZSet) -> ZSet:
        out: ZSet = {}
        self._side(0, dl, out)
        self._side(1, dr, out)
        return out

    def push(self, table: str, delta: Mapping[Row, int]) -> ZSet:
        left, right = self.children
        return self._delta(left.push(table, delta), right.push(table, delta))

    def flush(self) -> ZSet:
        left, right = self.children
        return self._delta(left.flush(), right.flush())

    def forget_changes(self) -> None:
        self.dirty = set()

    def entries(self, changed: bool) -> Iterator[StateEntry]:
        if changed:
            dirty, self.dirty = self.dirty, set()
            for side, k, row, p in dirty:
                n = self.index[side].get(k, {}).get((row, p))
                yield S.JOIN, [side, S.encode_row(row), p], n
        else:
            for side, ix in enumerate(self.index):
                for bucket in ix.values():
                    for (row, p), n in bucket.items():
                        yield S.JOIN, [side, S.encode_row(row), p], n

    def load(self, entries: Loaded) -> None:
        for (side, row_values, p), n in entries.get(S.JOIN, ()):
            row = S.decode_row(row_values)
            k = (self.left_key if side == 0 else self.right_key)(row)
            self.index[side].setdefault(k, {})[(row, p)] = n
        if self.blooms is not None:  # the keys held now: the old filter's bits minus deleted keys' bits
            for side, ix in enumerate(self.index):
                for k in ix:
                    self.blooms[side].add(k)

    def stats(self) -> dict[str, float]:
        size = sum(len(b) for ix in self.index for b in ix.values())
        return {
            "join_entries": float(size),
            "bloom_probes": float(self.probes),
            "bloom_filtered": float(self.filtered),
        }


class Merge:
    """The final merge μ (§2.4.11): per fragment, how many result tuples' sketches contain it."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.sketch = 0
        self.dirty: set[int] = set()  # fragments whose count changed since a checkpoint

    def entries(self, changed: bool) -> Iterator[tuple[int, int | None]]:
        if changed:
            dirty, self.dirty = self.dirty, set()
            return ((r, self.counts.get(r)) for r in sorted(dirty))
        return iter(sorted(self.counts.items()))

    def load(self, counts: Iterable[tuple[int, int]]) -> None:
        self.counts = dict(counts)
        self.sketch = 0
        for r in self.counts:
            self.sketch |= 1 << r

    def apply(self, delta: ZSet) -> tuple[int, int]:
        """Fold one batch's result delta; return the fragments (added, removed) as bitmasks."""
        counts = self.counts
        pre: dict[int, int] = {}
        for (_, p), n in delta.items():
            while p:
                low = p & -p
                r = low.bit_length() - 1
                if r not in pre:
                    pre[r] = counts.get(r, 0)
                counts[r] = counts.get(r, 0) + n
                p ^= low
        self.dirty.update(pre)
        added = removed = 0
        for r, before in pre.items():
            now = counts[r]
            if now < 0:
                raise AssertionError(f"fragment {r} counted below zero")
            if now == 0:
                del counts[r]
            if before == 0 and now > 0:
                added |= 1 << r
            elif before > 0 and now == 0:
                removed |= 1 << r
        self.sketch = (self.sketch | added) & ~removed
        return added, removed


def capture_sketch(root: Node, db: DbView) -> int:
    """The sketch a fresh capture computes: the OR of the result tuples' sketches (§2.3)."""
    out = 0
    for _, p, _ in root.capture(db):
        out |= p
    return out
