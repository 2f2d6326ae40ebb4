"""The compiled ledger loop (services/vwap/_kernels.c) leaves exactly what its Python reference leaves
(services/vwap/kernels.py): the same bag and netted levels, in the same order, the same change log, the
same refusals and the same plan updates, on streams with deletes of absent tuples, non-positive
volumes, brokers out of range, unknown relations, multiplicities beyond 64 bits and exact decimals;
and an engine reaches the same state and answers on either loop."""

from __future__ import annotations

import copy
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.sdk import UpdateEvent
from ivmstream.services.vwap import engine as vwap_engine
from ivmstream.services.vwap import kernels
from tests.unit.extension_checks import printed_in_child, require_built

require_built(kernels.compiled, "vwap kernels", "ivmstream.services.vwap._kernels", "services/vwap/_*.c")

C = kernels.compiled
COLUMNS = {rel: ("t", "id", "broker_id", "volume", "price") for rel in ("bids", "asks")}

# A small domain so tuples repeat and deletes hit live tuples; volumes of both signs and zero, ints
# whose products or sums leave 64 bits, ints beyond 64 bits and exact decimals; deltas of both signs
# beyond 64 bits too.
numbers = st.one_of(
    st.integers(-2, 6),
    st.sampled_from([2**62, 2**61 + 3, 2**64 + 1, 2**70, -(2**65)]),
    st.sampled_from([Decimal("1.5"), Decimal("2.50"), Decimal("-0.5"), Decimal("0")]),
)
deltas = st.one_of(st.integers(-3, 3), st.sampled_from([2**63, -(2**63) - 1, 2**70])).filter(bool)
plain_rows = st.fixed_dictionaries(
    {
        "t": st.integers(0, 2),
        "id": st.integers(0, 2),
        "broker_id": st.integers(-1, 4),
        "volume": numbers,
        "price": numbers,
    }
)


def _copied_key(key: str) -> str:
    """An equal key, as another string object where CPython makes one (the compiled loop matches a row's
    keys against the columns by identity and must look up any other)."""
    return "".join(list(key))


# Rows as the decoder makes them (keys in the columns' order) and in any other shape: keys shuffled,
# equal but not identical key strings, an extra column.
rows = st.one_of(
    plain_rows,
    plain_rows.flatmap(lambda r: st.permutations(list(r.items()))).map(dict),
    plain_rows.map(lambda r: {_copied_key(k): v for k, v in r.items()}),
    plain_rows.map(lambda r: {**r, "extra": 0}),
    plain_rows.map(lambda r: {"extra": 0, **r}),
)
# Netted levels a batch meets (empty, or left by an earlier pass), decimal and large keys and sums among them.
netted_levels = st.dictionaries(
    st.one_of(st.integers(-2, 6), st.sampled_from([Decimal("1.5"), Decimal("3"), 2**70])),
    st.tuples(numbers, numbers).map(list),
    max_size=4,
)
events = st.lists(
    st.builds(UpdateEvent, st.sampled_from(["bids", "bids", "asks", "trades"]), rows, deltas), max_size=40
)


def run(loop: Any, evs: list[UpdateEvent], bag: Any, netted: Any, logged: bool, brokers: Any) -> Any:
    """Everything a run leaves and says, on its own copies of the bag and netted levels."""
    bag, netted = copy.deepcopy(bag), copy.deepcopy(netted)
    changed: dict[str, dict[Any, bool]] | None = {} if logged else None
    refused: list[Any] = []
    updates: list[Any] = []
    net = loop(
        evs,
        bag,
        COLUMNS,
        frozenset({"bids"}),
        netted,
        None if netted is not None else (lambda rel, row, d: updates.append((rel, dict(row), d))),
        changed,
        True,
        brokers,
        lambda i, ev, have: refused.append((i, ev.relation, have)),
    )
    levels = None if netted is None else {rel: list(lv.items()) for rel, lv in netted.items()}
    log = None if changed is None else [(rel, list(touched.items())) for rel, touched in changed.items()]
    return net, {rel: list(ledger.items()) for rel, ledger in bag.items()}, levels, log, refused, updates


@settings(max_examples=150, deadline=None)
@given(events, events, st.one_of(st.none(), netted_levels), st.booleans(), st.sampled_from([None, 3]))
def test_the_compiled_ledger_loop_leaves_what_the_python_loop_leaves(first, batch, levels, logged, brokers):
    # A bag left by an earlier batch, so deletes meet live tuples and tuples cancel to zero.
    bag: dict[str, dict[Any, int]] = {"bids": {}, "asks": {}}
    kernels.py_ledger_pass(first, bag, COLUMNS, frozenset(), None, None, None, False, None, lambda *a: None)
    netted = None if levels is None else {"bids": levels}
    want = run(kernels.py_ledger_pass, batch, bag, netted, logged, brokers)
    got = run(C.ledger_pass, batch, bag, netted, logged, brokers)
    assert got == want


# Long batches of valid events on a few price levels: a level's sums grow over many events (the compiled
# loop sums them in C before they reach the netted dict).
valid_rows = st.fixed_dictionaries(
    {
        "t": st.integers(0, 3),
        "id": st.integers(0, 3),
        "broker_id": st.integers(0, 2),
        "volume": st.integers(1, 5),
        "price": st.integers(1, 3),
    }
)
long_batches = st.lists(
    st.builds(UpdateEvent, st.just("bids"), valid_rows, st.sampled_from([1, 1, 2, -1])), max_size=300
)


@settings(max_examples=40, deadline=None)
@given(long_batches, long_batches, st.one_of(st.none(), netted_levels))
def test_the_compiled_loop_nets_long_batches_as_the_python_loop_does(first, batch, levels):
    bag: dict[str, dict[Any, int]] = {"bids": {}, "asks": {}}
    kernels.py_ledger_pass(first, bag, COLUMNS, frozenset(), None, None, None, False, None, lambda *a: None)
    netted = {"bids": {} if levels is None else levels}
    assert run(C.ledger_pass, batch, bag, netted, False, None) == run(
        kernels.py_ledger_pass, batch, bag, netted, False, None
    )


def test_the_compiled_loop_raises_where_the_python_loop_raises():
    bad = [UpdateEvent("bids", {"t": 1, "id": 1, "broker_id": 0, "volume": 1}, 1)]  # no price column
    for loop in (kernels.py_ledger_pass, C.ledger_pass):
        with pytest.raises(KeyError):
            loop(bad, {"bids": {}}, COLUMNS, frozenset(), None, None, None, False, None, lambda *a: None)
    with pytest.raises(TypeError):
        C.ledger_pass([], {}, COLUMNS, frozenset(), None, None, [], True, None, print)  # changed: a list


class PlainEvent:  # fields in an instance dict, not slots
    def __init__(self, relation: str, row: dict[str, Any], delta: int) -> None:
        self.relation, self.row, self.delta = relation, row, delta


class SlotEvent:
    __slots__ = ("delta", "relation", "row")


def test_the_compiled_loop_reads_events_of_any_class_as_the_python_loop_does():
    row = {"t": 1, "id": 1, "broker_id": 0, "volume": 2, "price": 3}
    for loop in (kernels.py_ledger_pass, C.ledger_pass):
        bag: dict[str, dict[Any, int]] = {"bids": {}, "asks": {}}
        evs = [PlainEvent("bids", row, 2), UpdateEvent("bids", row, -1)]
        assert loop(evs, bag, COLUMNS, frozenset(), None, None, None, True, None, print) == 1
        assert bag["bids"] == {(1, 1, 0, 2, 3): 1}
        unset = SlotEvent()
        unset.relation, unset.row = "bids", row  # no delta
        with pytest.raises(AttributeError):
            loop([unset], bag, COLUMNS, frozenset(), None, None, None, True, None, print)


def test_the_engine_uses_the_compiled_kernels_unless_told_not_to():
    assert kernels.ACTIVE == "compiled" and kernels.ledger_pass is C.ledger_pass
    assert kernels.ledger_columns is C.ledger_columns
    assert kernels.bag_entries is kernels.compiled_bag_entries
    plan = vwap_engine.VwapEngine("vwap", "crosscheck").plan
    assert type(plan).__name__ == "NativeCrossCheckPlan"
    code = (
        "from ivmstream.services.vwap import kernels; "
        "from ivmstream.services.vwap.engine import VwapEngine; "
        "print(kernels.ACTIVE, kernels.ledger_pass is kernels.py_ledger_pass, "
        "kernels.ledger_columns is kernels.py_ledger_columns, kernels.bag_entries is kernels.py_bag_entries, "
        "type(VwapEngine('vwap', 'crosscheck').plan).__name__)"
    )
    out = printed_in_child(code)
    assert out == ["python", "True", "True", "True", "CrossCheckPlan"]


# Order-book events as a plan takes them: positive prices (ints or decimals), volumes that are mostly
# valid, a few brokers, inserts and deletes.
book_rows = st.fixed_dictionaries(
    {
        "t": st.integers(0, 2),
        "id": st.integers(0, 2),
        "broker_id": st.integers(0, 3),
        "volume": st.one_of(st.integers(-1, 4), st.sampled_from([Decimal("1.5"), Decimal("0.25")])),
        "price": st.one_of(st.integers(1, 5), st.sampled_from([Decimal("2.5"), Decimal("4.75")])),
    }
)
book_batches = st.lists(
    st.lists(
        st.builds(UpdateEvent, st.sampled_from(["bids", "asks"]), book_rows, st.sampled_from([1, 1, -1, 2])),
        max_size=25,
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None)
@given(
    book_batches,
    st.sampled_from(["auto", "rpai", "crosscheck", "dbtoaster"]),
    st.sampled_from(["vwap", "vwap-paper", "mst"]),
)
def test_an_engine_reaches_the_same_state_on_either_kernels(batches, strategy, query):
    if query == "mst" and strategy == "crosscheck":
        strategy = "rpai"
    engines = []
    # The engine reads ``ledger_pass`` per batch and ``ACTIVE`` when it makes a crosscheck plan.
    for loop, active in ((C.ledger_pass, "compiled"), (kernels.py_ledger_pass, "python")):
        saved = kernels.ledger_pass, kernels.ACTIVE
        kernels.ledger_pass, kernels.ACTIVE = loop, active
        try:
            eng = vwap_engine.VwapEngine(query, strategy, {"brokers": 3} if query == "mst" else None)
            said = []
            for i, batch in enumerate(batches):
                if i == 2:
                    list(eng.all_entries())  # a checkpoint took the state: tuples are logged from here
                refusals = eng.apply(batch)
                said.append((list(refusals), eng.result()))
            engines.append((said, eng.snapshot(), sorted(eng.changed_entries())))
            engines.append(type(eng.plan).__name__)
        finally:
            kernels.ledger_pass, kernels.ACTIVE = saved
    assert engines[0] == engines[2]
    if strategy == "crosscheck":
        assert engines[1::2] == ["NativeCrossCheckPlan", "CrossCheckPlan"]


# --- the crosscheck plan on the compiled level tree ----------------------------------------------------

# Netted level changes as the engine hands them over: a price, a count change and a weight change that
# keep every live level's count and weight positive. Prices and weights are mostly small ints; some are
# decimals, negative prices or near 2^62, which move the native plan to its Python trees.
prices = st.one_of(st.integers(0, 12), st.sampled_from([Decimal("3.5"), -2, 2**61, 2**63]))
volumes = st.one_of(st.integers(1, 9), st.sampled_from([Decimal("0.5"), 2**60]))
steps = st.lists(st.tuples(prices, st.integers(-2, 2), volumes), max_size=30)


def run_plan(plan: Any, batches: list[list[tuple[Any, int, Any]]], netted: bool) -> list[Any]:
    """Feed per-price changes (netted per batch, or as single updates); the answer after each batch."""
    live: dict[Any, list[Any]] = {}  # price -> live [(volume, copies)] so deletes only take live copies
    answers = []
    for batch in batches:
        changes: dict[Any, list[Any]] = {}
        for p, d, v in batch:
            have = live.setdefault(p, [])
            if d < 0:
                if not have:
                    continue
                v = have.pop()
                d = -1
            else:
                have.extend([v] * d)
            if netted:
                acc = changes.setdefault(p, [0, 0])
                acc[0] += d
                acc[1] += d * v
            elif d:
                plan.update("bids", {"price": p, "volume": v}, d if d > 0 else -1)
        if netted:
            plan.apply_levels("bids", changes)
        answers.append(plan.result())
    return answers


@settings(max_examples=120, deadline=None)
@given(st.lists(steps, min_size=1, max_size=5), st.booleans(), st.booleans())
def test_the_native_crosscheck_plan_answers_as_the_python_trees(batches, netted, paper):
    from ivmstream.services.vwap.exact import exact_context
    from ivmstream.services.vwap.plans.finance_native import NativeCrossCheckPlan
    from ivmstream.services.vwap.plans.finance_rpai import CrossCheckPlan

    params = {"fraction": Fraction(3, 4) if paper else Fraction(1, 4)}
    with exact_context():
        want = run_plan(CrossCheckPlan(params, paper), batches, netted)
        native = NativeCrossCheckPlan(params, paper)
        got = run_plan(native, batches, netted)
    assert got == want
    values = [p for batch in batches for p, _d, _v in batch] + [v for batch in batches for *_, v in batch]
    if all(type(x) is int and 0 <= x < 2**40 for x in values):
        assert native.levels is not None  # plain ints never leave the compiled tree


@settings(max_examples=120, deadline=None)
@given(st.lists(steps, min_size=1, max_size=5), st.booleans())
def test_the_compiled_level_loop_leaves_what_the_python_level_loop_leaves(batches, paper):
    """``LevelTree.apply_netted`` (a netted dict) against the plan's Python loop over the same levels (any
    other mapping): the same counts, total, tree or Python trees, and answers, where a level moves the
    plan to its Python trees too."""
    from types import MappingProxyType

    from ivmstream.services.vwap.exact import exact_context
    from ivmstream.services.vwap.plans.finance_native import NativeCrossCheckPlan

    class PythonLoop(NativeCrossCheckPlan):
        def apply_levels(self, rel, changes):
            super().apply_levels(rel, MappingProxyType(changes))

    params = {"fraction": Fraction(3, 4) if paper else Fraction(1, 4)}
    with exact_context():
        compiled, python = NativeCrossCheckPlan(params, paper), PythonLoop(params, paper)
        assert run_plan(compiled, batches, True) == run_plan(python, batches, True)
    assert compiled.cnt == python.cnt and compiled.total == python.total
    assert (compiled.levels is None) == (python.levels is None)
    if compiled.levels is not None:
        assert compiled.levels.items() == python.levels.items()
    else:
        assert list(compiled.w.items()) == list(python.w.items())
        assert list(compiled.pv.items()) == list(python.pv.items())


@settings(max_examples=60, deadline=None)
@given(st.lists(steps, min_size=2, max_size=5), st.booleans(), st.sampled_from(["deepcopy", "pickle"]))
def test_a_copy_of_the_native_plan_continues_as_the_plan_does(batches, netted, how):
    # benchmarks copy a loaded engine per window; the compiled tree travels as its list of levels
    import pickle

    from ivmstream.services.vwap.exact import exact_context
    from ivmstream.services.vwap.plans.finance_native import NativeCrossCheckPlan

    params = {"fraction": Fraction(1, 4)}
    half = len(batches) // 2
    with exact_context():
        plan = NativeCrossCheckPlan(params, False)
        run_plan(plan, batches[:half], netted)
        copied = copy.deepcopy(plan) if how == "deepcopy" else pickle.loads(pickle.dumps(plan))
        assert (copied.levels is None) == (plan.levels is None)
        assert run_plan(copied, batches[half:], netted) == run_plan(plan, batches[half:], netted)


def first_prefix_over(ordered: list[tuple[int, int]], x: int) -> int | None:
    """The first price whose running weight over ``ordered`` (price, weight) levels exceeds x."""
    run = 0
    for p, w in ordered:
        run += w
        if run > x:
            return p
    return None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 5)), max_size=40), st.integers(-3, 200))
def test_the_level_tree_finds_what_a_sorted_list_finds(levels, x):
    tree = C.LevelTree()
    book: dict[int, int] = {}
    for p, w in levels:
        tree.add(p, w, p * w)
        book[p] = book.get(p, 0) + w
    for p in list(book)[::3]:  # some levels leave
        tree.delete(p)
        del book[p]
    ordered = sorted(book.items())
    assert tree.items() == [(p, w, p * w) for p, w in ordered] and len(tree) == len(ordered)
    assert tree.min_key_prefix_gt(x) == first_prefix_over(ordered, x)
    k = x // 4
    assert tree.suffix_ge(k) == sum(p * w for p, w in ordered if p >= k)
    with pytest.raises(OverflowError):
        tree.add(1, 2**62, 0)
    with pytest.raises(KeyError):
        tree.delete(1000)


# A batch netted from an empty book as the engine hands it to ``load_netted``: price -> [count, W],
# levels whose count nets to 0 among them; small ints, and at times levels the tree does not hold
# (a decimal, a negative price or W, a count beyond 64 bits, sums of 2^62 or more), live or netted to 0.
odd_levels = st.lists(
    st.sampled_from(
        [
            (Decimal("2.5"), [1, 1]),
            (Decimal("2.5"), [0, 1]),
            (-1, [1, 1]),
            (2**62, [1, 0]),
            (5, [2**64, 1]),
            (7, [1, -3]),
            (8, [1, 2**61]),
            (9, [2, 2**61]),
            (2**61, [1, 4]),
            (3, [1, Decimal("1.5")]),
        ]
    ),
    max_size=2,
)
netted_batches = st.tuples(
    st.dictionaries(
        st.integers(0, 60), st.tuples(st.integers(-2, 4), st.integers(0, 40)).map(list), max_size=40
    ),
    st.one_of(st.just([]), odd_levels),
).map(lambda both: {**both[0], **{p: list(acc) for p, acc in both[1]}})


def _fits_the_tree(live: list[tuple[Any, list[Any]]]) -> bool:
    ints = all(type(p) is int and type(c) is int and type(w) is int for p, (c, w) in live)
    return (
        ints
        and all(0 <= p < 2**62 and w >= 0 and -(2**63) <= c < 2**63 for p, (c, w) in live)
        and sum(w for _p, (_c, w) in live) < 2**62
        and sum(p * w for p, (_c, w) in live) < 2**62
    )


@settings(max_examples=150, deadline=None)
@given(netted_batches, st.integers(-3, 2000), st.tuples(st.integers(0, 70), st.integers(1, 9)))
def test_a_level_tree_loaded_from_a_netted_batch_holds_its_live_levels_in_order(changes, x, more):
    live = sorted(((p, acc) for p, acc in changes.items() if acc[0]), key=lambda item: item[0])
    tree = C.LevelTree()
    if not _fits_the_tree(live):
        with pytest.raises(OverflowError):
            tree.load_netted(changes)
        assert len(tree) == 0 and tree.items() == []
        return
    cnt, total = tree.load_netted(changes)
    assert list(cnt.items()) == [(p, c) for p, (c, _w) in live]
    assert total == sum(w for _p, (_c, w) in live)
    book = {p: w for p, (_c, w) in live}
    p, w = more  # the loaded tree takes further updates as one built by inserts does
    tree.add(p, w, p * w)
    book[p] = book.get(p, 0) + w
    ordered = sorted(book.items())
    assert tree.items() == [(p, w, p * w) for p, w in ordered] and len(tree) == len(ordered)
    assert tree.min_key_prefix_gt(x) == first_prefix_over(ordered, x)
    assert tree.suffix_ge(x // 40) == sum(p * w for p, w in ordered if p >= x // 40)
    with pytest.raises(ValueError):
        tree.load_netted(changes)  # only an empty tree is loaded


first_batch_rows = st.fixed_dictionaries(
    {
        "t": st.integers(0, 3),
        "id": st.integers(0, 3),
        "broker_id": st.integers(0, 2),
        "volume": st.integers(1, 5),
        "price": st.one_of(st.integers(0, 80), st.just(Decimal("2.5"))),
    }
)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.builds(UpdateEvent, st.just("bids"), first_batch_rows, st.sampled_from([1, 1, 2, -1])),
        max_size=300,
    )
)
def test_an_auto_engine_starting_on_a_netted_batch_answers_as_on_the_python_kernels(batch):
    # ``auto`` builds its plan from the first batch's netted levels: on the compiled tree through
    # ``load_netted``, on the Python trees from the sorted levels
    answers = []
    for loop, active in ((C.ledger_pass, "compiled"), (kernels.py_ledger_pass, "python")):
        saved = kernels.ledger_pass, kernels.ACTIVE
        kernels.ledger_pass, kernels.ACTIVE = loop, active
        try:
            eng = vwap_engine.VwapEngine("vwap", "auto")
            eng.apply(batch)
            eng.apply(batch[::-1])
            answers.append((eng.result(), eng.running, eng.plan.domain(), eng.snapshot()))
            ints = all(type(ev.row["price"]) is int for ev in batch)
            if active == "compiled" and eng.running == "crosscheck" and ints:
                assert eng.plan.levels is not None  # ints stay on the compiled tree
        finally:
            kernels.ledger_pass, kernels.ACTIVE = saved
    assert answers[0] == answers[1]
