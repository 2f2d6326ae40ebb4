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
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ivmstream.services.sketches import folds
from ivmstream.services.sketches import state as S
from ivmstream.services.sketches.bloom import BloomFilter
from ivmstream.services.sketches.partition import RangeSpec
from ivmstream.services.sketches.topm import PrefixBuffer
from ivmstream.services.sketches.values import Descending, add, average, order_key, row_key

Row = tuple[Any, ...]
StateEntry = tuple[str, list[Any], Any]  # (map, key parts after the node id, JSON value or None: deleted)
Loaded = Mapping[str, list[tuple[list[Any], Any]]]  # map -> [(key parts, value)]
ZSet = dict[tuple[Row, int], int]
Annotated = list[tuple[Row, int, int]]  # (row, P, multiplicity), multiplicity > 0
Expr = Callable[[Row], Any]


class DbView:
    """The rows a capture reads, possibly only some fragments: per table its rows grouped by local
    fragment, ``(fragment, {row: multiplicity})`` (an unpartitioned table's rows all in fragment 0)."""

    def __init__(self, fragments: Callable[[str], Iterable[tuple[int, Mapping[Row, int]]]]) -> None:
        self.fragments = fragments

    def rows(self, table: str) -> Iterator[tuple[Row, int]]:
        for _, rows in self.fragments(table):
            yield from rows.items()


def bits(mask: int) -> Iterator[int]:
    """The set bits of a sketch, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _add(out: ZSet, key: tuple[Row, int], n: int) -> None:
    v = out.get(key, 0) + n
    if v:
        out[key] = v
    else:
        out.pop(key, None)


class Node:
    children: tuple[Node, ...] = ()
    # The database the operator's child is recaptured from when a top-m buffer underflows (§2.6.3); the
    # engine sets it to its table store, at the batch's new version by the time flush() reads it.
    source: Callable[[], DbView] | None = None
    width = 0  # columns of the output row (join inputs)

    def capture(self, db: DbView) -> Annotated:
        raise NotImplementedError

    def push(self, table: str, delta: Mapping[Row, int]) -> ZSet:
        raise NotImplementedError

    def flush(self) -> ZSet:
        raise NotImplementedError

    def walk(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            yield from c.walk()

    def stats(self) -> dict[str, float]:
        return {}

    def set_top_m(self, m: int | None) -> None:
        """Bound MIN/MAX and top-k state to m units (§2.6.3); only those operators keep such state."""

    def lookup(self, positions: tuple[int, ...], key: Row) -> Iterable[tuple[Row, int, int]]:
        """The current output rows whose columns ``positions`` equal ``key``, read from the table store
        (probe joins, §2.4.5): ``(row, P, multiplicity)``."""
        raise NotImplementedError(f"{type(self).__name__} cannot be probed (select-project-join only)")

    def entries(self, changed: bool) -> Iterator[StateEntry]:
        """The operator's state as checkpoint entries (§6): all of them, or (``changed``) those that
        changed since the last such call, which then forgets them."""
        return iter(())

    def load(self, entries: Loaded) -> None:
        """Rebuild the state from its entries (called after the table store is loaded)."""

    def forget_changes(self) -> None:
        """Drop what ``entries(True)`` would hand out, without building the entries (no checkpoint
        reads them)."""
        for _ in self.entries(True):
            pass


class Scan(Node):
    """Table access: annotate each tuple with the bit of its fragment (§2.1; unpartitioned: P = 0)."""

    def __init__(self, table: str, spec: RangeSpec | None, width: int = 0) -> None:
        self.table = table
        self.spec = spec
        self.width = width
        # The table store's secondary indexes (``services/sketches/probe.py``), set by the engine.
        self.indexes: Any = None

    def annotate(self, row: Row) -> int:
        spec = self.spec
        if spec is None:
            return 0
        return 1 << (spec.offset + spec.fragment(row[spec.position]))

    def annotated_fragments(self, db: DbView) -> Iterator[tuple[int, Mapping[Row, int]]]:
        """The table's rows a fragment at a time, each group with the sketch all its rows have (the
        view groups rows by the fragment ``annotate`` gives them)."""
        spec = self.spec
        offset = None if spec is None else spec.offset
        for f, rows in db.fragments(self.table):
            yield (0 if offset is None else 1 << (offset + f)), rows

    def capture(self, db: DbView) -> Annotated:
        out: Annotated = []
        for p, rows in self.annotated_fragments(db):
            out += [(row, p, n) for row, n in rows.items()]
        return out

    def push(self, table: str, delta: Mapping[Row, int]) -> ZSet:
        if table != self.table:
            return {}
        spec = self.spec
        if spec is None:
            return {(row, 0): n for row, n in delta.items()}
        pos, bounds, offset = spec.position, spec.boundaries, spec.offset  # annotate(), inline
        return {
            (row, 1 << (offset + (0 if (v := row[pos]) is None else bisect_right(bounds, v)))): n
            for row, n in delta.items()
        }

    def flush(self) -> ZSet:
        return {}

    def lookup(self, positions: tuple[int, ...], key: Row) -> Iterable[tuple[Row, int, int]]:
        if None in key:
            return  # a NULL key matches nothing (SQL)
        ann = self.annotate
        for row, n in self.indexes.lookup(self.table, positions, key):
            yield row, ann(row), n


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
