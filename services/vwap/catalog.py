"""The query catalog: which relations each query reads, its parameters and the strategies it runs on."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from services.vwap.schemas import ASKS, BIDS, EX21_R, tpch_relation
from shared.events import Relation

STRATEGIES = ("rpai", "dbtoaster", "recompute", "crosscheck")
BOOK = (BIDS, ASKS)


@dataclass(frozen=True)
class QueryInfo:
    name: str
    summary: str
    relations: tuple[Relation, ...]  # what the service accepts (the plan may read a subset)
    reads: tuple[str, ...]  # relations the query's SQL reads
    defaults: dict[str, Any] = field(default_factory=dict)
    strategies: tuple[str, ...] = ("rpai", "dbtoaster", "recompute")
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
        "q18",
        "TPC-H Q18: large volume customers",
        (tpch_relation("customer"), tpch_relation("orders"), tpch_relation("lineitem")),
        ("customer", "orders", "lineitem"),
        {"threshold": 100},
        book=False,
    ),
]
QUERIES: dict[str, QueryInfo] = {q.name: q for q in _Q}
