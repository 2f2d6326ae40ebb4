"""What the baselines share: the result ring, stored payloads, base relations and index joins.

docs/fivm/baselines.md §2. A baseline keeps its state as named ``View`` maps like the fivm
maintainer, so the engine's snapshots and incremental entries work unchanged. Its views may hold
payloads of different kinds (base multiplicities as ints next to ring payloads); ``ResultRing`` gives
the engine one ring object that computes results in the query's ring and encodes every stored
payload with a tag saying which kind it is.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ivmstream.sdk import EngineError
from ivmstream.services.fivm.order import VariableOrder, build_order
from ivmstream.services.fivm.query import RING_FACTORY, Query
from ivmstream.services.fivm.rings import Ring, make_ring
from ivmstream.services.fivm.rings.dense_cofactor import DenseCofactorRing
from ivmstream.services.fivm.views import Key, View
from ivmstream.services.fivm.viewtree import ViewTree, build_view_tree

_INT = b"i"
_FLOAT = b"f"
_RING = b"r"
_F8 = struct.Struct("<d")

SCALAR_RINGS = ("count", "sum", "covariance")
ANY_ORDER_RINGS = ("count", "sum", "covariance", "listing", "matrix")


class ResultRing:
    """The query's ring for results; stored payloads are encoded by kind (§2.1): an int (a base
    multiplicity, a count) and a float (a scalar aggregate) exactly, anything else by ``store`` (the
    ring the views compute in; default the result ring)."""

    def __init__(self, ring: Ring[Any], store: Ring[Any] | None = None) -> None:
        self.inner = ring
        self.store = ring if store is None else store
        self.name = ring.name

    def zero(self) -> Any:
        return self.inner.zero()

    def one(self) -> Any:
        return self.inner.one()

    def add(self, a: Any, b: Any) -> Any:
        return self.inner.add(a, b)

    def mul(self, a: Any, b: Any) -> Any:
        return self.inner.mul(a, b)

    def neg(self, a: Any) -> Any:
        return self.inner.neg(a)

    def scale(self, k: int, a: Any) -> Any:
        return self.inner.scale(k, a)

    def is_zero(self, a: Any) -> bool:
        return self.inner.is_zero(a)

    def lift(self, var: str, value: Any) -> Any:
        return self.inner.lift(var, value)

    def lifts(self, var: str) -> bool:
        return self.inner.lifts(var)

    def to_json(self, a: Any) -> Any:
        return self.inner.to_json(a)

    def encode(self, a: Any) -> bytes:
        if a.__class__ is int:
            return _INT + a.to_bytes((a.bit_length() + 8) // 8, "little", signed=True)
        if a.__class__ is float:
            return _FLOAT + _F8.pack(a)
        return _RING + self.store.encode(a)

    def decode(self, data: bytes) -> Any:
        tag, body = data[:1], data[1:]
        if tag == _INT:
            return int.from_bytes(body, "little", signed=True)
        if tag == _FLOAT:
            return _F8.unpack(body)[0]
        return self.store.decode(body)


def fivm_tree(query: Query) -> tuple[VariableOrder, ViewTree]:
    """The fivm strategy's variable order and view tree: baselines number lifted variables like it,
    so results list them in the same order."""
    order = build_order(query)
    return order, build_view_tree(query, order)


def query_ring(query: Query, lifted: Sequence[str], any_order: bool) -> Ring[Any]:
    """The query's ring over ``lifted``. ``any_order``: the caller multiplies lifts in join order, so
    covariance uses full-width payloads instead of preorder blocks (§2.3)."""
    if any_order and query.ring == "covariance":
        _refuse_decimals(query)
        return DenseCofactorRing(lifted)
    try:
        return make_ring(RING_FACTORY.get(query.ring, query.ring), lifted, **query.ring_factory_options())
    except ValueError as exc:
        raise EngineError(f"ring {query.ring}: {exc}") from None


def _refuse_decimals(query: Query) -> None:
    """Covariance payloads here are floats; exact decimals would silently not apply (§1)."""
    if query.decimals is not None:
        raise EngineError(
            f"strategy {query.strategy} computes covariance in floats; decimals is supported by the "
            "fivm, fivm-one, sql-opt, f-re and dbt-re strategies"
        )


def require(query: Query, rings: Sequence[str], *, aliases: bool = True, debug: bool = False) -> None:
    """Refuse configurations a strategy does not implement, in one line (§1). ``debug``: the strategy
    is a fivm view tree the debug checker can verify."""
    if query.ring not in rings:
        raise EngineError(f"strategy {query.strategy} computes rings {', '.join(rings)}, not {query.ring!r}")
    if query.debug and not debug:
        raise EngineError(f"debug checks the view tree of strategy fivm; strategy {query.strategy} has none")
    if not aliases and any(o.is_alias for o in query.occurrences):
        raise EngineError(f"strategy {query.strategy} does not support self-joins (aliases)")


class PerAggregateBaseline:
    """What the 1-IVM and DBT maintainers share: one query per aggregate when ``scalar`` (the covariance
    ring as 1 + m + m(m+1)/2 scalar sums), else one hierarchy in the query's ring (§3, §4)."""

    def __init__(self, query: Query, scalar: bool) -> None:
        require(query, SCALAR_RINGS if scalar else ANY_ORDER_RINGS, aliases=False)
        self.query = query
        self.order, tree = fivm_tree(query)
        self.lifted = tree.lifted
        self.result_ring = query_ring(query, self.lifted, any_order=True)
        self.ring = ResultRing(self.result_ring)
        self.scalar = scalar and query.ring == "covariance"
        self.updatable = frozenset(query.updatable)
        self.loading = initial_loading(query)
        self.supports: dict[str, Any] = {}
        self.dropped: dict[str, list[Key]] = {}


def int_view(name: str, keys: tuple[str, ...]) -> View:
    """A view of exact integers (base multiplicities, counts)."""
    return View(name, keys, operator.add, _is_zero_int)


def _is_zero_int(a: Any) -> bool:
    return a == 0


def transient_view(name: str, keys: tuple[str, ...], ring: Ring[Any], data: dict[Key, Any]) -> View:
    """A view built for reading a result (never part of the state)."""
    view = View(name, keys, ring.add, ring.is_zero)
    view.data = {k: p for k, p in data.items() if not ring.is_zero(p)}
    return view


def initial_loading(query: Query) -> bool:
    """Static relations load first (docs/fivm/algorithm.md §2.7): loading iff some relation is not in U."""
    return bool({r.name for r in query.relations} - set(query.updatable))


# --- index joins -----------------------------------------------------------------------------------------

GET = 0
INDEX = 1
SCAN = 2


@dataclass(frozen=True)
class Probe:
    """Join a row with one source: a point lookup when the row binds all its keys, an index on the bound
    ones otherwise, a scan when none is bound. ``ints``: the source holds int multiplicities."""

    source: str
    mode: int
    probe: tuple[int, ...]  # row positions of the bound key values (GET: every key, in key order)
    index: tuple[int, ...]  # INDEX: the source key positions indexed
    extend: tuple[int, ...]  # source key positions appended to the row
    ints: bool


def plan_probes(
    row_vars: Sequence[str], sources: Sequence[tuple[str, tuple[str, ...], bool]]
) -> tuple[tuple[Probe, ...], list[str]]:
    """Probes joining ``sources`` (name, keys, ints) to rows over ``row_vars``, greedily: a source whose
    keys are all bound first, then the one sharing most bound variables (so a connected join never
    scans after its first source). Returns the probes and the row's variables after them."""
    row = list(row_vars)
    remaining = list(sources)
    probes: list[Probe] = []
    while remaining:
        bound = set(row)
        pick = max(
            range(len(remaining)),
            key=lambda i: (set(remaining[i][1]) <= bound, len(set(remaining[i][1]) & bound), -i),
        )
        name, keys, ints = remaining.pop(pick)
        pos = {v: i for i, v in enumerate(row)}
        bound_idx = tuple(i for i, v in enumerate(keys) if v in bound)
        extend = tuple(i for i, v in enumerate(keys) if v not in bound)
        if not extend:
            probes.append(Probe(name, GET, tuple(pos[v] for v in keys), (), (), ints))
        elif not bound_idx:
            probes.append(Probe(name, SCAN, (), (), extend, ints))
        else:
            probes.append(Probe(name, INDEX, tuple(pos[keys[i]] for i in bound_idx), bound_idx, extend, ints))
        row.extend(keys[i] for i in extend)
    return tuple(probes), row


def index_needs(probes: Iterable[Probe]) -> dict[str, set[tuple[int, ...]]]:
    out: dict[str, set[tuple[int, ...]]] = {}
    for p in probes:
        if p.mode == INDEX:
            out.setdefault(p.source, set()).add(p.index)
    return out


Row = tuple[Key, Any]


def run_probes(
    rows: list[Row], probes: Sequence[Probe], views: dict[str, View], ring: Ring[Any] | ResultRing
) -> list[Row]:
    """Extend each (row, payload) through every probe, multiplying payloads (ints scale)."""
    mul, scale = ring.mul, ring.scale
    for probe in probes:
        view = views[probe.source]
        data = view.data
        combine: Callable[[Any, Any], Any] = (lambda p, q: scale(q, p)) if probe.ints else mul
        nxt: list[Row] = []
        if probe.mode == GET:
            for row, p in rows:
                q = data.get(tuple([row[i] for i in probe.probe]))
                if q is not None:
                    nxt.append((row, combine(p, q)))
        elif probe.mode == INDEX:
            ext = probe.extend
            for row, p in rows:
                for k in view.lookup(probe.index, tuple([row[i] for i in probe.probe])):
                    nxt.append((row + tuple([k[i] for i in ext]), combine(p, data[k])))
        else:
            ext = probe.extend
            for row, p in rows:
                for k, q in data.items():
                    nxt.append((row + tuple([k[i] for i in ext]), combine(p, q)))
        rows = nxt
        if not rows:
            break
    return rows


def group(
    rows: Iterable[Row],
    out: tuple[int, ...],
    lifts: Sequence[tuple[str, int]],
    ring: Ring[Any] | ResultRing,
    into: dict[Key, Any] | None = None,
) -> dict[Key, Any]:
    """Multiply each row's payload by the lifts of the variables summed out here and add it to its
    group (the row positions ``out``)."""
    res: dict[Key, Any] = {} if into is None else into
    mul, add, lift = ring.mul, ring.add, ring.lift
    for row, p in rows:
        for var, pos in lifts:
            p = mul(p, lift(var, row[pos]))
        key = tuple([row[i] for i in out])
        prev = res.get(key)
        res[key] = p if prev is None else add(prev, p)
    return res


def add_into(view: View, delta: dict[Key, Any], is_zero: Callable[[Any], bool]) -> None:
    view.add_all((k, p) for k, p in delta.items() if not is_zero(p))


# --- scalar aggregates of the cofactor ring ----------------------------------------------------------------

Monomial = tuple[int, ...]


def monomials(m: int) -> list[Monomial]:
    """The 1 + m + m(m+1)/2 aggregates of a degree-m cofactor payload: the count, Σ x_i, Σ x_i·x_j."""
    out: list[Monomial] = [()]
    out += [(i,) for i in range(m)]
    out += [(i, j) for i in range(m) for j in range(i, m)]
    return out


def monomial_label(mono: Monomial, variables: Sequence[str]) -> str:
    return "*".join(variables[i] for i in mono) or "1"


def scalar_aggregates(query: Query, lifted: Sequence[str]) -> list[tuple[Monomial, Ring[Any]]]:
    """One scalar ring per aggregate (§2.4): the query's own ring for count and sum; for covariance one
    sum ring per monomial (the count exact, the sums over floats)."""
    if query.ring != "covariance":
        return [((), query_ring(query, lifted, any_order=True))]
    _refuse_decimals(query)
    out: list[tuple[Monomial, Ring[Any]]] = []
    for mono in monomials(len(lifted)):
        if not mono:
            out.append((mono, make_ring("count", ())))
            continue
        powers: dict[str, int] = {}
        for i in mono:
            powers[lifted[i]] = powers.get(lifted[i], 0) + 1
        out.append((mono, make_ring("sum", list(powers), powers=powers, domain="float")))
    return out
