"""The aggregation operator of a sketch-annotated plan (§2.4.6, §2.4.7, §2.4.10): per group its counts,
exact sums, MIN/MAX prefix buffers and the fragment counts its sketch is built from."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ivmstream.services.sketches import folds
from ivmstream.services.sketches import state as S
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
)
from ivmstream.services.sketches.topm import PrefixBuffer
from ivmstream.services.sketches.values import Descending, add, average

AGG_KINDS = ("sum", "count", "count_star", "avg", "min", "max")
UNSET = object()


class GroupState:
    """One group of an aggregation (§2.4.6/§2.4.7): counts, exact sums, MIN/MAX buffers, fragment counts."""

    __slots__ = ("F", "P", "buffers", "cnt", "image", "nns", "sums")

    def __init__(self, n_aggs: int) -> None:
        self.cnt = 0
        self.sums: list[Any] = [0] * n_aggs
        self.nns = [0] * n_aggs
        self.buffers: list[PrefixBuffer | None] = [None] * n_aggs  # MIN/MAX: the m best values (§2.6.3)
        self.F: dict[int, int] = {}  # fragment -> number of member tuples whose sketch contains it
        self.P = 0
        # The output image as of the last flush (a batch's before image is the previous one's after
        # image); UNSET when not known, e.g. after a checkpoint load.
        self.image: Any = UNSET


class Aggregate(Node):
    """Aggregation with sum/count/avg/min/max (§2.4.6, §2.4.7); without aggregates, DISTINCT (§2.4.10).

    The output row is the group values then the aggregate values. With no GROUP BY (``scalar``) there
    is always exactly one output row, as in SQL. MIN/MAX keep each group's values in a top-m buffer
    (``top_m``; None keeps them all) that is refilled from a recapture of the child when deletes drain it.
    """

    def __init__(self, child: Node, group: Sequence[Expr], aggs: Sequence[tuple[str, Expr | None]]) -> None:
        self.children = (child,)
        self.group = tuple(group)
        self.aggs = tuple(aggs)
        self.top_m: int | None = None
        self.refills = 0
        self.minmax = [i for i, (kind, _) in enumerate(self.aggs) if kind in ("min", "max")]
        self.dirty: set[Row] = set()  # groups changed since a checkpoint
        self.changed_values: dict[tuple[Row, int], dict[Any, Any]] = {}  # (group, agg) -> buffer changes
        self.scalar_dirty = False
        self.scalar = not self.group
        self.groups: dict[Row, GroupState] = {}
        self.before: dict[Row, tuple[Row, int] | None] = {}
        self.touched: dict[Row, set[int]] = {}
        self.emitted_scalar = False
        # The per-row steps as generated straight-line code (``folds``): the group key, the fold (None
        # with MIN/MAX, which keep ``_fold``) and the output values.
        self.key = folds.tuple_of(self.group)
        self.fast_fold = folds.fold(self.aggs)
        self.fold_rows = folds.fold_rows(self.group, self.aggs)
        # Over a scan, a batch's rows go straight in (no annotated delta is built): generated, or None.
        self.absorb_scan = None
        if isinstance(child, Scan):
            spec = child.spec
            partition = None if spec is None else (spec.position, spec.offset, spec.boundaries)
            self.absorb_scan = folds.absorb_scan(self.group, self.aggs, partition)
        self.output_values = folds.values(self.aggs)

    def set_top_m(self, m: int | None) -> None:
        self.top_m = m

    # --- aggregate values --------------------------------------------------------------------------

    def _values(self, st: GroupState) -> Row:
        """The generic form of ``self.values`` (the generated one is checked against it)."""
        out: list[Any] = []
        for i, (kind, _) in enumerate(self.aggs):
            nn = st.nns[i]
            if kind == "count_star":
                out.append(st.cnt)
            elif kind == "count":
                out.append(nn)
            elif kind == "sum":
                out.append(st.sums[i] if nn else None)
            elif kind == "avg":
                out.append(average(st.sums[i], nn) if nn else None)
            else:
                buf = st.buffers[i]
                out.append(buf.first() if buf is not None else None)
        return tuple(out)

    def _image(self, g: Row, st: GroupState | None) -> tuple[Row, int] | None:
        if st is None or (st.cnt == 0 and not self.scalar):
            return None
        return g + self.output_values(st), st.P

    def _fold(self, st: GroupState, row: Row, n: int) -> None:
        """The generic fold (MIN/MAX; the generated ``fast_fold`` is checked against it)."""
        st.cnt += n
        for i, (kind, f) in enumerate(self.aggs):
            if f is None:
                continue
            v = f(row)
            if v is None:
                continue
            st.nns[i] += n
            if kind in ("sum", "avg"):
                st.sums[i] = add(st.sums[i], v * n)
            elif kind in ("min", "max"):
                buf = st.buffers[i]
                if buf is None:
                    buf = st.buffers[i] = PrefixBuffer(self.top_m)
                buf.add(v if kind == "min" else Descending(v), v, n)

    def _fold_rows(
        self, groups: dict[Row, GroupState], items: Iterable[tuple[Row, int]], p: int, new: Callable[[], Any]
    ) -> None:
        """The generic form of ``self.fold_rows`` (MIN/MAX)."""
        for row, n in items:
            g = self.key(row)
            st = groups.get(g)
            if st is None:
                st = groups[g] = new()
            st.P |= p
            self._fold(st, row, n)

    def capture(self, db: DbView) -> Annotated:
        groups: dict[Row, GroupState] = {}
        key, fold = self.key, self.fast_fold or self._fold
        n_aggs = len(self.aggs)
        child = self.children[0]
        if isinstance(child, Scan):  # straight from the table's fragments, one sketch per fragment
            fold_rows = self.fold_rows or self._fold_rows
            for p, rows in child.annotated_fragments(db):
                fold_rows(groups, rows.items(), p, lambda: GroupState(n_aggs))
        else:
            for row, p, n in child.capture(db):
                g = key(row)
                st = groups.get(g)
                if st is None:
                    st = groups[g] = GroupState(n_aggs)
                fold(st, row, n)
                st.P |= p
        if self.scalar and not groups:
            groups[()] = GroupState(n_aggs)
        values = self.output_values
        return [(g + values(st), st.P, 1) for g, st in groups.items()]

    # --- incremental ---------------------------------------------------------------------------------

    def absorb(self, delta: ZSet) -> None:
        key, groups, before, touched = self.key, self.groups, self.before, self.touched
        fold = self.fast_fold or self._fold
        n_aggs = len(self.aggs)
        for (row, p), n in delta.items():
            g = key(row)
            st = groups.get(g)
            mark = touched.get(g)  # touched and before have the same keys
            if mark is None:  # the pre-batch image, taken at first touch (§2.4.6)
                before[g] = st.image if st is not None and st.image is not UNSET else self._image(g, st)
                mark = touched[g] = set()
            if st is None:
                st = groups[g] = GroupState(n_aggs)
            for i in self.minmax:
                buf = st.buffers[i]
                if buf is None:
                    buf = st.buffers[i] = PrefixBuffer(self.top_m)
                if buf.changed is None:
                    buf.changed = self.changed_values.setdefault((g, i), {})
            fold(st, row, n)
            F = st.F
            while p:
                low = p & -p
                r = low.bit_length() - 1
                F[r] = F.get(r, 0) + n
                mark.add(r)
                p ^= low

    def push(self, table: str, delta: Mapping[Row, int]) -> ZSet:
        child = self.children[0]
        if self.absorb_scan is None:
            self.absorb(child.push(table, delta))
        elif table == child.table:  # type: ignore[attr-defined]
            n_aggs = len(self.aggs)
            self.absorb_scan(
                delta.items(),
                self.groups,
                self.before,
                self.touched,
                self._image,
                lambda: GroupState(n_aggs),
                UNSET,
            )
        return {}

    def _refill(self) -> None:
        """Reload the MIN/MAX buffers that deletes drained from a recapture of the child (§2.6.3)."""
        drained: dict[Row, list[int]] = {}
        for g in self.before:
            st = self.groups.get(g)
            if st is None:
                continue
            idx = [i for i, b in enumerate(st.buffers) if b is not None and b.underflow(1)]
            if idx:
                drained[g] = idx
        if not drained:
            return
        if self.source is None:
            raise AssertionError("a drained top-m buffer needs the table store to refill from")
        self.refills += len(drained)
        values: dict[tuple[Row, int], dict[Any, int]] = {}
        key = self.key
        for row, _, n in self.children[0].capture(self.source()):
            g = key(row)
            for i in drained.get(g, ()):
                v = self.aggs[i][1](row)  # type: ignore[misc]
                if v is not None:
                    bag = values.setdefault((g, i), {})
                    bag[v] = bag.get(v, 0) + n
        for g, idx in drained.items():
            for i in idx:
                buf = self.groups[g].buffers[i]
                assert buf is not None
                desc = self.aggs[i][0] == "max"
                buf.refill((Descending(v) if desc else v, v, n) for v, n in values.get((g, i), {}).items())

    def flush(self) -> ZSet:
        self.absorb(self.children[0].flush())
        if self.top_m is not None:
            self._refill()
        if self.scalar and not self.emitted_scalar:
            self.scalar_dirty = True
            self.before.setdefault((), None)
            self.touched.setdefault((), set())
            self.groups.setdefault((), GroupState(len(self.aggs)))
        self.emitted_scalar = self.emitted_scalar or self.scalar
        out: ZSet = {}
        self.dirty.update(self.before)
        for g, old in self.before.items():
            st = self.groups[g]
            for r in self.touched[g]:
                c = st.F.get(r, 0)
                if c > 0:
                    st.P |= 1 << r
                else:
                    if c < 0:
                        raise AssertionError(f"fragment count of group {g!r} below zero")
                    st.P &= ~(1 << r)
                    st.F.pop(r, None)
            if st.cnt < 0:
                raise AssertionError(f"group {g!r} has a negative count")
            new = st.image = self._image(g, st)
            if st.cnt == 0 and not self.scalar:
                del self.groups[g]
            if new == old:
                continue  # values and sketch unchanged (§2.4.6)
            # An image starts with its group's values, so the images of different groups differ, and a
            # group's new image differs from its old one here: no key is set twice (no _add needed).
            if old is not None:
                out[old] = -1
            if new is not None:
                out[new] = 1
        self.before.clear()
        self.touched.clear()
        return out

    def forget_changes(self) -> None:
        for g, i in self.changed_values:
            st = self.groups.get(g)
            buf = st.buffers[i] if st is not None else None
            if buf is not None:
                buf.changed = None  # attached again at its group's next touch, as entries(True) leaves it
        self.changed_values = {}
        self.dirty = set()
        self.scalar_dirty = False

    def _group_value(self, st: GroupState) -> list[Any]:
        return [st.cnt, S.encode_row(st.sums), st.nns, sorted(st.F.items())]

    def entries(self, changed: bool) -> Iterator[StateEntry]:
        groups = self.groups
        if changed:
            dirty, self.dirty = self.dirty, set()
            for g in dirty:
                st = groups.get(g)
                yield S.GROUPS, [S.encode_row(g)], None if st is None else self._group_value(st)
            values, self.changed_values = self.changed_values, {}
            for (g, i), keys in values.items():
                st = groups.get(g)
                buf = st.buffers[i] if st is not None else None
                if buf is not None:
                    buf.changed = None  # attached again at its group's next touch
                for key, v in keys.items():
                    n = buf.stored(key) if buf is not None else 0
                    yield S.VALUES, [S.encode_row(g), i, S.encode(v)], n or None
            if self.scalar_dirty:
                self.scalar_dirty = False
                yield S.SCALARS, ["scalar"], 1
            return
        for g, st in groups.items():
            yield S.GROUPS, [S.encode_row(g)], self._group_value(st)
            for i in self.minmax:
                buf = st.buffers[i]
                if buf is not None:
                    for v, n in buf.values():
                        yield S.VALUES, [S.encode_row(g), i, S.encode(v)], n
        if self.emitted_scalar:
            yield S.SCALARS, ["scalar"], 1

    def load(self, entries: Loaded) -> None:
        n_aggs = len(self.aggs)
        for (g_values,), (cnt, sums, nns, F) in entries.get(S.GROUPS, ()):
            st = self.groups[S.decode_row(g_values)] = GroupState(n_aggs)
            st.cnt, st.sums, st.nns = cnt, list(S.decode_row(sums)), list(nns)
            st.F = {r: c for r, c in F}
            for r in st.F:
                st.P |= 1 << r
            for i in self.minmax:
                st.buffers[i] = PrefixBuffer(self.top_m)
        stored: dict[tuple[Row, int], list[tuple[Any, Any, int]]] = {}
        for (g_values, i, v), n in entries.get(S.VALUES, ()):
            value = S.decode(v)
            key = Descending(value) if self.aggs[i][0] == "max" else value
            stored.setdefault((S.decode_row(g_values), i), []).append((key, value, n))
        for (g, i), units in stored.items():
            st = self.groups[g]
            buf = st.buffers[i]
            assert buf is not None
            buf.load(units, st.nns[i])
        for st in self.groups.values():
            for i in self.minmax:
                buf = st.buffers[i]
                if buf is not None and not buf.items:
                    buf.load((), st.nns[i])
        self.emitted_scalar = bool(entries.get(S.SCALARS))

    def stats(self) -> dict[str, float]:
        out = {"groups": float(len(self.groups))}
        if self.top_m is not None:
            out["topm_refills"] = float(self.refills)
        return out
