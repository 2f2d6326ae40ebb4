"""RPAI tree (services/vwap/trees/rpai.py) against a plain dict reference model (docs/vwap/algorithm.md
§2, §7.1)."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ivmstream.services.vwap.trees.rpai import RPAITree
from ivmstream.services.vwap.trees.vec import Vec

# ---------------------------------------------------------------------------------------------------
# Reference model: a dict with sorted scans. Obviously correct, O(n) everything.


class RefMap:
    def __init__(self, zero: Any = 0) -> None:
        self.zero = zero
        self.d: dict = {}

    def sorted_items(self) -> list:
        return sorted(self.d.items())

    def sorted_keys(self) -> list:
        return sorted(self.d)

    def add(self, k: Any, v: Any) -> None:
        self.d[k] = self.d[k] + v if k in self.d else v

    def sum_where(self, pred: Any) -> Any:
        s = self.zero
        for k, v in self.sorted_items():
            if pred(k):
                s = s + v
        return s

    def shift(self, k: Any, d: Any, inclusive: bool) -> str:
        """Apply the shift (merging equal keys) and say which path the tree must take."""
        moved = [x for x in self.d if (x >= k if inclusive else x > k)]
        kept = [x for x in self.d if not (x >= k if inclusive else x > k)]
        kind = "plain"
        if d < 0 and moved and kept:
            s, p = min(moved), max(kept)
            kind = "merge" if s + d == p else "fallback" if s + d < p else "plain"
        new: dict = {}
        for x, v in self.d.items():
            nx = x + d if (x >= k if inclusive else x > k) else x
            new[nx] = new[nx] + v if nx in new else v
        self.d = new
        return kind

    def min_key_prefix_gt(self, x: Any) -> Any:
        acc = self.zero
        for k, v in self.sorted_items():
            acc = acc + v
            if acc > x:
                return k
        return None


def shape(t: RPAITree) -> list:
    """In-order node identities and colors: unchanged iff no restructuring happened."""
    out: list = []

    def walk(x: Any) -> None:
        if x is not None:
            walk(x.left)
            out.append((id(x), x.red))
            walk(x.right)

    walk(t.root)
    return out


def assert_same(t: RPAITree, ref: RefMap) -> None:
    t.check()
    assert list(t.items()) == ref.sorted_items()
    assert len(t) == len(ref.d)
    assert bool(t) == bool(ref.d)
    assert t.total() == ref.sum_where(lambda k: True)
    keys = ref.sorted_keys()
    assert t.min_key() == (keys[0] if keys else None)
    assert t.max_key() == (keys[-1] if keys else None)


# ---------------------------------------------------------------------------------------------------
# Differential state machine. Subclasses change the key and payload types.

KEY = st.integers(-20, 20)
VAL = st.integers(-3, 9)


class RPAIMachine(RuleBasedStateMachine):
    scalar = True  # values are ordered: min_key_prefix_gt is meaningful

    def zero(self) -> Any:
        return 0

    def key(self, i: int) -> Any:
        return i

    def val(self, i: int) -> Any:
        return i

    def __init__(self) -> None:
        super().__init__()
        self.t = RPAITree(self.zero())
        self.ref = RefMap(self.zero())
        self.merges = 0
        self.fallbacks = 0

    def existing(self, i: int) -> Any:
        keys = self.ref.sorted_keys()
        return keys[i % len(keys)]

    @rule(k=KEY, v=VAL)
    def add(self, k: int, v: int) -> None:
        self.t.add(self.key(k), self.val(v))
        self.ref.add(self.key(k), self.val(v))

    @rule(k=KEY, v=VAL)
    def put(self, k: int, v: int) -> None:
        self.t.put(self.key(k), self.val(v))
        self.ref.d[self.key(k)] = self.val(v)

    @precondition(lambda self: self.ref.d)
    @rule(i=st.integers(0, 1000), v=VAL)
    def add_existing(self, i: int, v: int) -> None:
        k = self.existing(i)
        self.t.add(k, self.val(v))
        self.ref.add(k, self.val(v))

    @precondition(lambda self: self.ref.d)
    @rule(i=st.integers(0, 1000))
    def delete_existing(self, i: int) -> None:
        k = self.existing(i)
        assert self.t.delete(k) == self.ref.d.pop(k)

    @rule(k=KEY)
    def delete_maybe(self, k: int) -> None:
        kk = self.key(k)
        if kk in self.ref.d:
            assert self.t.delete(kk) == self.ref.d.pop(kk)
        else:
            with pytest.raises(KeyError):
                self.t.delete(kk)

    @rule(k=st.integers(-40, 40))
    def point_queries(self, k: int) -> None:
        kk = self.key(k)
        assert self.t.get(kk, "absent") == self.ref.d.get(kk, "absent")
        assert (kk in self.t) == (kk in self.ref.d)
        keys = self.ref.sorted_keys()
        assert self.t.pred_le(kk) == max((x for x in keys if x <= kk), default=None)
        assert self.t.pred_lt(kk) == max((x for x in keys if x < kk), default=None)
        assert self.t.succ_gt(kk) == min((x for x in keys if x > kk), default=None)
        assert self.t.succ_ge(kk) == min((x for x in keys if x >= kk), default=None)

    @rule(k=st.integers(-40, 40))
    def sum_queries(self, k: int) -> None:
        kk = self.key(k)
        ref = self.ref
        assert self.t.prefix_le(kk) == ref.sum_where(lambda x: x <= kk)
        assert self.t.prefix_lt(kk) == ref.sum_where(lambda x: x < kk)
        assert self.t.suffix_gt(kk) == ref.sum_where(lambda x: x > kk)
        assert self.t.suffix_ge(kk) == ref.sum_where(lambda x: x >= kk)

    @precondition(lambda self: self.ref.d)
    @rule(i=st.integers(0, 1000))
    def sum_queries_on_keys(self, i: int) -> None:
        """Thresholds landing exactly on keys."""
        kk = self.existing(i)
        ref = self.ref
        assert self.t.prefix_le(kk) == ref.sum_where(lambda x: x <= kk)
        assert self.t.prefix_lt(kk) == ref.sum_where(lambda x: x < kk)
        assert self.t.suffix_gt(kk) == ref.sum_where(lambda x: x > kk)
        assert self.t.suffix_ge(kk) == ref.sum_where(lambda x: x >= kk)

    @rule(x=st.integers(-5, 120))
    def min_key_prefix_gt(self, x: int) -> None:
        if not self.scalar or any(v < 0 for v in self.ref.d.values()):
            return  # only defined for non-negative, ordered payloads
        xx = self.val(x)
        assert self.t.min_key_prefix_gt(xx) == self.ref.min_key_prefix_gt(xx)

    @rule(k=st.integers(-40, 40), d=st.integers(1, 15), inclusive=st.booleans())
    def shift_positive(self, k: int, d: int, inclusive: bool) -> None:
        before = shape(self.t)
        self.t.shift(self.key(k), self.key(d), inclusive)
        assert self.ref.shift(self.key(k), self.key(d), inclusive) == "plain"
        assert shape(self.t) == before  # single path: no restructuring, no node replaced

    @rule(k=st.integers(-40, 40), d=st.integers(-15, -1), inclusive=st.booleans())
    def shift_negative(self, k: int, d: int, inclusive: bool) -> None:
        self.t.shift(self.key(k), self.key(d), inclusive)
        kind = self.ref.shift(self.key(k), self.key(d), inclusive)
        self.merges += kind == "merge"
        self.fallbacks += kind == "fallback"

    @precondition(lambda self: len(self.ref.d) >= 2)
    @rule(i=st.integers(0, 1000), inclusive=st.booleans(), at_key=st.booleans())
    def shift_negative_exact_merge(self, i: int, inclusive: bool, at_key: bool) -> None:
        """s + d == p exactly: the merge-before-shift path. k is a key itself or lies strictly between."""
        keys = self.ref.sorted_keys()
        j = i % (len(keys) - 1)
        p, s = keys[j], keys[j + 1]
        if at_key:
            k = s if inclusive else p
        elif isinstance(p, int):
            k = -((-p - s) // 2) if inclusive else (p + s) // 2  # in (p, s] resp. [p, s)
        else:
            k = (p + s) / 2
        m0, f0 = self.t.shift_merges, self.t.shift_fallbacks
        self.t.shift(k, p - s, inclusive)
        assert self.ref.shift(k, p - s, inclusive) == "merge"
        assert (self.t.shift_merges, self.t.shift_fallbacks) == (m0 + 1, f0)
        self.merges += 1

    @precondition(lambda self: len(self.ref.d) >= 2)
    @rule(i=st.integers(0, 1000), extra=st.integers(1, 10), inclusive=st.booleans())
    def shift_negative_fallback(self, i: int, extra: int, inclusive: bool) -> None:
        """s + d < p: shifted keys fall below an unshifted key."""
        keys = self.ref.sorted_keys()
        j = i % (len(keys) - 1)
        p, s = keys[j], keys[j + 1]
        d = p - s - self.key(extra)
        k = s if inclusive else p
        m0, f0 = self.t.shift_merges, self.t.shift_fallbacks
        self.t.shift(k, d, inclusive)
        assert self.ref.shift(k, d, inclusive) == "fallback"
        assert (self.t.shift_merges, self.t.shift_fallbacks) == (m0, f0 + 1)
        self.fallbacks += 1

    @rule()
    def rebuild(self) -> None:
        self.t = RPAITree.from_sorted(self.t.items(), zero=self.zero())
        self.t.shift_merges, self.t.shift_fallbacks = self.merges, self.fallbacks

    @invariant()
    def agrees(self) -> None:
        assert_same(self.t, self.ref)
        assert (self.t.shift_merges, self.t.shift_fallbacks) == (self.merges, self.fallbacks)


class DecimalVecMachine(RPAIMachine):
    """Decimal keys (quarter ticks) and Vec payloads."""

    scalar = False

    def zero(self) -> Any:
        return Vec.zero(2)

    def key(self, i: int) -> Any:
        return Decimal(i) / 4

    def val(self, i: int) -> Any:
        return Vec((i, 3 * i - 1))


class FractionMachine(RPAIMachine):
    """Fraction keys (thirds) and Decimal payloads."""

    def key(self, i: int) -> Any:
        return Fraction(i, 3)

    def val(self, i: int) -> Any:
        return Decimal(i) / 2


STATEFUL = settings(derandomize=True, max_examples=200, stateful_step_count=40, deadline=None)

TestRPAIIntInt = RPAIMachine.TestCase
TestRPAIIntInt.settings = STATEFUL
TestRPAIDecimalVec = DecimalVecMachine.TestCase
TestRPAIDecimalVec.settings = settings(STATEFUL, max_examples=100)
TestRPAIFraction = FractionMachine.TestCase
TestRPAIFraction.settings = settings(STATEFUL, max_examples=100)


# ---------------------------------------------------------------------------------------------------
# Deterministic tests


def test_vec_payload_with_decimal_keys_seeded() -> None:
    rng = random.Random(7)
    zero = Vec.zero(2)
    t, ref = RPAITree(zero), RefMap(zero)
    for _ in range(1500):
        k = Decimal(rng.randint(-30, 30)) / 100
        r = rng.random()
        if r < 0.5:
            v = Vec((rng.randint(0, 5), rng.randint(-5, 5)))
            t.add(k, v)
            ref.add(k, v)
        elif r < 0.7 and ref.d:
            kk = rng.choice(ref.sorted_keys())
            assert t.delete(kk) == ref.d.pop(kk)
        else:
            d = Decimal(rng.randint(-10, 10)) / 100
            incl = rng.random() < 0.5
            t.shift(k, d, incl)
            ref.shift(k, d, incl)
        q = Decimal(rng.randint(-40, 40)) / 100
        assert t.prefix_le(q) == ref.sum_where(lambda x, q=q: x <= q)
        assert t.suffix_gt(q) == ref.sum_where(lambda x, q=q: x > q)
        assert_same(t, ref)
    assert isinstance(t.total(), Vec)


def test_empty_tree() -> None:
    t = RPAITree(Vec.zero(3))
    t.check()
    assert len(t) == 0 and not t
    assert t.total() == Vec.zero(3) and t.prefix_le(5) == Vec.zero(3) and t.suffix_ge(5) == Vec.zero(3)
    assert t.min_key() is None and t.max_key() is None and t.pred_le(1) is None and t.succ_gt(1) is None
    assert t.min_key_prefix_gt(0) is None and t.get(1) is None and 1 not in t
    assert list(t.items()) == [] and t.keys() == [] and t.height() == 0
    t.shift(0, 5)
    t.shift(0, -5)
    assert (t.shift_merges, t.shift_fallbacks) == (0, 0)
    with pytest.raises(KeyError):
        t.delete(1)


def test_zero_value_node_is_kept() -> None:
    t = RPAITree()
    t.add(5, 3)
    t.add(5, -3)
    t.check()
    assert 5 in t and t.get(5) == 0 and len(t) == 1
    assert t.delete(5) == 0 and len(t) == 0


def _ref_height_bound(n: int) -> float:
    return 2 * math.log2(n + 1)


def _zigzag(n: int) -> list[int]:
    out = []
    lo, hi = 0, n - 1
    while lo <= hi:
        out.append(lo)
        if hi != lo:
            out.append(hi)
        lo += 1
        hi -= 1
    return out


ORDERS = {
    "ascending": lambda n: list(range(n)),
    "descending": lambda n: list(range(n - 1, -1, -1)),
    "zigzag": _zigzag,
    "random": lambda n: random.Random(3).sample(range(n), n),
}


@pytest.mark.parametrize("ins", sorted(ORDERS))
@pytest.mark.parametrize("dele", sorted(ORDERS))
def test_adversarial_orders_2000(ins: str, dele: str) -> None:
    n = 2000
    t, ref = RPAITree(), RefMap()
    for step, k in enumerate(ORDERS[ins](n)):
        t.add(k, k % 7)
        ref.add(k, k % 7)
        if step % 97 == 0:
            t.check()
            assert t.height() <= _ref_height_bound(len(t))
    assert_same(t, ref)
    assert t.height() <= _ref_height_bound(n)
    assert t.prefix_le(n // 3) == ref.sum_where(lambda x: x <= n // 3)
    for step, k in enumerate(ORDERS[dele](n)):
        assert t.delete(k) == ref.d.pop(k)
        if step % 97 == 0:
            t.check()
            assert t.height() <= _ref_height_bound(len(t))
    assert_same(t, ref)
    assert t.root is None


def test_adversarial_small_every_step() -> None:
    """Every insert and delete of 200 keys, with the full invariant check after each operation."""
    for order in ORDERS.values():
        t, ref = RPAITree(), RefMap()
        keys = order(200)
        for k in keys:
            t.put(k, 1)
            ref.d[k] = 1
            t.check()
            assert t.height() <= _ref_height_bound(len(t))
        for k in reversed(keys):
            t.delete(k)
            del ref.d[k]
            t.check()
            assert t.height() <= _ref_height_bound(len(t))
        assert_same(t, ref)


def test_repeated_keys_and_shift_cycles() -> None:
    """Repeated price levels, full delete, rebuild, and shift up/down cycles keep the tree valid."""
    t, ref = RPAITree(), RefMap()
    for _ in range(3):
        for k in [5, 5, 3, 3, 9, 9, 1, 7, 7] * 5:
            t.add(k, 2)
            ref.add(k, 2)
        for k in range(-5, 15):
            t.shift(k, 3, inclusive=bool(k % 2))
            ref.shift(k, 3, bool(k % 2))
            t.shift(k + 1, -3, inclusive=bool(k % 2))
            ref.shift(k + 1, -3, bool(k % 2))
            assert_same(t, ref)
        for k in ref.sorted_keys():
            assert t.delete(k) == ref.d.pop(k)
        assert_same(t, ref)
        assert not t


@pytest.mark.parametrize("n", [*range(0, 130), 255, 256, 257, 1000, 3280, 3281])
def test_from_sorted_all_sizes(n: int) -> None:
    items = [(3 * i - 50, i % 5) for i in range(n)]
    t = RPAITree.from_sorted(items)
    ref = RefMap()
    ref.d = dict(items)
    assert_same(t, ref)
    assert t.height() <= _ref_height_bound(n)
    # the built tree stays a valid LLRB under further updates
    for i in range(0, n, 3):
        t.delete(3 * i - 50)
        del ref.d[3 * i - 50]
    t.add(10**6, 1)
    ref.add(10**6, 1)
    assert_same(t, ref)


def test_from_sorted_rejects_unsorted() -> None:
    with pytest.raises(ValueError):
        RPAITree.from_sorted([(1, 1), (1, 2)])
    with pytest.raises(ValueError):
        RPAITree.from_sorted([(2, 1), (1, 2)])


def test_min_key_prefix_gt_thresholds() -> None:
    rng = random.Random(11)
    t, ref = RPAITree(), RefMap()
    for _ in range(300):
        k, v = rng.randint(0, 500), rng.randint(0, 4)
        t.add(k, v)
        ref.add(k, v)
    total = ref.sum_where(lambda k: True)
    for x in range(-2, total + 2):
        assert t.min_key_prefix_gt(x) == ref.min_key_prefix_gt(x)
    # Fraction thresholds against integer sums
    for x in (Fraction(1, 3), Fraction(total, 2), Fraction(2 * total - 1, 2)):
        assert t.min_key_prefix_gt(x) == ref.min_key_prefix_gt(x)


# ---------------------------------------------------------------------------------------------------
# The paper's worked examples and the shift counters


def test_fig4_positive_shift_single_path() -> None:
    """Fig. 4: shiftKeys(k=9, d=10) raises every key > 9 by 10 without restructuring."""
    keys = [2, 4, 6, 9, 13, 15, 17, 19, 21]
    t, ref = RPAITree(), RefMap()
    for k in keys:
        t.add(k, k)
        ref.add(k, k)
    before = shape(t)
    t.shift(9, 10)
    ref.shift(9, 10, False)
    assert_same(t, ref)
    assert shape(t) == before
    assert (t.shift_merges, t.shift_fallbacks) == (0, 0)
    # inclusive form at an existing key
    t.shift(9, 10, inclusive=True)
    ref.shift(9, 10, True)
    assert_same(t, ref)
    assert shape(t) == before


def test_fig5_negative_shift_forces_fallback() -> None:
    """Fig. 5: shiftKeys(k=19, d=-15) moves the largest key (20 -> 5) below many unshifted keys."""
    keys = [1, 3, 7, 9, 11, 13, 15, 17, 19, 20]
    t, ref = RPAITree(), RefMap()
    for k in keys:
        t.add(k, 10 * k)
        ref.add(k, 10 * k)
    t.shift(19, -15)
    assert ref.shift(19, -15, False) == "fallback"
    assert_same(t, ref)
    assert (t.shift_merges, t.shift_fallbacks) == (0, 1)
    # keys are now 1, 3, 5, ..., 19; 22 - 15 = 7 lands on an existing key below 19: fallback that merges
    t.add(22, 1)
    ref.add(22, 1)
    t.shift(19, -15)
    assert ref.shift(19, -15, False) == "fallback"
    assert_same(t, ref)
    assert t.get(7) == ref.d[7]
    assert (t.shift_merges, t.shift_fallbacks) == (0, 2)


def test_negative_shift_counters() -> None:
    t, ref = RPAITree(), RefMap()
    for k in (10, 20, 30, 40):
        t.add(k, k // 10)
        ref.add(k, k // 10)
    cases = [
        (20, -5, False, "plain"),  # 30 -> 25 stays above 20
        (25, -5, True, "merge"),  # 25 -> 20 lands on 20
        (100, -5, False, "plain"),  # nothing shifted
        (0, -100, False, "plain"),  # everything shifted: no unshifted key
        (-85, -10, False, "merge"),  # keys -90, -80, -70: -80 lands on -90
    ]
    merges = fallbacks = 0
    for k, d, incl, expected in cases:
        kind = ref.shift(k, d, incl)
        assert kind == expected
        t.shift(k, d, incl)
        merges += kind == "merge"
        fallbacks += kind == "fallback"
        assert_same(t, ref)
        assert (t.shift_merges, t.shift_fallbacks) == (merges, fallbacks)
    assert merges >= 1
    # an explicit fallback
    keys = ref.sorted_keys()
    kind = ref.shift(keys[0], keys[0] - keys[-1] - 1, False)
    t.shift(keys[0], keys[0] - keys[-1] - 1)
    assert kind == "fallback" and t.shift_fallbacks == fallbacks + 1
    assert_same(t, ref)


def test_merge_before_shift_keeps_other_nodes() -> None:
    """The merge path is O(log n): it deletes one node and re-adds to another, no rebuild."""
    n = 1000
    t, ref = RPAITree(), RefMap()
    for i in range(n):
        t.add(2 * i, 1)
        ref.add(2 * i, 1)
    ids = {id(x) for x, _ in _nodes(t)}
    t.shift(500, -2)  # 502 -> 500 collides with 500
    assert ref.shift(500, -2, False) == "merge"
    assert_same(t, ref)
    assert t.get(500) == 2 and t.shift_merges == 1 and t.shift_fallbacks == 0
    assert len(ids - {id(x) for x, _ in _nodes(t)}) == 1  # exactly one node removed, no rebuild


def _nodes(t: RPAITree) -> list:
    out: list = []
    stack = [t.root] if t.root is not None else []
    while stack:
        x = stack.pop()
        out.append((x, x.rk))
        stack.extend(c for c in (x.left, x.right) if c is not None)
    return out


def test_check_detects_corruption() -> None:
    t = RPAITree.from_sorted([(i, 1) for i in range(20)])
    t.check()
    x = t.root.left
    x.mx += 1
    with pytest.raises(AssertionError, match="mx"):
        t.check()
    x.mx -= 1
    x.sm += 1
    with pytest.raises(AssertionError, match="sm"):
        t.check()
    x.sm -= 1
    t._n += 1
    with pytest.raises(AssertionError, match="len counter"):
        t.check()
    t._n -= 1
    t.root.right.red = True
    with pytest.raises(AssertionError, match="red"):
        t.check()
