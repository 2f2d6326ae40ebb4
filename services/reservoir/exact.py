"""Exact join counts and rank access, built from scratch (docs/reservoir/algorithm.md §3.2, §3.3).

Bottom-up over the join tree rooted at node 0 (Yannakakis' sum-product): every tuple's exact number
of results in its subtree, per parent key the tuples with their running sums. Rank r of the join
(0 <= r < |Q|) is then resolved top-down by binary search and mixed-radix digits. This is the
``rebuild`` baseline's static sampler, the exact |Q| after deletes, and the refill after deletes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import Any

from ivmstream.services.reservoir.index import Parts, Tup, positions


class ExactJoin:
    def __init__(
        self,
        attrs: Sequence[tuple[str, ...]],
        neighbours: Sequence[Sequence[int]],
        columns: Sequence[str],
        tuples: Sequence[Sequence[Tup]],
    ) -> None:
        n = len(attrs)
        self.columns = list(columns)
        self.col_map = [[(i, self.columns.index(a)) for i, a in enumerate(attrs[e])] for e in range(n)]
        parent = [-1] * n
        order, todo, seen = [], [0], {0}
        while todo:
            e = todo.pop()
            order.append(e)
            for c in neighbours[e]:
                if c not in seen:
                    seen.add(c)
                    parent[c] = e
                    todo.append(c)
        self.children = [[c for c in neighbours[e] if parent[c] == e] for e in range(n)]
        # positions, within node e's tuples, of the columns it shares with child c / with its parent
        self.child_pos = [
            [positions([a for a in attrs[e] if a in attrs[c]], attrs[e]) for c in self.children[e]]
            for e in range(n)
        ]
        up = [
            positions([a for a in attrs[e] if parent[e] >= 0 and a in attrs[parent[e]]], attrs[e])
            for e in range(n)
        ]
        # per node: key -> (tuples, cumulative weights); per node: key -> total
        self.groups: list[dict[Tup, tuple[list[Tup], list[int]]]] = [{} for _ in range(n)]
        self.sums: list[dict[Tup, int]] = [{} for _ in range(n)]
        for e in reversed(order):
            for t in tuples[e]:
                w = self._weight(e, t)
                if not w:
                    continue
                v = tuple(t[i] for i in up[e])
                ts, cum = self.groups[e].setdefault(v, ([], []))
                ts.append(t)
                cum.append((cum[-1] if cum else 0) + w)
                self.sums[e][v] = cum[-1]
        self.count = self.sums[0].get((), 0)

    def _weight(self, e: int, t: Tup) -> int:
        w = 1
        for c, pos in zip(self.children[e], self.child_pos[e], strict=True):
            w *= self.sums[c].get(tuple(t[i] for i in pos), 0)
            if not w:
                return 0
        return w

    def get(self, rank: int) -> Tup:
        """The result at ``rank`` in [0, count)."""
        parts: Parts = []
        self._resolve(0, (), rank, parts)
        row: list[Any] = [None] * len(self.columns)
        for e, t in parts:
            for i, col in self.col_map[e]:
                row[col] = t[i]
        return tuple(row)

    def _resolve(self, e: int, v: Tup, z: int, parts: Parts) -> None:
        ts, cum = self.groups[e][v]
        j = bisect.bisect_right(cum, z)
        z -= cum[j - 1] if j else 0
        t = ts[j]
        parts.append((e, t))
        keys = [tuple(t[i] for i in pos) for pos in self.child_pos[e]]
        radices = [self.sums[c][k] for c, k in zip(self.children[e], keys, strict=True)]
        digits = [0] * len(radices)
        for i in range(len(radices) - 1, -1, -1):
            z, digits[i] = divmod(z, radices[i])
        for c, k, d in zip(self.children[e], keys, digits, strict=True):
            self._resolve(c, k, d, parts)

    def rows(self) -> Iterator[Tup]:
        """Every result, in rank order."""
        for r in range(self.count):
            yield self.get(r)
