"""The query catalog: the relations of every query, which of them it reads, its parameters and the
strategies it runs on (docs/vwap/algorithm.md §1.2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ivmstream.sdk import TPCH_TABLES, Relation
from ivmstream.services.vwap.exact import parse_fraction

# bids/asks(t, id, broker_id, volume, price): volume and price exact (ints = ticks, or decimals).
BOOK_COLUMNS = (("t", "int"), ("id", "int"), ("broker_id", "int"), ("volume", "exact"), ("price", "exact"))
BIDS = Relation("bids", BOOK_COLUMNS)
ASKS = Relation("asks", BOOK_COLUMNS)
EX21_R = Relation("R", (("a", "exact"), ("b", "exact")))


def tpch_relation(name: str) -> Relation:
    return Relation(name, TPCH_TABLES[name])


STRATEGIES = ("rpai", "dbtoaster", "recompute", "crosscheck", "auto")
BOOK = (BIDS, ASKS)


@dataclass(frozen=True)
class QueryInfo:
    name: str
    summary: str
    relations: tuple[Relation, ...]  # what the service accepts (the plan may read a subset)
    reads: tuple[str, ...]  # relations the query's SQL reads
    defaults: dict[str, Any] = field(default_factory=dict)
    strategies: tuple[str, ...] = ("rpai", "dbtoaster", "recompute", "auto")
    book: bool = True  # an order-book query: positive volumes, bids/asks levels in snapshots


_Q = [
    QueryInfo(
        "vwap",
        "DBToaster VWAP: Σ price·volume where fraction·T > S>(price)",
        BOOK,
        ("bids",),
        {"fraction": Fraction(1, 4)},
        STRATEGIES,
    ),
    QueryInfo(
        "vwap-paper",
        "paper VWAP: Σ price·volume where fraction·T < S<=(price)",
        BOOK,
        ("bids",),
        {"fraction": Fraction(3, 4)},
        STRATEGIES,
    ),
    QueryInfo(
        "ex21",
        "Ex. 2.1: Σ a·b where fraction·Σb = Σb of the tuple's a-group",
        (EX21_R,),
        ("R",),
        {"fraction": Fraction(1, 2)},
        book=False,
    ),
    QueryInfo(
        "mst", "missed trades per broker", BOOK, ("bids", "asks"), {"fraction": Fraction(1, 4), "brokers": 10}
    ),
    QueryInfo(
        "psp", "price spread over large orders", BOOK, ("bids", "asks"), {"fraction": Fraction(1, 10000)}
    ),
    QueryInfo(
        "sq1",
        "reconstruction SQ1 (a: per-broker volume; b: volume at prices >= p)",
        BOOK,
        ("bids",),
        {"fraction": Fraction(3, 4), "variant": "a"},
    ),
    QueryInfo(
        "sq2",
        "reconstruction SQ2: price + volume <= outer price",
        BOOK,
        ("bids",),
        {"fraction": Fraction(3, 4)},
    ),
    QueryInfo(
        "nq1",
        "reconstruction NQ1: VWAP over a VWAP-selected volume",
        BOOK,
        ("bids",),
        {"fraction": Fraction(3, 4)},
    ),
    QueryInfo(
        "nq2",
        "reconstruction NQ2: NQ1 with the lowest level correlated to the top",
        BOOK,
        ("bids",),
        {"fraction": Fraction(3, 4)},
    ),
    QueryInfo(
        "q17",
        "TPC-H Q17: small-quantity-order revenue",
        (tpch_relation("lineitem"), tpch_relation("part")),
        ("lineitem", "part"),
        {"brand": "Brand#23", "container": "WRAP BOX", "fraction": Fraction(1, 5)},
        book=False,
    ),
    QueryInfo(
        "q17a",
        "DBToaster's TPC-H Q17a: revenue of the lineitems below a fraction of their part's total quantity",
        (tpch_relation("lineitem"), tpch_relation("part")),
        ("lineitem", "part"),
        {"fraction": Fraction(1, 200)},
        book=False,
    ),
    QueryInfo(
        "q18",
        "TPC-H Q18: large volume customers",
        (tpch_relation("customer"), tpch_relation("orders"), tpch_relation("lineitem")),
        ("customer", "orders", "lineitem"),
        {"threshold": 100},
        book=False,
    ),
]
QUERIES: dict[str, QueryInfo] = {q.name: q for q in _Q}
TPCH_QUERIES = ("q17", "q17a", "q18")
FINANCE_QUERIES = tuple(q for q in QUERIES if q not in TPCH_QUERIES)
# Only sizes the RPAI plan's per-broker payload vector: the SQL (and so every baseline) has no such parameter.
RPAI_ONLY_PARAMS = frozenset({"brokers"})
SQ1_VARIANTS = ("a", "b")


def sql_defaults(query: str) -> dict[str, Any]:
    """The defaults of the query's SQL parameters: the catalog's, less the RPAI-only ones."""
    return {k: v for k, v in QUERIES[query].defaults.items() if k not in RPAI_ONLY_PARAMS}


def coerce_param(query: str, name: str, value: Any) -> Any:
    """One SQL parameter checked and typed: ``fraction`` a Fraction, ``threshold`` an int when integral
    (else a Fraction), ``variant`` 'a' or 'b', ``brand``/``container`` strings."""
    if name == "fraction":
        return parse_fraction(value, f"{query} fraction")
    if name == "threshold":
        t = parse_fraction(str(value) if isinstance(value, Decimal) else value, f"{query} threshold")
        return t.numerator if t.denominator == 1 else t
    if name == "variant":
        if value not in SQ1_VARIANTS:
            raise ValueError(f"{query} variant must be 'a' or 'b', got {value!r}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"{query} {name} must be a string, got {value!r}")
    return value


def resolve_params(
    query: str, params: Mapping[str, Any] | None, known: Sequence[str], kind: str
) -> dict[str, Any]:
    """``sql_defaults(query)`` overlaid with ``params`` and coerced; ValueError for a query outside
    ``known`` (named ``kind`` in the message) or a parameter the query does not have."""
    if query not in known:
        raise ValueError(f"unknown {kind} query {query!r} (known: {', '.join(known)})")
    out = sql_defaults(query)
    for name, value in (params or {}).items():
        if name not in out:
            raise ValueError(f"{query} has no parameter {name!r} (known: {', '.join(out)})")
        out[name] = value
    return {name: coerce_param(query, name, value) for name, value in out.items()}
