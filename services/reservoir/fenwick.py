"""Fenwick trees over one key's item weights (the exact index, SJoin's counts): append, point update,
point read and the search for a position, on a list of ints or the compiled kernels' ``Fenwick``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol


class Nodes(Protocol):
    """A Fenwick tree's nodes: a list of ints (the Python steps), or the compiled kernels' ``Fenwick``
    (64-bit nodes while they fit, Python ints after), which the helpers below read and write alike."""

    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[int]: ...
    def __getitem__(self, i: int, /) -> int: ...
    def __setitem__(self, i: int, x: int, /) -> None: ...
    def append(self, x: int, /) -> None: ...
    def pop(self) -> int: ...


def _fen_append(tree: Nodes, w: int) -> None:
    i = len(tree) + 1
    s, low, j = w, i - (i & -i), i - 1
    while j > low:
        s += tree[j - 1]
        j -= j & -j
    tree.append(s)


def _fen_add(tree: Nodes, idx: int, delta: int) -> None:
    i, n = idx + 1, len(tree)
    while i <= n:
        tree[i - 1] += delta
        i += i & -i


def _fen_point(tree: Nodes, idx: int) -> int:
    """The single weight at ``idx`` (difference of two prefix sums)."""

    def prefix(i: int) -> int:
        s = 0
        while i > 0:
            s += tree[i - 1]
            i -= i & -i
        return s

    return prefix(idx + 1) - prefix(idx)


def _fen_find(tree: Nodes, z: int) -> tuple[int, int]:
    """The index holding position z of the concatenated weights, and z's offset inside it."""
    pos, step, n = 0, 1 << (len(tree).bit_length() - 1), len(tree)
    while step:
        nxt = pos + step
        if nxt <= n and tree[nxt - 1] <= z:
            pos = nxt
            z -= tree[nxt - 1]
        step >>= 1
    return pos, z
