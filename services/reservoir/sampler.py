"""Reservoir sampling with a predicate over batches with dummies (docs/reservoir/algorithm.md §2.2).

``Reservoir`` is Algorithm L (Li 1994) in its batched, predicate form: its state is the sample ``S``,
the threshold ``w`` (None until S first fills, then the k-th smallest of the real items' implicit
keys) and the pending skip ``q``, carried across batches. A batch is a length and random access
``get(z)`` returning a result row or None (a dummy); θ is evaluated only during the fill and at the
stops the skips land on (RSWP). ``ReplacementReservoir`` is k independent one-slot reservoirs (§2.6).
Every random draw comes from the engine's ``random.Random``; nothing here reads a clock or the OS.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterator
from typing import Any

Row = tuple[Any, ...]
Get = Callable[[int], Row | None]
Theta = Callable[[Row], bool] | None


def geo(rng: random.Random, w: float) -> int:
    """Failures before the first success of probability w (pitfalls: u in (0,1], log1p, Python int)."""
    if w >= 1.0:
        return 0
    u = 1.0 - rng.random()
    return math.floor(math.log(u) / math.log1p(-w))


def shrink(rng: random.Random, w: float, k: int) -> float:
    """The new threshold after a real stop: w times the maximum of k uniforms."""
    return w * math.exp(math.log(1.0 - rng.random()) / k)


class Counters:
    __slots__ = ("batches", "items", "stops_dummy", "stops_real", "theta_evals")

    def __init__(self) -> None:
        self.stops_real = self.stops_dummy = self.theta_evals = self.batches = self.items = 0

    def as_dict(self) -> dict[str, int]:
        return {s: getattr(self, s) for s in self.__slots__}

    def load(self, d: dict[str, int]) -> None:
        for s in self.__slots__:
            setattr(self, s, d[s])


class _Sampler:
    """What both reservoirs share: the generator, θ counted where it is evaluated, the work counters."""

    def __init__(self, k: int, rng: random.Random, theta: Theta = None) -> None:
        self.k, self.rng, self.theta = k, rng, theta
        self.counters = Counters()

    def _real(self, row: Row | None) -> bool:
        if row is None:
            return False
        if self.theta is None:
            return True
        self.counters.theta_evals += 1
        return self.theta(row)

    def _batch(self, n: int) -> bool:
        """Count a batch of n items; False for an empty one, which changes nothing."""
        if n <= 0:
            return False
        self.counters.batches += 1
        self.counters.items += n
        return True


class Reservoir(_Sampler):
    """A uniform k-sample without replacement of the real items seen (§2.2)."""

    def __init__(self, k: int, rng: random.Random, theta: Theta = None) -> None:
        super().__init__(k, rng, theta)
        self.sample: list[Row] = []
        self.w: float | None = None
        self.q = 0
        # the slots written since a reader last looked (None: not kept, or the sample was replaced
        # wholesale); derived, never part of the state
        self.journal: list[int] | None = None

    def update(self, n: int, get: Get) -> None:
        """Feed one batch of n items (BatchUpdate); an empty batch changes nothing."""
        if n <= 0:
            return
        c = self.counters  # _batch, in line: one call per insert is most of an insert's sampling cost
        c.batches += 1
        c.items += n
        if n <= self.q and self.w is not None and len(self.sample) >= self.k:  # the skip passes it all
            self.q -= n
            return
        pos, k, s = 0, self.k, self.sample
        while len(s) < k and pos < n:  # fill: real items only, in order
            row = get(pos)
            pos += 1
            if self._real(row):
                s.append(row)  # type: ignore[arg-type]
                if self.journal is not None:
                    self.journal.append(len(s) - 1)
        if len(s) < k:
            return
        rng = self.rng
        if self.w is None:  # exactly once in the reservoir's lifetime
            self.w = math.exp(math.log(1.0 - rng.random()) / k)
            self.q = geo(rng, self.w)
        w, q = self.w, self.q
        while n - pos > q:
            pos += q
            row = get(pos)
            pos += 1
            if self._real(row):
                c.stops_real += 1
                j = rng.randrange(k)
                s[j] = row  # type: ignore[assignment]
                if self.journal is not None:
                    self.journal.append(j)
                w = shrink(rng, w, k)
            else:
                c.stops_dummy += 1  # keep w; only a fresh skip
            q = geo(rng, w)
        self.w, self.q = w, q - (n - pos)

    def evict(self, slots: list[int], n: int, get: Get) -> None:
        """The results in these slots left the population; ``n``, ``get``: the whole current population
        as one batch with dummies (the index's J). Refills the slots so the state is again that of
        Algorithm L having seen the current real items (docs/reservoir/algorithm.md §5.2).

        View every item as carrying a private U(0,1) key, S the k smallest among the reals and w the
        k-th. Given (S, w), the keys of the unsampled items are i.i.d. U(w, 1), and the deleted items
        were chosen by the data, not the keys. So the new bottom-k is the survivors plus the next
        smallest keys among the unsampled entries of J: taking those entries in uniformly random order
        is taking them by key, and the first ``len(slots)`` real ones are the refill. If D entries were
        taken out of the L unsampled ones, the last key is the D-th smallest of L i.i.d. U(w, 1):
        w' = w + (1 - w)·Beta(D, L - D + 1), independent of which entries they were. The skip is
        redrawn (memorylessness). If the reals run out the sample is all of them and fills again."""
        s, k, gone = self.sample, self.k, set(slots)
        if self.w is None:  # not full: the sample is every real item; nothing to draw
            self.sample = [r for i, r in enumerate(s) if i not in gone]
            self.journal = None
            return
        rng = self.rng
        found: list[Row] = []
        taken = 0
        for z in random_order(rng, n):
            row = get(z)
            if row is not None and row in s:
                continue  # a sampled survivor (a deleted result is in no entry): its key is below w
            taken += 1
            if self._real(row):
                found.append(row)  # type: ignore[arg-type]
                if len(found) == len(slots):
                    break
        if len(found) < len(slots):  # fewer than k reals left: all of them, back to the fill
            self.sample = [r for i, r in enumerate(s) if i not in gone] + found
            self.journal = None
            self.w, self.q = None, 0
            return
        for i, row in zip(slots, found, strict=True):
            s[i] = row
        if self.journal is not None:
            self.journal += slots
        unsampled = n - (k - len(slots))
        self.w = self.w + (1.0 - self.w) * rng.betavariate(taken, unsampled - taken + 1)
        self.q = geo(rng, self.w)

    def reset(self, sample: list[Row], population: int) -> None:
        """The state of a reservoir that has seen ``population`` real items and holds ``sample`` (a
        uniform subset of them): w ~ Beta(k, M-k+1), and a fresh skip (§3.3, §5)."""
        self.sample = sample
        self.journal = None
        if population <= self.k:
            self.w, self.q = None, 0
            return
        self.w = self.rng.betavariate(self.k, population - self.k + 1)
        self.q = geo(self.rng, self.w)

    def rows(self) -> list[Row]:
        return list(self.sample)

    def state(self) -> dict[str, Any]:
        return {
            "sample": [list(r) for r in self.sample],
            "w": self.w,
            "q": str(self.q),
            "counters": self.counters.as_dict(),
        }

    def load(self, st: dict[str, Any]) -> None:
        self.sample = [tuple(r) for r in st["sample"]]
        self.journal = None
        self.w = st["w"]
        self.q = int(st["q"])
        self.counters.load(st["counters"])


class ReplacementReservoir(_Sampler):
    """k independent one-slot reservoirs: a uniform sample *with* replacement (§2.6).

    Each slot keeps its own threshold and the absolute stream position of its next stop; a heap of
    those positions makes a batch cost its stops, not k."""

    def __init__(self, k: int, rng: random.Random, theta: Theta = None) -> None:
        super().__init__(k, rng, theta)
        self.slots: list[Row] = []
        self.ws: list[float] = []
        self.heap: list[tuple[int, int]] = []  # (absolute next stop, slot)
        self.seen = 0  # items (dummies included) before the current batch

    def update(self, n: int, get: Get) -> None:
        if not self._batch(n):
            return
        c, rng = self.counters, self.rng
        pos, base = 0, self.seen
        if not self.slots:
            while pos < n:
                row = get(pos)
                pos += 1
                if self._real(row):
                    self.slots = [row] * self.k  # type: ignore[list-item]
                    self.ws = [1.0 - rng.random() for _ in range(self.k)]
                    self.heap = [(base + pos + geo(rng, w), j) for j, w in enumerate(self.ws)]
                    heapq.heapify(self.heap)
                    break
        end = base + n
        heap = self.heap
        cache: dict[int, Row | None] = {}
        while heap and heap[0][0] < end:
            at, j = heapq.heappop(heap)
            z = at - base
            if z not in cache:
                cache[z] = get(z)
            row = cache[z]
            if self._real(row):
                c.stops_real += 1
                self.slots[j] = row  # type: ignore[assignment]
                self.ws[j] = self.ws[j] * (1.0 - rng.random())
            else:
                c.stops_dummy += 1
            heapq.heappush(heap, (at + 1 + geo(rng, self.ws[j]), j))
        self.seen = end

    def evict(self, slots: list[int], n: int, get: Get) -> None:
        """The results in these slots left the population (``n``, ``get``: all of it, as J): each such
        slot refills as a one-result reservoir (``Reservoir.evict`` with k = 1: its next key is the
        minimum over the L = n entries taken in random order up to the first real one, D of them,
        w' = w + (1 - w)·Beta(D, n - D + 1)); if no real item is left, every slot empties."""
        rng = self.rng
        redrawn: dict[int, int] = {}
        for j in slots:
            taken = 0
            for z in random_order(rng, n):
                taken += 1
                row = get(z)
                if self._real(row):
                    self.slots[j] = row  # type: ignore[assignment]
                    break
            else:  # the population has no real item: every slot held a deleted one
                self.slots, self.ws, self.heap = [], [], []
                return
            w = self.ws[j]
            self.ws[j] = w + (1.0 - w) * rng.betavariate(taken, n - taken + 1)
            redrawn[j] = self.seen + geo(rng, self.ws[j])
        kept = [(at, j) for at, j in self.heap if j not in redrawn]
        self.heap = kept + [(at, j) for j, at in redrawn.items()]
        heapq.heapify(self.heap)

    def reset(self, keep: list[Row | None], population: int, draw: Callable[[], Row]) -> None:
        """After deletes: slots whose result survived keep it, the others draw afresh; each slot then
        has seen ``population`` real items (w ~ Beta(1, M)) (§3.3)."""
        rng = self.rng
        if population == 0:
            self.slots, self.ws, self.heap = [], [], []
            return
        self.slots = [r if r is not None else draw() for r in keep]
        self.ws = [rng.betavariate(1, population) for _ in range(self.k)]
        self.heap = [(self.seen + geo(rng, w), j) for j, w in enumerate(self.ws)]
        heapq.heapify(self.heap)

    def rows(self) -> list[Row]:
        return list(self.slots)

    def state(self) -> dict[str, Any]:
        return {
            "slots": [list(r) for r in self.slots],
            "ws": self.ws,
            "heap": [[str(a), j] for a, j in self.heap],
            "seen": str(self.seen),
            "counters": self.counters.as_dict(),
        }

    def load(self, st: dict[str, Any]) -> None:
        self.slots = [tuple(r) for r in st["slots"]]
        self.ws = list(st["ws"])
        self.heap = [(int(a), j) for a, j in st["heap"]]
        self.seen = int(st["seen"])
        self.counters.load(st["counters"])


def random_order(rng: random.Random, n: int) -> Iterator[int]:
    """0..n-1 in uniformly random order, drawn lazily (Fisher-Yates over a sparse swap map)."""
    swapped: dict[int, int] = {}
    for i in range(n):
        j = rng.randrange(i, n)
        yield swapped.get(j, j)
        swapped[j] = swapped.get(i, i)


def rs_without_pushdown(
    k: int, rng: random.Random, items: list[Any], theta: Callable[[Any], bool]
) -> tuple[list[Any], int]:
    """The RS baseline of §7 (E4): θ on every item, the reals fed to plain Algorithm L; returns the
    sample and the number of θ evaluations (len(items))."""
    res = Reservoir(k, rng)
    reals = [x for x in items if theta(x)]
    res.update(len(reals), lambda z: reals[z])
    return res.sample, len(items)
