"""The nodes of an RPAI tree and their structural steps: a left-leaning red-black tree (Sedgewick 2008)
whose nodes store their keys relative to their parents, so every rotation re-bases the relative keys
(docs/vwap/algorithm.md §2.2, §2.5). ``ivmstream.services.vwap.trees.rpai.RPAITree`` is the map built
on them.

Node fields: ``rk`` (key relative to the parent), ``val``, ``sm`` (subtree sum), ``mn``/``mx`` (minimum and
maximum absolute key of the subtree, expressed in the same frame as ``rk``), ``red``, ``left``, ``right``.
The steps are module-level functions: no attribute lookups on self in the recursions.
"""

from __future__ import annotations

from typing import Any


class Node:
    __slots__ = ("left", "mn", "mx", "red", "right", "rk", "sm", "val")

    def __init__(self, rk: Any, val: Any) -> None:
        self.rk = rk
        self.val = val
        self.sm = val
        self.mn = rk
        self.mx = rk
        self.red = True
        self.left: Node | None = None
        self.right: Node | None = None

    def __repr__(self) -> str:
        return f"Node(rk={self.rk!r}, val={self.val!r}, {'red' if self.red else 'black'})"


def _pull(x: Node) -> None:
    """Recompute sm, mn, mx of x from its own fields and its children."""
    lt = x.left
    rt = x.right
    rk = x.rk
    if lt is None:
        x.mn = rk
        if rt is None:
            x.sm = x.val
            x.mx = rk
        else:
            x.sm = x.val + rt.sm
            x.mx = rk + rt.mx
    else:
        x.mn = rk + lt.mn
        if rt is None:
            x.sm = lt.sm + x.val
            x.mx = rk
        else:
            x.sm = lt.sm + x.val + rt.sm
            x.mx = rk + rt.mx


def _rot_l(h: Node) -> Node:
    x = h.right
    b = x.rk
    m = x.left
    h.right = m
    if m is not None:
        m.rk += b
        m.mn += b
        m.mx += b
    x.left = h
    x.rk = h.rk + b
    h.rk = -b
    x.red = h.red
    h.red = True
    _pull(h)
    _pull(x)
    return x


def _rot_r(h: Node) -> Node:
    x = h.left
    b = x.rk
    m = x.right
    h.left = m
    if m is not None:
        m.rk += b
        m.mn += b
        m.mx += b
    x.right = h
    x.rk = h.rk + b
    h.rk = -b
    x.red = h.red
    h.red = True
    _pull(h)
    _pull(x)
    return x


def _flip(h: Node) -> None:
    h.red = not h.red
    lt = h.left
    lt.red = not lt.red
    rt = h.right
    rt.red = not rt.red


def _fixup(h: Node) -> Node:
    rt = h.right
    lt = h.left
    rotated = False
    if rt is not None and rt.red and (lt is None or not lt.red):
        h = _rot_l(h)
        rotated = True
        lt = h.left
    if lt is not None and lt.red:
        ll = lt.left
        if ll is not None and ll.red:
            h = _rot_r(h)
            rotated = True
        rt = h.right
        if rt is not None and rt.red and h.left.red:
            _flip(h)
    if not rotated:  # _pull(h), inlined
        rk = h.rk
        if lt is None:
            h.mn = rk
            if rt is None:
                h.sm = h.val
                h.mx = rk
            else:
                h.sm = h.val + rt.sm
                h.mx = rk + rt.mx
        else:
            h.mn = rk + lt.mn
            if rt is None:
                h.sm = lt.sm + h.val
                h.mx = rk
            else:
                h.sm = lt.sm + h.val + rt.sm
                h.mx = rk + rt.mx
    return h


def _ins(h: Node | None, q: Any, v: Any) -> Node:
    """Insert an absent key q (in h's parent frame) with value v.

    The caller has already added v to the sm of every node on the search path (``RPAITree.add``), so a
    node that does not rotate only needs its mn or mx refreshed; rotations recompute everything."""
    if h is None:
        return Node(q, v)
    r = h.rk
    if q < r:
        lt = _ins(h.left, q - r, v)
        h.left = lt
        h.mn = r + lt.mn
        rt = h.right
    else:
        rt = _ins(h.right, q - r, v)
        h.right = rt
        h.mx = r + rt.mx
        lt = h.left
    # LLRB fixup (as _fixup, minus the pull)
    if rt is not None and rt.red and (lt is None or not lt.red):
        h = _rot_l(h)
        lt = h.left
    if lt is not None and lt.red:
        ll = lt.left
        if ll is not None and ll.red:
            h = _rot_r(h)
        rt = h.right
        if rt is not None and rt.red and h.left.red:
            _flip(h)
    return h


def _move_red_left(h: Node) -> Node:
    _flip(h)
    rt = h.right
    rl = rt.left
    if rl is not None and rl.red:
        h.right = _rot_r(rt)
        h = _rot_l(h)
        _flip(h)
    return h


def _move_red_right(h: Node) -> Node:
    _flip(h)
    ll = h.left.left
    if ll is not None and ll.red:
        h = _rot_r(h)
        _flip(h)
    return h


def _delmin(h: Node) -> Node | None:
    lt = h.left
    if lt is None:
        return None
    if not lt.red:
        ll = lt.left
        if ll is None or not ll.red:
            h = _move_red_left(h)
    h.left = _delmin(h.left)
    return _fixup(h)


def _del(h: Node, q: Any) -> Node | None:
    """Delete the key q (in h's parent frame), which must be present in h's subtree."""
    if q < h.rk:
        lt = h.left
        if not lt.red:
            ll = lt.left
            if ll is None or not ll.red:
                h = _move_red_left(h)
        h.left = _del(h.left, q - h.rk)
    else:
        lt = h.left
        if lt is not None and lt.red:
            h = _rot_r(h)
        if q == h.rk and h.right is None:
            return None
        rt = h.right
        if not rt.red:
            rl = rt.left
            if rl is None or not rl.red:
                h = _move_red_right(h)
        if q == h.rk:
            rt = h.right
            delta = rt.mn  # abs(successor) - abs(h)
            m = rt
            while m.left is not None:
                m = m.left
            h.val = m.val
            h.rk += delta
            lt = h.left
            if lt is not None:
                lt.rk -= delta
                lt.mn -= delta
                lt.mx -= delta
            rt.rk -= delta
            rt.mn -= delta
            rt.mx -= delta
            h.right = _delmin(rt)
        else:
            h.right = _del(h.right, q - h.rk)
    return _fixup(h)


_POW3 = [1]


def _pow3(b: int) -> int:
    while len(_POW3) <= b:
        _POW3.append(_POW3[-1] * 3)
    return _POW3[b]


def _build(keys: list, vals: list, lo: int, hi: int, bh: int, pa: Any) -> Node | None:
    """A valid LLRB of black height bh over keys[lo:hi] (2^bh - 1 <= hi - lo <= 3^bh - 1), rooted under a
    parent with absolute key pa. 2-nodes where they fit, 3-nodes (black root, red left child) otherwise."""
    n = hi - lo
    if n == 0:
        return None
    sub = bh - 1
    if n - 1 <= 2 * (_pow3(sub) - 1):
        mid = lo + (n - 1) // 2
        k = keys[mid]
        x = Node(k - pa, vals[mid])
        x.red = False
        x.left = _build(keys, vals, lo, mid, sub, k)
        x.right = _build(keys, vals, mid + 1, hi, sub, k)
        _pull(x)
        return x
    m = n - 2
    a = m // 3
    b = (m - a) // 2
    i = lo + a  # the red left child
    j = i + 1 + b  # the black root
    kr = keys[j]
    kl = keys[i]
    x = Node(kr - pa, vals[j])
    x.red = False
    y = Node(kl - kr, vals[i])
    y.left = _build(keys, vals, lo, i, sub, kl)
    y.right = _build(keys, vals, i + 1, j, sub, kl)
    _pull(y)
    x.left = y
    x.right = _build(keys, vals, j + 1, hi, sub, kr)
    _pull(x)
    return x


def _build_tree(keys: list, vals: list) -> Node | None:
    n = len(keys)
    if n == 0:
        return None
    bh = (n + 1).bit_length() - 1  # floor(log2(n + 1)): 2^bh - 1 <= n <= 3^bh - 1
    return _build(keys, vals, 0, n, bh, 0)


def _height(x: Node | None) -> int:
    if x is None:
        return 0
    return 1 + max(_height(x.left), _height(x.right))
