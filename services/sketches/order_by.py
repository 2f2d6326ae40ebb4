"""The ORDER BY [LIMIT k] operator of a sketch-annotated plan (§2.4.9, top-m buffers §2.6.3)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ivmstream.services.sketches import state as S
from ivmstream.services.sketches.nodes import (
    Annotated,
    DbView,
    Expr,
    Loaded,
    Node,
    Row,
    StateEntry,
    ZSet,
    _add,
)
from ivmstream.services.sketches.topm import PrefixBuffer
from ivmstream.services.sketches.values import order_key, row_key


class TopK(Node):
    """ORDER BY [LIMIT k] (§2.4.9) under the total order O*: the ORDER BY keys, then the row, then P.

    Without a limit it only orders the capture (maintenance passes deltas through). With one, the state
    is the input tuples in O* order, all of them or (``top_m``) the first m >= k units with a refill from
    a recapture of the child when deletes leave fewer than k (§2.6.3); a batch emits
    ``new top-k - old top-k``.
    """

    def __init__(self, child: Node, keys: Sequence[tuple[Expr, bool]], limit: int | None) -> None:
        self.children = (child,)
        self.keys = tuple(keys)
        self.limit = limit
        self.top_m: int | None = None
        self.old: ZSet | None = None
        self.refills = 0
        self.set_top_m(None)

    def set_top_m(self, m: int | None) -> None:
        self.top_m = m
        self.state = PrefixBuffer(None if m is None or self.limit is None else max(m, self.limit))
        self.state.changed = {}
        self.saved_total = 0  # the bag size the last checkpoint holds

    def forget_changes(self) -> None:
        if self.limit is not None:
            self.state.changed = {}
            self.saved_total = self.state.total

    def entries(self, changed: bool) -> Iterator[StateEntry]:
        if self.limit is None:
            return
        state = self.state
        if changed:
            keys, state.changed = state.changed, {}
            for key, (row, p) in (keys or {}).items():
                yield S.TOPK, [S.encode_row(row), p], state.stored(key) or None
            if state.total != self.saved_total:
                self.saved_total = state.total
                yield S.SCALARS, ["total"], state.total or None
            return
        for (row, p), n in state.values():
            yield S.TOPK, [S.encode_row(row), p], n
        if state.total:
            yield S.SCALARS, ["total"], state.total

    def load(self, entries: Loaded) -> None:
        if self.limit is None:
            return
        units = []
        for (row_values, p), n in entries.get(S.TOPK, ()):
            row = S.decode_row(row_values)
            units.append((self.order(row, p), (row, p), n))
        total = sum(v for _, v in entries.get(S.SCALARS, ()))
        self.state.load(units, total)
        self.saved_total = total

    def order(self, row: Row, p: int) -> tuple[Any, ...]:
        return (*(order_key(f(row), desc) for f, desc in self.keys), row_key(row), p)

    def _first(self, entries: Iterable[tuple[Row, int, int]]) -> Annotated:
        if self.limit is None:
            return list(entries)
        out: Annotated = []
        left = self.limit
        for row, p, n in entries:
            if left <= 0:
                break
            take = min(n, left)  # the entry straddling position k contributes only what fits
            out.append((row, p, take))
            left -= take
        return out

    def capture(self, db: DbView) -> Annotated:
        merged: dict[tuple[Row, int], int] = {}
        for row, p, n in self.children[0].capture(db):
            merged[(row, p)] = merged.get((row, p), 0) + n
        ordered = sorted(merged.items(), key=lambda e: self.order(e[0][0], e[0][1]))
        return self._first((r, p, n) for (r, p), n in ordered)

    def _top(self) -> ZSet:
        return {(r, p): n for r, p, n in self._first((r, p, n) for (r, p), n in self.state.values())}

    def absorb(self, delta: ZSet) -> None:
        if not delta:
            return
        if self.old is None:
            self.old = self._top()
        state = self.state
        for (row, p), n in delta.items():
            state.add(self.order(row, p), (row, p), n)

    def push(self, table: str, delta: Mapping[Row, int]) -> ZSet:
        d = self.children[0].push(table, delta)
        if self.limit is None:
            return d
        self.absorb(d)
        return {}

    def flush(self) -> ZSet:
        d = self.children[0].flush()
        if self.limit is None:
            return d
        self.absorb(d)
        if self.old is None:
            return {}
        if self.state.total < 0:  # stored units never go below zero (a delete takes at most what is held)
            raise AssertionError("top-k input with a negative multiplicity")
        if self.state.underflow(self.limit):
            self._refill()
        out = self._top()
        for k, n in self.old.items():
            _add(out, k, -n)
        self.old = None
        return out

    def _refill(self) -> None:
        if self.source is None:
            raise AssertionError("a drained top-m buffer needs the table store to refill from")
        self.refills += 1
        order = self.order
        self.state.refill((order(r, p), (r, p), n) for r, p, n in self.children[0].capture(self.source()))

    def stats(self) -> dict[str, float]:
        out = {"topk_entries": float(len(self.state))}
        if self.top_m is not None:
            out["topm_refills"] = float(self.refills)
        return out
