"""Inequality-correlated nested aggregates -> vwap's RPAI plans, matched by structure.

Each pattern is a query family as DBToaster ships it, with its constants as holes (``k_f`` a
number, ``s_brand`` a string): matching binds the query's aliases, tables and constants, and the
vwap options are built from them (every constant taken from the query). The view's outputs are
then evaluated over the service's aggregates (so Q17's ``/ 7.0`` is the query's own arithmetic).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from sqlglot import exp

from ivmstream.sql.aggregates import evaluate_output
from ivmstream.sql.analyze import AGGREGATES, Shape
from ivmstream.sql.errors import SqlError
from ivmstream.sql.expr import by_column
from ivmstream.sql.match import Binding, Node, canon, match, pattern
from ivmstream.sql.model import Script
from ivmstream.sql.plan import Feed, Unit, ViewPlan

BOOK = ("t", "id", "broker_id", "volume", "price")
TPCH_COLUMNS = {
    "lineitem": [
        *("orderkey", "partkey", "suppkey", "linenumber", "quantity", "extendedprice", "discount", "tax"),
        *("returnflag", "linestatus", "shipdate", "commitdate", "receiptdate", "shipinstruct", "shipmode"),
        "comment",
    ],
    "part": ["partkey", "name", "mfgr", "brand", "type", "size", "container", "retailprice", "comment"],
    "orders": [
        *("orderkey", "custkey", "orderstatus", "totalprice", "orderdate", "orderpriority", "clerk"),
        *("shippriority", "comment"),
    ],
    "customer": ["custkey", "name", "address", "nationkey", "phone", "acctbal", "mktsegment", "comment"],
}
Q18_GROUP = (("c", "name"), ("c", "custkey"), ("o", "orderkey"), ("o", "orderdate"), ("o", "totalprice"))


@dataclass(frozen=True)
class Family:
    """One query family: its pattern, the vwap query it is, its relations and how to read results."""

    name: str
    query: str
    sql: str
    relations: dict[str, tuple[str, ...]]  # pattern table -> service relation columns
    why: str
    cost: str

    @property
    def tree(self) -> Node:
        return pattern(self.sql)


FAMILIES = [
    Family(
        "vwap",
        "vwap",
        "SELECT SUM(b1.price * b1.volume) FROM bids b1 WHERE k_f * (SELECT SUM(b3.volume) FROM bids b3) "
        "> (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b1.price)",
        {"bids": BOOK},
        "a SUM over one relation filtered by a comparison of a constant times its total with a nested SUM "
        "correlated by an inequality on price (DBToaster's VWAP)",
        "O(log D) per update, D the live price levels (RPAI keyed by the nested sum; DBToaster's own plan "
        "re-evaluates the predicate over all D levels, O(D) per update)",
    ),
    Family(
        "vwap-paper",
        "vwap-paper",
        "SELECT SUM(b.price * b.volume) FROM bids b WHERE k_f * (SELECT SUM(b1.volume) FROM bids b1) "
        "< (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price <= b.price)",
        {"bids": BOOK},
        "the paper's VWAP form: a constant times the total below a nested SUM correlated by price <=",
        "O(log D) per update, D the live price levels (RPAI)",
    ),
    Family(
        "psp",
        "psp",
        "SELECT SUM(a.price - b.price) FROM bids b, asks a "
        "WHERE b.volume > k_f * (SELECT SUM(b1.volume) FROM bids b1) "
        "AND a.volume > k_g * (SELECT SUM(a1.volume) FROM asks a1)",
        {"bids": BOOK, "asks": BOOK},
        "a SUM over a cross product whose tuples each compare with a constant times an uncorrelated "
        "nested SUM (DBToaster's price spread)",
        "O(log D) per update, D the live volume levels (non-shifting RPAI volume index)",
    ),
    Family(
        "mst",
        "mst",
        "SELECT b.broker_id, SUM((a.price * a.volume) - (b.price * b.volume)) FROM bids b, asks a "
        "WHERE k_f * (SELECT SUM(a1.volume) FROM asks a1) > (SELECT SUM(a2.volume) FROM asks a2 "
        "WHERE a2.price > a.price) AND k_g * (SELECT SUM(b1.volume) FROM bids b1) > "
        "(SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b.price) GROUP BY b.broker_id",
        {"bids": BOOK, "asks": BOOK},
        "a grouped SUM over bids x asks where each side passes a VWAP-style inequality-correlated nested "
        "SUM (DBToaster's missed trades)",
        "O(log D) per update, D the live price levels (one RPAI per side with per-broker payload vectors)",
    ),
    Family(
        "q17",
        "q17",
        "SELECT SUM(l.extendedprice) FROM lineitem l, part p WHERE p.partkey = l.partkey "
        "AND p.brand = s_brand AND p.container = s_container "
        "AND l.quantity < (SELECT k_f * AVG(l2.quantity) FROM lineitem l2 WHERE l2.partkey = p.partkey)",
        {"lineitem": tuple(TPCH_COLUMNS["lineitem"]), "part": tuple(TPCH_COLUMNS["part"])},
        "TPC-H Q17: a SUM whose tuples compare with a constant times a nested AVG correlated by equality "
        "on partkey",
        "O(log D) per update, D the distinct quantities of the updated part (one non-shifting RPAI per "
        "partkey)",
    ),
    Family(
        "q17a",
        "q17a",
        "SELECT SUM(l.extendedprice) FROM lineitem l, part p WHERE p.partkey = l.partkey "
        "AND l.quantity < k_f * (SELECT SUM(l2.quantity) FROM lineitem l2 WHERE l2.partkey = p.partkey)",
        {"lineitem": tuple(TPCH_COLUMNS["lineitem"]), "part": tuple(TPCH_COLUMNS["part"])},
        "DBToaster's TPC-H Q17a: a SUM whose tuples compare with a constant times a nested SUM correlated "
        "by equality on partkey (Q17's plan with the cutoff fraction·SUM instead of fraction·AVG)",
        "O(log D) per update, D the distinct quantities of the updated part (one non-shifting RPAI per "
        "partkey)",
    ),
    Family(
        "q18",
        "q18",
        "SELECT c.name, c.custkey, o.orderkey, o.orderdate, o.totalprice, SUM(l.quantity) "
        "FROM customer c, orders o, lineitem l WHERE o.orderkey IN (SELECT l3.orderkey FROM "
        "(SELECT l2.orderkey, SUM(l2.quantity) AS qty FROM lineitem l2 GROUP BY l2.orderkey) l3 "
        "WHERE qty > k_t) AND c.custkey = o.custkey AND o.orderkey = l.orderkey "
        "GROUP BY c.name, c.custkey, o.orderkey, o.orderdate, o.totalprice",
        {
            "customer": tuple(TPCH_COLUMNS["customer"]),
            "orders": tuple(TPCH_COLUMNS["orders"]),
            "lineitem": tuple(TPCH_COLUMNS["lineitem"]),
        },
        "TPC-H Q18: a grouped SUM over a join restricted to the keys whose nested per-key SUM exceeds "
        "a constant",
        "O(1) expected per update (hash maps of per-order sums), plus the output rows that change",
    ),
    Family(
        "q18a",
        "q18",
        "SELECT c.custkey, SUM(l1.quantity) FROM customer c, orders o, lineitem l1 "
        "WHERE 1 <= (SELECT SUM(1) FROM lineitem l2 WHERE l1.orderkey = l2.orderkey "
        "AND k_t < (SELECT SUM(l3.quantity) FROM lineitem l3 WHERE l2.orderkey = l3.orderkey)) "
        "AND c.custkey = o.custkey AND o.orderkey = l1.orderkey GROUP BY c.custkey",
        {
            "customer": tuple(TPCH_COLUMNS["customer"]),
            "orders": tuple(TPCH_COLUMNS["orders"]),
            "lineitem": tuple(TPCH_COLUMNS["lineitem"]),
        },
        "DBToaster's TPC-H Q18a: a doubly nested count that is Q18's predicate: for a live lineitem l1 "
        "of order k the middle SUM(1) is count(k)·[SUM(quantity of k) > t] with count(k) >= 1 (l1 "
        "itself), so 1 <= it exactly when order k's quantity exceeds t; the view is Q18's rows summed "
        "per custkey",
        "O(1) expected per update (Q18's hash maps of per-order sums), plus the output rows that change",
    ),
]


def _outputs(shape: Shape) -> list[Any]:
    """Columns and the aggregate calls of the outputs (the arithmetic around them is evaluated later)."""
    out: list[Any] = []
    for _name, node in shape.items:
        if isinstance(node, exp.Column):
            out.append(node)
        else:
            out.extend(
                a for a in node.find_all(*AGGREGATES) if a.find_ancestor(exp.Select) is shape.view.select
            )
    return out


def _query_tree(shape: Shape) -> Node:
    full = canon(shape.view.select)
    return (full[0], tuple(canon(n) for n in _outputs(shape)), *full[2:])


def _fraction(value: Any) -> str:
    return str(Fraction(Decimal(value)))


def _options(family: Family, b: Binding, script: Script, shape: Shape) -> dict[str, Any]:
    opts: dict[str, Any] = {"query": family.query, "strategy": "rpai"}
    holes = b.holes
    if family.name in ("psp", "mst") and holes["f"] != holes["g"]:
        raise SqlError(
            f"unsupported: {family.name} with two different fractions ({holes['f']}, {holes['g']}); "
            "vwap keeps one",
            shape.view.where,
        )
    if "f" in holes:
        opts["fraction"] = _fraction(holes["f"])
    if family.name == "q17":
        opts["brand"], opts["container"] = holes["brand"], holes["container"]
    if family.name in ("q18", "q18a"):
        t = Fraction(Decimal(holes["t"]))
        opts["threshold"] = str(t) if t.denominator != 1 else t.numerator
    if family.name == "mst":
        table = script.tables[b.tables["bids"]]
        src = table.source
        brokers = getattr(src, "options", {}).get("brokers")
        if brokers is not None:
            opts["brokers"] = int(brokers)
    return opts


def _feeds(family: Family, b: Binding, script: Script, shape: Shape) -> list[Feed]:
    feeds = []
    for ptable, columns in family.relations.items():
        table = script.tables[b.tables[ptable]]
        have = list(table.columns)
        if family.name in ("vwap", "vwap-paper", "psp", "mst") and len(have) == len(columns):
            mapping = dict(zip(columns, have, strict=True))  # order books: by position
        else:
            missing = [c for c in columns if c not in table.columns]
            if missing:
                raise SqlError(
                    f"table {table.name} lacks column(s) {', '.join(missing)} "
                    f"of the {ptable} relation vwap reads",
                    table.where,
                )
            mapping = {c: c for c in columns}
        feeds.append(Feed(table.name, ptable, [(c, by_column(("", mapping[c]))) for c in columns]))
    return feeds


def _number(v: Any) -> Any:
    if isinstance(v, str):
        d = Decimal(v)
        return int(d) if d == d.to_integral_value() and "." not in v else float(d)
    return v


def _per_customer(q18_rows: Sequence[Sequence[Any]]) -> list[tuple[dict[tuple[str, str], Any], Any]]:
    """Q18's rows (name, custkey, orderkey, orderdate, totalprice, Σ quantity) summed per custkey."""
    sums: dict[Any, Decimal] = {}
    for r in q18_rows:
        sums[r[1]] = sums.get(r[1], Decimal(0)) + Decimal(str(r[5]))
    return [({("c", "custkey"): k}, str(v)) for k, v in sorted(sums.items(), key=lambda kv: _number(kv[0]))]


def _assembler(family: Family, shape: Shape, b: Binding) -> Callable[[Sequence[Any]], list[list[Any]]]:
    outputs = _outputs(shape)
    aggs = [n for n in outputs if not isinstance(n, exp.Column)]
    inverse = {q: p for p, q in b.aliases.items()}

    def rows(results: Sequence[Any]) -> list[list[Any]]:
        res = results[0]
        groups: list[tuple[dict[tuple[str, str], Any], Any]]
        if family.name == "mst":
            groups = [
                ({("b", "broker_id"): int(k)}, v)
                for k, v in sorted(res["mst"].items(), key=lambda kv: int(kv[0]))
            ]
        elif family.name == "q18":
            groups = [(dict(zip(Q18_GROUP, r[:5], strict=True)), r[5]) for r in res["q18"]]
        elif family.name == "q18a":
            groups = _per_customer(res["q18"])
        elif family.name in ("q17", "q17a"):
            groups = [({}, res["sum_extendedprice"])]
        else:
            groups = [({}, res[family.query if family.query != "vwap-paper" else "vwap"])]
        out = []
        for key, value in groups:
            agg_values = {id(a): _number(value) for a in aggs}
            cols: dict[int, Any] = {}
            for _name, node in shape.items:
                if isinstance(node, exp.Column):
                    ref = shape.resolve(node)[0]
                    value = key.get((inverse.get(ref[0], ref[0]), ref[1]))
                    numeric = shape.column_type(ref) in ("exact", "float")
                    cols[id(node)] = _number(value) if numeric else value
            out.append([evaluate_output(node, agg_values, cols) for _n, node in shape.items])
        return out

    return rows


def plan_nested(shape: Shape, script: Script) -> ViewPlan | None:
    """The vwap plan of a view matching one of the families, or None."""
    tree = _query_tree(shape)
    for family in FAMILIES:
        b = match(family.tree, tree)
        if b is None:
            continue
        opts = _options(family, b, script, shape)
        unit = Unit("vwap", opts, _feeds(family, b, script, shape), family.query)
        plan = {
            "rpai_plan": family.query,
            "parameters": {k: v for k, v in opts.items() if k not in ("query", "strategy")},
            "relations": {p: b.tables[p] for p in family.relations},
            "aliases": b.aliases,
        }
        if family.name == "q18a":
            plan["output"] = "the q18 plan's rows (one per qualifying order and customer) summed per custkey"
        why = (
            f"{family.why}: vwap's RPAI plan {family.query!r}; fivm refuses nested aggregates in WHERE, and "
            "no sample, 3-cycle or provenance clause applies"
        )
        return ViewPlan(
            shape.view,
            "vwap",
            "rpai",
            why,
            plan,
            family.cost,
            [unit],
            [n for n, _ in shape.items],
            _assembler(family, shape, b),
        )
    return None
