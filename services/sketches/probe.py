"""The probe join (docs/sketches/algorithm.md §2.4.5): join deltas against base tables, nothing materialised.

A materialised join keeps both inputs' annotated rows indexed by join key; for a join over big tables
that is a copy of them. The probe variant keeps no join state: it evaluates ``other side restricted to
key k`` by index lookups into the table store (:class:`BaseIndexes`, one secondary index per table and
key columns, built on first use and kept in step with the store), annotating rows on the fly.

Versions: the driver pushes a batch table by table and applies each table's delta to the store after
pushing it, so a lookup sees the tables pushed earlier at their new version and the others (and the
table being pushed) at their old one. The join therefore emits ``ΔL ⋈ R_old + L_old ⋈ ΔR + ΔL ⋈ ΔR``,
which is exactly ``L_new ⋈ R_new - L_old ⋈ R_old`` and needs no special case for self-joins.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from ivmstream.services.sketches import plan as P

Index = dict[P.Row, dict[P.Row, int]]  # key values -> {row: multiplicity}


class BaseIndexes:
    """Secondary indexes of the table store by column positions (the store itself for no columns)."""

    def __init__(self, store: Mapping[str, Mapping[int, Mapping[P.Row, int]]]) -> None:
        self.store = store  # table -> fragment -> row -> multiplicity (the engine's, updated in place)
        self.built: dict[tuple[str, tuple[int, ...]], Index] = {}
        self.by_table: dict[str, list[tuple[tuple[int, ...], Index]]] = {}

    def rows(self, table: str) -> Iterator[tuple[P.Row, int]]:
        for frag_rows in self.store[table].values():
            yield from frag_rows.items()

    def lookup(self, table: str, positions: tuple[int, ...], key: P.Row) -> Iterable[tuple[P.Row, int]]:
        if not positions:
            return self.rows(table)
        index = self.built.get((table, positions))
        if index is None:
            index = self.built[(table, positions)] = {}
            self.by_table.setdefault(table, []).append((positions, index))
            for row, n in self.rows(table):
                index.setdefault(tuple(row[p] for p in positions), {})[row] = n
        return index.get(key, {}).items()

    def update(self, table: str, row: P.Row, count: int) -> None:
        """The store now holds ``count`` copies of ``row``."""
        for positions, index in self.by_table.get(table, ()):
            k = tuple(row[p] for p in positions)
            bucket = index.get(k)
            if count:
                if bucket is None:
                    bucket = index[k] = {}
                bucket[row] = count
            elif bucket is not None:
                bucket.pop(row, None)
                if not bucket:
                    del index[k]

    def clear(self) -> None:
        self.built.clear()
        self.by_table.clear()


class ProbeJoin(P.Join):
    """Equi/θ-join whose inputs are select-project-join subtrees, evaluated by lookups (§2.4.5)."""

    def __init__(
        self,
        left: P.Node,
        right: P.Node,
        positions: tuple[tuple[int, ...], tuple[int, ...]],
        residual: P.Expr | None,
        bloom: bool,
    ) -> None:
        lpos, rpos = positions
        super().__init__(left, right, _getter(lpos), _getter(rpos), residual, bloom)
        self.positions = positions
        self.width = left.width + right.width
        self.lookups = 0

    def _combine(self, row: P.Row, p: int, n: int, side: int, other: P.Node, out: P.ZSet) -> None:
        k = (self.left_key if side == 0 else self.right_key)(row)
        if None in k:
            return  # a NULL key joins nothing (SQL)
        if self.blooms is not None:
            self.probes += 1
            if not self.blooms[1 - side].might_contain(k):
                self.filtered += 1
                return
        self.lookups += 1
        theta = self.residual
        for orow, op, on in other.lookup(self.positions[1 - side], k):
            joined = row + orow if side == 0 else orow + row
            if theta is None or theta(joined) is True:
                P._add(out, (joined, p | op), n * on)

    def _probe(self, dl: P.ZSet, dr: P.ZSet) -> P.ZSet:
        out: P.ZSet = {}
        left, right = self.children
        for (row, p), n in dl.items():
            self._combine(row, p, n, 0, right, out)  # ΔL ⋈ R_old
        for (row, p), n in dr.items():
            self._combine(row, p, n, 1, left, out)  # L_old ⋈ ΔR
        if dl and dr:  # ΔL ⋈ ΔR
            by_key: dict[P.Row, list[tuple[P.Row, int, int]]] = {}
            for (row, p), n in dr.items():
                k = self.right_key(row)
                if None not in k:
                    by_key.setdefault(k, []).append((row, p, n))
            theta = self.residual
            for (row, p), n in dl.items():
                for orow, op, on in by_key.get(self.left_key(row), ()):
                    joined = row + orow
                    if theta is None or theta(joined) is True:
                        P._add(out, (joined, p | op), n * on)
        if self.blooms is not None:
            for side, delta in ((0, dl), (1, dr)):
                key = self.left_key if side == 0 else self.right_key
                for (row, _), n in delta.items():
                    if n > 0:
                        self.blooms[side].add(key(row))
        return out

    def push(self, table: str, delta: Mapping[P.Row, int]) -> P.ZSet:
        left, right = self.children
        return self._probe(left.push(table, delta), right.push(table, delta))

    def flush(self) -> P.ZSet:
        left, right = self.children
        if left.flush() or right.flush():
            raise AssertionError("a probe join's inputs are select-project-join: they emit at push only")
        return {}

    def load(self, entries: P.Loaded) -> None:
        """No join state to read; the Bloom filters learn the keys each side holds now (the store is
        loaded first), which covers every key a lookup can find."""
        if self.blooms is None:
            return
        for side, child in enumerate(self.children):
            key = self.left_key if side == 0 else self.right_key
            for row, _, _ in child.lookup((), ()):
                self.blooms[side].add(key(row))

    def lookup(self, positions: tuple[int, ...], key: P.Row) -> Iterator[tuple[P.Row, int, int]]:
        """This join's rows whose columns ``positions`` equal ``key``, by nested index lookups."""
        left, right = self.children
        lpos, rpos = self.positions
        wl = left.width
        mine_l = [(p, v) for p, v in zip(positions, key, strict=True) if p < wl]
        mine_r = [(p - wl, v) for p, v in zip(positions, key, strict=True) if p >= wl]
        theta = self.residual
        if mine_l or not mine_r:
            outer = left.lookup(tuple(p for p, _ in mine_l), tuple(v for _, v in mine_l))
            for lrow, lp, ln in outer:
                k = self.left_key(lrow)
                if None in k:
                    continue
                inner = right.lookup(rpos + tuple(p for p, _ in mine_r), k + tuple(v for _, v in mine_r))
                for rrow, rp, rn in inner:
                    joined = lrow + rrow
                    if theta is None or theta(joined) is True:
                        yield joined, lp | rp, ln * rn
        else:
            outer = right.lookup(tuple(p for p, _ in mine_r), tuple(v for _, v in mine_r))
            for rrow, rp, rn in outer:
                k = self.right_key(rrow)
                if None in k:
                    continue
                for lrow, lp, ln in left.lookup(lpos, k):
                    joined = lrow + rrow
                    if theta is None or theta(joined) is True:
                        yield joined, lp | rp, ln * rn

    def stats(self) -> dict[str, float]:
        return {
            "probe_lookups": float(self.lookups),
            "bloom_probes": float(self.probes),
            "bloom_filtered": float(self.filtered),
        }


def _getter(positions: tuple[int, ...]) -> P.Expr:
    return lambda row: tuple(row[p] for p in positions)
