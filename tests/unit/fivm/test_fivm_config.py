"""Configuration and variable-order validation (one-line errors), the derived order's guarantees on
random schemas, the scalar ring, and the debug checker catching a corrupted view."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.engine import EngineError
from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.check import InvariantError, check_invariants
from ivmstream.services.fivm.engine import FivmEngine
from ivmstream.services.fivm.order import OrderNode, build_order
from ivmstream.services.fivm.query import parse_query
from ivmstream.services.fivm.rings import RINGS, make_ring
from tests.unit.fivm.fivm_oracle import acyclic_schema

BASE: dict[str, Any] = {"relations": {"R": {"a": "int", "b": "float"}, "S": ["b", {"c": "str"}]}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"relations": {}}, "must be {relation: {column: type}}"),
        ({"relations": {"R": []}}, "has no columns"),
        ({"relations": {"R": [{"a": "date"}]}}, "unknown type 'date'"),
        ({"relations": {"R": ["a", "a"]}}, "names column 'a' twice"),
        ({"relations": {"R": [{"a": "int"}], "S": ["a"]}}, "is int in one relation and float"),
        ({"relations": {"R": {"a": "decimal"}}}, "is decimal: fivm sums in int64 or floats"),
        ({"relations": {"R": {"a": "bool"}}}, "is bool: fivm joins and sums"),
        ({"relations": {"R": ["a"], "S": {"alias_of": "Q", "columns": ["b"]}}}, "alias_of names no"),
        ({"relations": {"R": ["a"], "S": {"alias_of": "R", "columns": ["b", "c"]}}}, "renames 1 columns"),
        ({"ring": "avg"}, "ring must be one of"),
        ({"ring": "sum"}, "needs 'sum'"),
        ({"ring": "sum", "sum": "c"}, "is a string"),
        ({"ring": "sum", "sum": "zz"}, "no relation has"),
        ({"sum": "b"}, "applies only to ring sum"),
        ({"features": ["b"]}, "applies only to ring covariance"),
        ({"ring": "sum", "sum": "b", "free": ["b"]}, "cannot also be aggregated"),
        ({"free": ["a", "a"]}, "twice"),
        ({"updatable": ["Q"]}, "not a relation"),
        ({"strategy": "fivm-one"}, "exactly one relation"),
        ({"strategy": "dbtoaster"}, "strategy must be one of"),
        ({"indicators": "yes"}, "true or false"),
        ({"colour": 1}, "unknown configuration key"),
        ({"variable_order": ["b"]}, "nested mapping"),
        ({"variable_order": {"b": {"zz": {}}}}, "no relation's column"),
        ({"variable_order": {"a": {}}}, "leaves out 'b'"),
        ({"variable_order": {"b": {"a": {}, "c": {}}}, "free": ["c"]}, "below bound variable 'b'"),
        ({"variable_order": {"b": {}, "a": {}}}, "not on one root-to-leaf path"),
        ({"variable_order": {"b": {"b": {}}}}, "twice"),
    ],
)
def test_bad_configurations_fail_in_one_line(change: dict[str, Any], message: str) -> None:
    with pytest.raises(EngineError, match=message) as info:
        FivmEngine({**BASE, **change})
    assert "\n" not in str(info.value)


def test_a_ring_without_a_registered_factory_is_an_engine_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(RINGS, "sum")
    with pytest.raises(EngineError, match="unknown ring 'sum'"):
        FivmEngine({**BASE, "ring": "sum", "sum": "b"})


def test_make_ring_refuses_unknown_names_and_options() -> None:
    with pytest.raises(ValueError, match="unknown ring"):
        make_ring("nope", [])
    with pytest.raises(ValueError, match="lifts no variable"):
        make_ring("count", ["x"])
    with pytest.raises(ValueError, match="options"):
        make_ring("sum", ["x"], colour=1)


def paths_ok(order_roots: list[OrderNode | str], schemas: dict[str, set[str]], free: set[str]) -> None:
    """Every relation's variables lie on its root-to-leaf path; free variables only under free ones."""

    def walk(n: OrderNode | str, above: list[str]) -> None:
        if isinstance(n, str):
            assert schemas[n] <= set(above), (n, above)
            return
        if n.var in free:
            assert all(a in free for a in above)
        for c in n.children:
            walk(c, [*above, n.var])

    for r in order_roots:
        walk(r, [])


@settings(max_examples=150)
@given(schema=acyclic_schema(components=2), data=st.data())
def test_the_derived_order_is_valid_on_random_schemas(schema: dict[str, Any], data: st.DataObject) -> None:
    variables = sorted({next(iter(c)) for spec in schema["relations"].values() for c in spec})
    free = data.draw(st.lists(st.sampled_from(variables), max_size=3, unique=True))
    q = parse_query({**schema, "free": free})
    order = build_order(q)
    assert order.derived
    assert sorted(order.preorder()) == variables  # every variable exactly once
    paths_ok(order.roots, {o.name: set(o.columns) for o in q.occurrences}, set(free))
    again = build_order(parse_query({**schema, "free": free, "variable_order": _as_config(order.roots)}))
    assert again.to_json() == order.to_json()  # the reported order is a valid configured order


def _as_config(roots: list[OrderNode | str]) -> dict[str, Any]:
    return {n.var: _as_config(n.children) for n in roots if isinstance(n, OrderNode)}


def test_a_configured_order_may_leave_out_private_bound_variables() -> None:
    q = parse_query({**BASE, "variable_order": {"b": {}}})
    order = build_order(q)
    assert not order.derived
    paths_ok(order.roots, {"R": {"a", "b"}, "S": {"b", "c"}}, set())
    assert set(order.preorder()) == {"a", "b", "c"}


@given(st.sampled_from(["int", "float"]), st.lists(st.integers(-50, 50), min_size=3, max_size=3))
def test_the_scalar_ring_is_the_integers_or_the_reals(domain: str, xs: list[int]) -> None:
    ring = make_ring("sum", ["x", "y"], domain=domain, powers={"y": 2})
    a, b, c = (x if domain == "int" else float(x) for x in xs)
    assert ring.mul(ring.add(a, b), c) == ring.add(ring.mul(a, c), ring.mul(b, c))
    assert ring.add(a, ring.neg(a)) == ring.zero() and ring.is_zero(ring.zero())
    assert ring.mul(a, ring.one()) == a and ring.scale(3, a) == a + a + a
    assert ring.lift("x", xs[0]) == a and ring.lift("y", xs[0]) == a * a and ring.lift("z", 5) == ring.one()
    assert ring.lifts("y") and not ring.lifts("z")
    assert type(ring.lift("x", xs[0])) is (int if domain == "int" else float)
    for v in (a, ring.mul(a, 3**50) if domain == "int" else a / 7):
        assert ring.decode(ring.encode(v)) == v


def test_exact_integer_payloads_never_overflow_and_stay_exact_in_json() -> None:
    ring = make_ring("count", [])
    big = ring.scale(2**70, ring.one())
    assert ring.decode(ring.encode(big)) == big
    assert ring.to_json(big) == str(2**70) and ring.to_json(-5) == -5


def test_the_debug_checker_catches_a_corrupted_view() -> None:
    e = FivmEngine({**BASE, "debug": True})
    e.apply([UpdateEvent("R", {"a": 1, "b": 2.0}, 1), UpdateEvent("S", {"b": 2.0, "c": "x"}, 1)])
    check_invariants(e.maint)  # consistent
    e.maint.views["R"].data[(2.0,)] = 5
    with pytest.raises(InvariantError, match="definition gives"):
        check_invariants(e.maint)
