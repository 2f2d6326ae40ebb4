"""The dynamic join index (docs/reservoir/algorithm.md §2.3-§2.5) and its exact-weight variant (§3.1).

One structure per *directed* edge ``e→p`` of the join tree (plus a super-root over node 0): for each
key value ``v`` (the columns ``e`` shares with ``p``) the items of ``e`` with that key, arranged so
that a virtual batch of join results can be addressed by position without materialising it.

- Rounded mode (RSJoin): an item's weight is a power of two (the product of its children's rounded
  counts, times its rounded group size); items sit in one bucket per exponent; a key's count is the
  sum of weights and its rounded count the next power of two. A change travels to the parents only
  when the rounded count changes, which happens O(log N) times per key (§2.4). Each key keeps one
  record (``CNT``, ``RCNT``, ``BUCKETS``, ``EXPS``, ``WHERE``), so an update reaches all of it with
  one lookup.
- Exact mode (SJoin): weights are exact counts, kept per key in a Fenwick tree; every change travels
  (§3.1).
- Grouping (the ``-opt`` strategies, §2.7): items are the groups of a node's tuples by their join
  columns, a group's weight multiplied by its (rounded) size; a tuple that does not change the rounded
  size changes nothing in the index.

The node store (tuples, items, hash indexes by neighbour key) is kept in insertion order, so every
walk over it, and so every bucket's order, is a function of the input order alone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from functools import partial
from typing import Any

from ivmstream.services.reservoir import exact_kernels, kernels
from ivmstream.services.reservoir.fenwick import Nodes, _fen_add, _fen_append, _fen_find, _fen_point
from ivmstream.services.reservoir.nodes import NodeStore, Tup, positions

Parts = list[tuple[int, Tup]]  # (node, node tuple) pieces of one join result

# A key's record in a rounded structure, so that one dict lookup reaches everything an update of the
# key touches: [its count, its rounded count, the buckets (a list indexed by exponent: the items of
# that weight, None where there are none), the exponents present in increasing order, item -> its
# index in its bucket]. A bucket is found by position, not by a dict probe. The positions sit with
# their key: a key's items are re-weighed together (a propagation), and a small dict of one key stays
# in the CPU's caches where a structure's dict of every item does not.
CNT, RCNT, BUCKETS, EXPS, WHERE = 0, 1, 2, 3, 4


def nextpow2(c: int) -> int:
    """The smallest power of two >= c (c > 0), by integer arithmetic (never floating log2)."""
    return 1 << (c - 1).bit_length()


def _canonical(v: Tup) -> bytes:
    return repr([(type(x).__name__, x) for x in v]).encode()


class Directed:
    """The structure of one directed join-tree edge e→p (p = -1: the super-root over node 0)."""

    __slots__ = (
        "child_pos",
        "children",
        "cnt",
        "fen",
        "idx",
        "key_pos",
        "node",
        "parent",
        "parents",
        "rcnt",
        "recs",
        "rows",
        "where",
    )

    def __init__(self, idx: int, node: int, parent: int, key_pos: tuple[int, ...]) -> None:
        self.idx = idx  # its position in the index's list of structures
        self.node = node
        self.parent = parent
        self.key_pos = key_pos
        self.children: list[int] = []  # indexes of D[c→node], c != parent, in a fixed order
        self.child_pos: list[tuple[int, ...]] = []  # each child's key columns within this node's items
        self.parents: list[tuple[int, int]] = []  # (D[node'→q] reading this one, its child slot)
        self.recs: dict[Tup, list[Any]] = {}  # rounded: key -> [CNT, RCNT, BUCKETS, EXPS, WHERE]
        self.cnt: dict[Tup, int] = {}  # exact: key -> count
        self.rcnt: dict[Tup, int] = {}  # exact: the counts again (what a parent multiplies by)
        self.where: dict[Tup, int] = {}  # exact: item -> its index in its key's rows
        self.rows: dict[Tup, list[Tup]] = {}  # exact: key -> items in arrival order
        self.fen: dict[Tup, Nodes] = {}  # exact: key -> Fenwick tree over the items' weights


class JoinIndex:
    """Node stores plus, when ``counting``, the directed structures of the rounded or exact index.

    Its attributes are slots: the compiled steps read several of them per insert, a slot at a fixed
    offset where an instance dict takes a lookup by name."""

    __slots__ = (
        "col_map",
        "counting",
        "dirty",
        "ds",
        "exact",
        "exact_native",
        "grouped",
        "into",
        "native",
        "neighbours",
        "nodes",
        "out",
        "places",
        "propagations",
        "retrieves",
        "super",
        "tracking",
        "width",
    )

    def __init__(
        self,
        attrs: Sequence[tuple[str, ...]],
        neighbours: Sequence[Sequence[int]],
        columns: Sequence[str],
        *,
        exact: bool = False,
        grouped: bool = False,
        counting: bool = True,
    ) -> None:
        self.exact, self.grouped, self.counting = exact, grouped, counting
        self.neighbours = [list(n) for n in neighbours]
        shared = [
            {n: tuple(a for a in attrs[e] if a in attrs[n]) for n in self.neighbours[e]}
            for e in range(len(attrs))
        ]
        self.nodes = [NodeStore(attrs[e], shared[e], grouped) for e in range(len(attrs))]
        self.col_map = [[(i, columns.index(a)) for i, a in enumerate(attrs[e])] for e in range(len(attrs))]
        self.width = len(columns)
        self.places = self.propagations = self.retrieves = 0
        self.dirty: set[tuple[int, Tup]] = set()  # (structure, key) changed since the last checkpoint
        self.tracking = False  # whether ``dirty`` is kept: not until a checkpoint will read it
        # the compiled steps (rounded mode with counts, where built; kernels.py); None: the Python
        # methods below
        self.native = None if exact or not counting else kernels.native
        # exact mode's compiled re-weighing (exact_kernels.py); None: the Python methods below
        self.exact_native = exact_kernels.native if exact and counting else None
        self.ds: list[Directed] = []
        self.out: list[list[int]] = [[] for _ in attrs]  # node -> its D[node→*]
        self.into: dict[tuple[int, int], int] = {}  # (c, e) -> index of D[c→e]
        if not counting:
            return
        for e in range(len(attrs)):
            for p in [*self.neighbours[e], *([-1] if e == 0 else [])]:
                keys = shared[e][p] if p >= 0 else ()
                d = Directed(len(self.ds), e, p, positions(keys, self.nodes[e].item_attrs))
                self.into[(e, p)] = len(self.ds)
                self.out[e].append(len(self.ds))
                self.ds.append(d)
        for di, d in enumerate(self.ds):
            for c in self.neighbours[d.node]:
                if c != d.parent:
                    child = self.into[(c, d.node)]
                    self.ds[child].parents.append((di, len(d.children)))
                    d.children.append(child)
                    d.child_pos.append(self.nodes[d.node].key_pos[c])
        self.super = self.into[(0, -1)]

    # --- weights --------------------------------------------------------------------------------

    def _new_tree(self) -> Nodes:
        """An empty Fenwick tree in the layout of the exact steps in use (compiled ``Fenwick``, or a list)."""
        return self.exact_native.Fenwick() if self.exact_native is not None else []  # type: ignore[no-any-return]

    def _feq(self, n: int) -> int:
        return n if self.exact else nextpow2(n)

    def count(self, d: Directed, v: Tup) -> int:
        """Key v's count in structure d (0 when d does not hold it)."""
        if self.exact:
            return d.cnt.get(v, 0)
        rec = d.recs.get(v)
        n: int = 0 if rec is None else rec[CNT]
        return n

    def rounded(self, d: Directed, v: Tup) -> int:
        """Key v's rounded count in d (exact mode: its count), what a parent item's weight multiplies."""
        if self.exact:
            return d.rcnt.get(v, 0)
        rec = d.recs.get(v)
        r: int = 0 if rec is None else rec[RCNT]
        return r

    def counts(self, d: Directed) -> dict[Tup, int]:
        """Every key's count in structure d."""
        return dict(d.cnt) if self.exact else {v: rec[CNT] for v, rec in d.recs.items()}

    def _children_product(self, d: Directed, item: Tup) -> int:
        ds, w = self.ds, 1
        if self.exact:
            for c, pos in zip(d.children, d.child_pos, strict=True):
                w *= ds[c].rcnt.get(tuple(item[i] for i in pos), 0)
                if not w:
                    return 0
            return w
        for c, pos in zip(d.children, d.child_pos, strict=True):
            rec = ds[c].recs.get(tuple(item[i] for i in pos))
            if rec is None:
                return 0
            w *= rec[RCNT]
            if not w:
                return 0
        return w

    # --- updates (§2.4) -------------------------------------------------------------------------

    def insert(self, e: int, t: Tup, seq: int | None = None) -> bool:
        """Add tuple ``t`` to node ``e`` (arrival number ``seq``, default the node's next); False if it
        was already there (set semantics)."""
        if self.native is not None:
            return bool(self.native.insert(self, e, t, seq))
        node = self.nodes[e]
        if t in node.tuples:
            return False
        item, new = node.add(t, seq)
        if not self.counting:
            return True
        if new:
            self._reweigh(e, item, 0, 1)
            return True
        size = len(node.items[item])  # a group's (a new tuple of its own is a new item)
        old_f, f = self._feq(size - 1), self._feq(size)
        if f != old_f:
            self._reweigh(e, item, old_f, f)
        return True

    def insert_sized(self, e: int, t: Tup, seq: int | None = None) -> tuple[int, list[int]] | None:
        """``insert``, then ``delta_size``: the size and radices of t's virtual batch, None if t was
        there (one compiled call where the rounded steps are built)."""
        if self.native is not None:
            sized: tuple[int, list[int]] | None = self.native.insert_sized(self, e, t, seq)
            return sized
        if not self.insert(e, t, seq):
            return None
        return self.delta_size(e, t)

    def remove(self, e: int, t: Tup) -> bool:
        """Take tuple ``t`` out of node ``e``; False if it was not there. The mirror of ``insert``: the
        item leaves its structures (or, grouped, moves to its smaller rounded size), and a count whose
        rounding changes propagates exactly as on an insert, downwards (§5)."""
        node = self.nodes[e]
        if t not in node.tuples:
            return False
        item = node.item_of(t)
        if self.counting:
            size = len(node.members(item))
            old_f = self._feq(size) if self.grouped else 1  # the item's weight factor, before and after
            f = self._feq(size - 1) if self.grouped and size > 1 else 0
            if f != old_f:
                self._reweigh(e, item, old_f, f)
        node.remove(t)
        return True

    def _reweigh(self, e: int, item: Tup, old_f: int, f: int) -> None:
        """The item's weight factor in node e changes from old_f to f: in every D[e→*] its weight is
        that factor times its children's (rounded) counts. Rounded mode runs the compiled step where
        it is built (kernels.py), the same container operations as these methods."""
        if self.native is not None:
            self.native.reweigh(self, e, item, old_f, f)
            return
        if self.exact_native is not None:
            self.exact_native.reweigh(self, e, item, old_f, f)
            return
        for di in self.out[e]:
            d = self.ds[di]
            base = self._children_product(d, item)
            if base:
                self._place(d, item, old_f * base, f * base)

    def _place(self, d: Directed, item: Tup, w_old: int, w_new: int) -> None:
        self.places += 1
        v = tuple(item[i] for i in d.key_pos)
        if self.tracking:
            self.dirty.add((d.idx, v))
        if self.exact:
            idx = d.where.get(item)
            if idx is None:
                d.where[item] = len(d.rows.setdefault(v, []))
                d.rows[v].append(item)
                _fen_append(d.fen.setdefault(v, []), w_new)
            elif w_new:
                _fen_add(d.fen[v], idx, w_new - w_old)
            else:
                self._row_remove(d, v, idx, item, w_old)
            old = d.cnt.get(v, 0)
            new = old + w_new - w_old
            if new:
                d.cnt[v] = d.rcnt[v] = new
            else:
                del d.cnt[v], d.rcnt[v]
            if new != old:
                self._propagate(d, v, old, new)
            return
        rec = d.recs.get(v)  # the key's one record: its counts and buckets
        if w_old:  # a move keeps the item's position entry for its new bucket to overwrite
            self._bucket_remove(d, rec, w_old.bit_length() - 1, item, moving=bool(w_new))
        if w_new:
            if rec is None:
                rec = d.recs[v] = [0, 0, [], [], {}]
            self._bucket_add(d, rec, w_new.bit_length() - 1, item)
        if rec is None:
            raise AssertionError("a placement of weight 0 over weight 0")
        old_r = rec[RCNT]  # read before the count changes
        c = rec[CNT] + w_new - w_old
        if c:
            rec[CNT] = c
            new_r = nextpow2(c)
        else:  # the key is gone from this structure (deletes only)
            del d.recs[v]
            new_r = 0
        if new_r != old_r:
            rec[RCNT] = new_r
            self._propagate(d, v, old_r, new_r)

    def _row_remove(self, d: Directed, v: Tup, idx: int, item: Tup, w: int) -> None:
        """Exact mode: drop ``item`` (weight ``w``) from key v's Fenwick tree by moving the last item
        into its place; popping a Fenwick tree's last node leaves the others intact."""
        rows, tree = d.rows[v], d.fen[v]
        del d.where[item]
        last = rows.pop()
        if idx < len(rows):
            _fen_add(tree, idx, _fen_point(tree, len(rows)) - w)
            rows[idx] = last
            d.where[last] = idx
        tree.pop()
        if not rows:
            del d.rows[v], d.fen[v]

    def _bucket_add(self, d: Directed, rec: list[Any], x: int, item: Tup) -> None:
        per = rec[BUCKETS]
        if x >= len(per):
            per.extend([None] * (x + 1 - len(per)))
        arr = per[x]
        if arr is None:
            arr = per[x] = []
            exps = rec[EXPS]
            exps.append(x)
            exps.sort()
        rec[WHERE][item] = len(arr)
        arr.append(item)

    def _bucket_remove(self, d: Directed, rec: Any, x: int, item: Tup, moving: bool = False) -> None:
        per, where = rec[BUCKETS], rec[WHERE]
        arr = per[x]
        i = where[item] if moving else where.pop(item)
        last = arr.pop()
        if i < len(arr):
            arr[i] = last
            where[last] = i
        if not arr:
            per[x] = None
            rec[EXPS].remove(x)

    def _propagate(self, d: Directed, v: Tup, old: int, new: int) -> None:
        """A key's (rounded) count changed: re-weigh every parent item with that key, in every parent
        structure (§2.4; pitfall: all of D[p→q], q != e, not one)."""
        ds = self.ds
        p = d.parent
        if p < 0:
            return
        matching = self.nodes[p].by_key[d.node].get(v)
        if not matching:
            return
        node = self.nodes[p]
        for pi, slot in d.parents:
            parent = ds[pi]
            others = [
                (c, pos)
                for j, (c, pos) in enumerate(zip(parent.children, parent.child_pos, strict=True))
                if j != slot
            ]
            for item in list(matching):
                self.propagations += 1
                o = self._feq(len(node.members(item))) if self.grouped else 1
                for c, pos in others:
                    o *= self.rounded(ds[c], tuple(item[i] for i in pos))
                    if not o:
                        break
                if o:
                    self._place(parent, item, old * o, new * o)

    # --- virtual batches (§2.5) -----------------------------------------------------------------

    def delta_size(self, e: int, t: Tup) -> tuple[int, list[int]]:
        """|ΔJ| of tuple t just inserted into node e, and the radices (exact sums at the top level)."""
        if self.native is not None:
            size, radices = self.native.delta_size(self, e, t)
            return size, radices
        item = self.nodes[e].item_of(t)
        radices = []
        size = 1
        for c in self.neighbours[e]:
            d = self.ds[self.into[(c, e)]]
            r = self.count(d, tuple(item[i] for i in self.nodes[e].key_pos[c]))
            radices.append(r)
            size *= r
        return size, radices

    def delta_get(self, e: int, t: Tup, radices: Sequence[int], z: int) -> Tup | None:
        """Entry z of ΔJ for t in node e: a result row, or None for a dummy."""
        if self.native is not None:
            row: Tup | None = self.native.delta_get(self, e, t, radices, z)
            return row
        self.retrieves += 1
        parts: Parts = [(e, t)]
        item = self.nodes[e].item_of(t)
        digits = _digits(z, radices)
        for c, digit in zip(self.neighbours[e], digits, strict=True):
            d = self.ds[self.into[(c, e)]]
            if not self._key(d, tuple(item[i] for i in self.nodes[e].key_pos[c]), digit, parts):
                return None
        return self.assemble(parts)

    def batch_reader(self, e: int, t: Tup, radices: list[int]) -> Callable[[int], Tup | None]:
        """``delta_get`` of t's virtual batch as a function of z (the compiled step itself, where built)."""
        if self.native is not None:
            return partial(self.native.delta_get, self, e, t, radices)
        return partial(self.delta_get, e, t, radices)

    def full_size(self) -> int:
        """|J|: the super-root's length, an upper bound on |Q| (exact in exact mode)."""
        return self.count(self.ds[self.super], ()) if self.counting else 0

    def full_get(self, z: int) -> Tup | None:
        """Entry z of J (the whole join through the super-root): a result row, or None for a dummy."""
        self.retrieves += 1
        parts: Parts = []
        return self.assemble(parts) if self._key(self.ds[self.super], (), z, parts) else None

    def _key(self, d: Directed, v: Tup, z: int, parts: Parts) -> bool:
        if self.exact:
            if z >= d.cnt.get(v, 0):
                return False  # trailing padding of the key batch
            idx, rest = _fen_find(d.fen[v], z)
            return self._item(d, d.rows[v][idx], rest, parts)
        rec = d.recs.get(v)
        if rec is None or z >= rec[CNT]:
            return False
        buckets = rec[BUCKETS]
        for x in rec[EXPS]:
            arr = buckets[x]
            block = len(arr) << x
            if z < block:
                j = z >> x
                return self._item(d, arr[j], z - (j << x), parts)
            z -= block
        raise AssertionError("cnt and buckets disagree")

    def _item(self, d: Directed, item: Tup, z: int, parts: Parts) -> bool:
        ds = self.ds
        keys = [tuple(item[i] for i in pos) for pos in d.child_pos]
        radices = [self.rounded(ds[c], k) for c, k in zip(d.children, keys, strict=True)]
        h = 1
        for r in radices:
            h *= r
        idx, f = divmod(z, h)
        members = self.nodes[d.node].members(item)
        if idx >= len(members):
            return False  # a dummy slot of a group (its rounded size)
        parts.append((d.node, members[idx]))
        for c, k, digit in zip(d.children, keys, _digits(f, radices), strict=True):
            if not self._key(ds[c], k, digit, parts):
                return False
        return True

    def assemble(self, parts: Parts) -> Tup:
        row: list[Any] = [None] * self.width
        col_map = self.col_map
        for e, t in parts:
            for i, col in col_map[e]:
                row[col] = t[i]
        return tuple(row)

    # --- enumeration without counts (the symmetric hash join, §3.2) -----------------------------

    def delta_rows(self, e: int, t: Tup) -> list[Tup]:
        """Every new join result of t in node e, by nested hash lookups along the tree."""
        partial: list[Parts] = [[(e, t)]]
        for c in self.neighbours[e]:
            node = self.nodes[e]
            v = tuple(node.item_of(t)[i] for i in node.key_pos[c])
            subs = list(self._subtree(c, e, v))
            partial = [p + s for p in partial for s in subs]
            if not partial:
                return []
        return [self.assemble(p) for p in partial]

    def _subtree(self, e: int, parent: int, v: Tup) -> Iterator[Parts]:
        node = self.nodes[e]
        for item in node.by_key[parent].get(v, ()):
            for t in node.members(item):
                partial: list[Parts] = [[(e, t)]]
                for c in self.neighbours[e]:
                    if c == parent:
                        continue
                    key = tuple(item[i] for i in node.key_pos[c])
                    subs = list(self._subtree(c, e, key))
                    partial = [p + s for p in partial for s in subs]
                    if not partial:
                        break
                yield from partial

    def tuples(self, e: int) -> list[Tup]:
        return list(self.nodes[e].tuples)

    # --- snapshots: every structure in its exact order (bucket order decides future samples) ---------

    def dump_key(self, d: Directed, v: Tup) -> list[Any]:
        """One key of one structure: its buckets (exponent, items in order), or items with exact weights."""
        if self.exact:
            return [[list(it), str(_fen_point(d.fen[v], j))] for j, it in enumerate(d.rows.get(v, ()))]
        rec = d.recs.get(v)
        if rec is None:
            return []
        per = rec[BUCKETS]
        # the bucket lists themselves, for an encoder to read at once; items are tuples: JSON arrays
        return [[x, per[x]] for x in rec[EXPS]]

    def holds(self, d: Directed, v: Tup) -> bool:
        return v in (d.rows if self.exact else d.recs)

    def held_keys(self) -> list[Collection[Tup]]:
        """Per structure, the keys it holds (``holds`` for many keys: one lookup each)."""
        return [d.rows if self.exact else d.recs for d in self.ds]

    def keys(self, d: Directed) -> list[Tup]:
        """The keys of a structure, in a canonical order (not the order they arrived in)."""
        return sorted(d.rows if self.exact else d.recs, key=_canonical)

    def dump_directed(self) -> list[Any]:
        return [[[list(v), self.dump_key(d, v)] for v in self.keys(d)] for d in self.ds]

    def load_directed(self, dumped: Sequence[Any]) -> None:
        """Restore what ``dump_directed`` wrote into a fresh index whose node stores are loaded."""
        for d, keys in zip(self.ds, dumped, strict=True):
            for v_, entries in keys:
                v = tuple(v_)
                total = 0
                if self.exact:
                    items, tree = d.rows.setdefault(v, []), d.fen.setdefault(v, self._new_tree())
                    for item_, w_ in entries:
                        item, w = tuple(item_), int(w_)
                        d.where[item] = len(items)
                        items.append(item)
                        _fen_append(tree, w)
                        total += w
                    d.cnt[v] = d.rcnt[v] = total
                    continue
                rec = d.recs.get(v)
                if rec is None:
                    rec = d.recs[v] = [0, 0, [], [], {}]
                per, where = rec[BUCKETS], rec[WHERE]
                for x, items_ in entries:
                    if x >= len(per):
                        per.extend([None] * (x + 1 - len(per)))
                    arr = per[x] = [tuple(it) for it in items_]
                    for i, it in enumerate(arr):
                        where[it] = i
                    total += len(arr) << x
                rec[EXPS] = [x for x, arr in enumerate(per) if arr is not None]
                rec[CNT] = total
                rec[RCNT] = nextpow2(total) if total else 0


def _digits(z: int, radices: Sequence[int]) -> list[int]:
    """Mixed-radix digits of z, the first radix most significant."""
    out = [0] * len(radices)
    for i in range(len(radices) - 1, -1, -1):
        z, out[i] = divmod(z, radices[i])
    return out
