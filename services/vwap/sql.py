"""The SQL text of every vwap query (docs/vwap/algorithm.md §1.2, §1.3, §5.4), written once for
Spark SQL and DuckDB.

These texts are the independent definition the Spark reconciliation (``batch_recompute``) and the
tests' DuckDB oracle evaluate; no engine or plan code is involved.

Conventions, decided once (docs/vwap/algorithm.md §1.5 and §9.9):

- **Tables** are named after the relations (``bids``, ``asks``, ``R``, ``lineitem``, ``part``,
  ``orders``, ``customer``) with the relation's columns, and hold the bag **expanded**: a tuple of
  multiplicity m is m identical rows. SQL's own bag semantics then count every copy, in inner sums
  and in joins (which multiply multiplicities), so the texts stay the SQL of §1.2. Order books and
  TPC-H rows have multiplicity 1 in practice, so the expansion costs nothing there.
- **Empty SUM = 0** everywhere, inner sums included: ``COALESCE(SUM(x), 0)``. With SQL's NULL the
  DBToaster VWAP form would drop the top price level (``0.25·T > NULL`` is not true), which the
  engines count.
- **Group presence** (MST, Q18): a group is reported iff the join has a qualifying row for it.
- **Fractions** (``fraction``: 1/4, 3/4, 1/2, 1/10000, 1/5, ...) are never written as a decimal
  or a division: ``f·X θ Y`` is rendered as ``num * X θ den * Y`` (``den > 0``), the
  cross-multiplication of §9.6. That is exact for every rational, including 1/3, in both dialects
  (``1/4`` in Spark SQL is a double; DuckDB's ``/`` is a double too).
- **Q18's threshold** t = tnum/tden is cross-multiplied the same way (``QTY > t`` is
  ``tden * QTY > tnum``). **Q17's strings** are quoted literals without quotes or backslashes (the
  two dialects escape those differently).
- **Q17** is evaluated exactly: ``l.quantity < 0.2 * AVG(l2.quantity)`` becomes
  ``5 * l.quantity * COUNT(l2) < 1 * SUM(l2.quantity)`` (COUNT ≥ 1 because l itself is one of the
  l2 rows), since AVG rounds in Spark (scale + 4) and is a DOUBLE in DuckDB (§9.10). The text
  returns ``SUM(l.extendedprice)``; the ``/ 7.0`` is applied outside SQL (``exact.decimal_quotient``),
  next to the exact numerator.
- **NQ2** has two texts. Its lowest subquery refers to the outermost tuple (``b4.price <= b.price``,
  two levels up); DuckDB evaluates that as written, Spark cannot resolve outer references from more
  than one level up. The Spark text computes the same middle aggregate M(q) per distinct outer price
  q in a derived table, with the correlation one level deep, and joins it back on price (the tests
  run both texts on DuckDB and check they agree).

**Partition keys.** The service keeps one instance of the query per partition key (a book). A
``keyed`` rendering evaluates every key in one statement: tables then carry a ``__key`` column,
every subquery is correlated on it, joins match it, and the result gains a leading ``__key`` column
(grouped by it). The markers in the templates expand to nothing in the plain rendering, which is
then the query of §1.2 on one key's tables:

- ``{key t}``: ``t.__key AS __key, `` at the head of a SELECT list;
- ``{by t}``: ``t.__key, `` at the head of a GROUP BY list;
- ``{groupby t}``: ``GROUP BY t.__key`` for scalar queries;
- ``{where a=b}``, ``{and a=b}``: ``WHERE a.__key = b.__key`` / `` AND a.__key = b.__key``.

Parameter markers: ``{num}``/``{den}`` (the fraction), ``{tnum}``/``{tden}`` (Q18's threshold),
``{brand}``, ``{container}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ivmstream.services.vwap import catalog

KEY = "__key"  # the partition-key column of the keyed rendering (ivmstream.spark.decode.KEY)

# The relations each query reads, in the order its tables are named, and the defaults of its SQL
# parameters (docs/vwap/algorithm.md §1.2): both derived from the catalog, the engine's source.
RELATIONS: dict[str, tuple[str, ...]] = {q: info.reads for q, info in catalog.QUERIES.items()}
DEFAULTS: dict[str, dict[str, Any]] = {q: catalog.sql_defaults(q) for q in catalog.QUERIES}

QUERIES = tuple(RELATIONS)

# --- the texts ----------------------------------------------------------------------------------------

# DBToaster vwap.sql: 0.25·T > S>(p).
VWAP = """
SELECT {key b1}COALESCE(SUM(b1.price * b1.volume), 0) AS vwap FROM bids b1
WHERE {num} * (SELECT COALESCE(SUM(b3.volume), 0) FROM bids b3{where b3=b1})
    > {den} * (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price > b1.price{and b2=b1})
{groupby b1}
"""

# Ex. 2.2 as printed in the paper: 0.75·T < S<=(p).
VWAP_PAPER = """
SELECT {key b}COALESCE(SUM(b.price * b.volume), 0) AS vwap FROM bids b
WHERE {num} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1{where b1=b})
    < {den} * (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price{and b2=b})
{groupby b}
"""

EX21 = """
SELECT {key r}COALESCE(SUM(r.a * r.b), 0) AS ex21 FROM R r
WHERE {num} * (SELECT COALESCE(SUM(r1.b), 0) FROM R r1{where r1=r})
    = {den} * (SELECT COALESCE(SUM(r2.b), 0) FROM R r2 WHERE r2.a = r.a{and r2=r})
{groupby r}
"""

# DBToaster missedtrades.sql.
MST = """
SELECT {key b}b.broker_id, COALESCE(SUM((a.price * a.volume) + (-1 * b.price * b.volume)), 0) AS mst
FROM bids b, asks a
WHERE {num} * (SELECT COALESCE(SUM(a1.volume), 0) FROM asks a1{where a1=a})
    > {den} * (SELECT COALESCE(SUM(a2.volume), 0) FROM asks a2 WHERE a2.price > a.price{and a2=a})
  AND {num} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1{where b1=b})
    > {den} * (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price > b.price{and b2=b}){and a=b}
GROUP BY {by b}b.broker_id
"""

# DBToaster pricespread.sql: b.volume > 0.0001·T_b, written den·b.volume > num·T_b.
PSP = """
SELECT {key b}COALESCE(SUM(a.price + (-1 * b.price)), 0) AS psp FROM bids b, asks a
WHERE ({den} * b.volume > {num} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1{where b1=b}))
  AND ({den} * a.volume > {num} * (SELECT COALESCE(SUM(a1.volume), 0) FROM asks a1{where a1=a})){and a=b}
{groupby b}
"""

# Reconstructions (docs/vwap/algorithm.md §1.3: the paper gives no SQL for SQ1, SQ2, NQ1, NQ2).
SQ1A = """
SELECT {key b}COALESCE(SUM(b.price * b.volume), 0) AS sq1 FROM bids b
WHERE {num} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1 WHERE b1.broker_id = b.broker_id{and b1=b})
    < {den} * (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price{and b2=b})
{groupby b}
"""

SQ1B = """
SELECT {key b}COALESCE(SUM(b.price * b.volume), 0) AS sq1 FROM bids b
WHERE {num} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1 WHERE b1.price >= b.price{and b1=b})
    < {den} * (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price{and b2=b})
{groupby b}
"""

SQ2 = """
SELECT {key b}COALESCE(SUM(b.price * b.volume), 0) AS sq2 FROM bids b
WHERE {num} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1{where b1=b})
    < {den} * (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2
               WHERE b2.price + b2.volume <= b.price{and b2=b})
{groupby b}
"""

NQ1 = """
SELECT {key b}COALESCE(SUM(b.price * b.volume), 0) AS nq1 FROM bids b
WHERE {num} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1
               WHERE {num} * (SELECT COALESCE(SUM(b3.volume), 0) FROM bids b3{where b3=b1})
                   < {den} * (SELECT COALESCE(SUM(b4.volume), 0) FROM bids b4
                              WHERE b4.price <= b1.price{and b4=b1}){and b1=b})
    < {den} * (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price{and b2=b})
{groupby b}
"""

# NQ1 plus `AND b4.price <= b.price`: b4 is correlated with the outermost tuple, two levels up.
NQ2 = """
SELECT {key b}COALESCE(SUM(b.price * b.volume), 0) AS nq2 FROM bids b
WHERE {num} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1
               WHERE {num} * (SELECT COALESCE(SUM(b3.volume), 0) FROM bids b3{where b3=b1})
                   < {den} * (SELECT COALESCE(SUM(b4.volume), 0) FROM bids b4
                              WHERE b4.price <= b1.price AND b4.price <= b.price{and b4=b1}){and b1=b})
    < {den} * (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price{and b2=b})
{groupby b}
"""

# NQ2 for Spark: the middle aggregate M(q) of an outer tuple at price q only depends on q, so it is
# computed once per distinct price q over the pairs (b1, q), where b4's two outer references are one
# level up; each outer tuple b then compares M(b.price) (0 when no b1 qualifies, as COALESCE(SUM)).
NQ2_SPARK = """
SELECT {key b}COALESCE(SUM(b.price * b.volume), 0) AS nq2
FROM bids b LEFT JOIN (
    SELECT {key x}x.q AS q, SUM(x.volume) AS m
    FROM (SELECT {key b1}b1.price AS price, b1.volume AS volume, qs.q AS q
          FROM bids b1, (SELECT DISTINCT {key b0}b0.price AS q FROM bids b0) qs{where qs=b1}) x
    WHERE {num} * (SELECT COALESCE(SUM(b3.volume), 0) FROM bids b3{where b3=x})
        < {den} * (SELECT COALESCE(SUM(b4.volume), 0) FROM bids b4
                   WHERE b4.price <= x.price AND b4.price <= x.q{and b4=x})
    GROUP BY {by x}x.q
) mq ON mq.q = b.price{and mq=b}
WHERE {num} * COALESCE(mq.m, 0)
    < {den} * (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price{and b2=b})
{groupby b}
"""

# TPC-H Q17 (paper constants), exact form of `l.quantity < 0.2 * AVG(l2.quantity)`; see the module doc.
Q17 = """
SELECT {key l}COALESCE(SUM(l.extendedprice), 0) AS sum_extendedprice FROM lineitem l, part p
WHERE p.partkey = l.partkey AND p.brand = {brand} AND p.container = {container}{and p=l}
  AND {den} * l.quantity * (SELECT COUNT(*) FROM lineitem l2 WHERE l2.partkey = p.partkey{and l2=p})
    < {num} * (SELECT COALESCE(SUM(l2.quantity), 0) FROM lineitem l2 WHERE l2.partkey = p.partkey{and l2=p})
{groupby l}
"""

# DBToaster query17a.sql (fraction 1/200): Q17's correlation with a SUM and no part selection.
Q17A = """
SELECT {key l}COALESCE(SUM(l.extendedprice), 0) AS sum_extendedprice FROM lineitem l, part p
WHERE p.partkey = l.partkey{and p=l}
  AND {den} * l.quantity
    < {num} * (SELECT COALESCE(SUM(l2.quantity), 0) FROM lineitem l2 WHERE l2.partkey = p.partkey{and l2=p})
{groupby l}
"""

# DBToaster query18.sql (threshold 100).
Q18 = """
SELECT {key c}c.name, c.custkey, o.orderkey, o.orderdate, o.totalprice, SUM(l.quantity) AS sum_quantity
FROM customer c, orders o, lineitem l
WHERE o.orderkey IN (SELECT l3.orderkey
                     FROM (SELECT {key l2}l2.orderkey, SUM(l2.quantity) AS QTY
                           FROM lineitem l2 GROUP BY {by l2}l2.orderkey) l3
                     WHERE {tden} * QTY > {tnum}{and l3=o})
  AND c.custkey = o.custkey AND o.orderkey = l.orderkey{and o=c}{and l=c}
GROUP BY {by c}c.name, c.custkey, o.orderkey, o.orderdate, o.totalprice
"""

TEMPLATES: dict[str, str] = {
    "vwap": VWAP,
    "vwap-paper": VWAP_PAPER,
    "ex21": EX21,
    "mst": MST,
    "psp": PSP,
    "sq1a": SQ1A,
    "sq1b": SQ1B,
    "sq2": SQ2,
    "nq1": NQ1,
    "nq2": NQ2,
    "q17": Q17,
    "q17a": Q17A,
    "q18": Q18,
}
SPARK_TEMPLATES: dict[str, str] = {"nq2": NQ2_SPARK}
DIALECTS = ("duckdb", "spark")


# --- parameters and rendering -------------------------------------------------------------------------


def query_params(query: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The query's parameters from service options (defaults filled in, other options ignored),
    validated and typed (``catalog.coerce_param``); strings must also be safe as SQL literals."""
    if query not in DEFAULTS:
        raise ValueError(f"unknown vwap query {query!r}; expected one of {', '.join(QUERIES)}")
    given = {name: options[name] for name in DEFAULTS[query] if options.get(name) is not None}
    for name in ("brand", "container"):
        value = given.get(name)
        if value is not None and (not isinstance(value, str) or "'" in value or "\\" in value):
            raise ValueError(f"{name} must be a string without quotes or backslashes, got {value!r}")
    return catalog.resolve_params(query, given, QUERIES, "vwap")


def template_name(query: str, params: Mapping[str, Any]) -> str:
    return f"sq1{params['variant']}" if query == "sq1" else query


_MARKER = re.compile(r"\{([a-z_]+)(?: ([a-z0-9]+)(?:=([a-z0-9]+))?)?\}")


def render(
    query: str,
    params: Mapping[str, Any] | None = None,
    *,
    keyed: bool = False,
    dialect: str = "duckdb",
) -> str:
    """The query's SQL with its parameters (``query_params``; defaults when None) filled in.

    ``keyed``: evaluate every partition key at once (tables carry ``__key``; the result's first
    column is the key). ``dialect``: "duckdb" (the texts of docs/vwap/algorithm.md §1.2) or "spark"
    (NQ2's Spark text, §5.4)."""
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}, got {dialect!r}")
    p = query_params(query, params or {})
    name = template_name(query, p)
    text = (SPARK_TEMPLATES.get(name) if dialect == "spark" else None) or TEMPLATES[name]
    values: dict[str, str] = {}
    if "fraction" in p:
        values["num"], values["den"] = str(p["fraction"].numerator), str(p["fraction"].denominator)
    if "threshold" in p:
        values["tnum"], values["tden"] = str(p["threshold"].numerator), str(p["threshold"].denominator)
    for s in ("brand", "container"):
        if s in p:
            values[s] = f"'{p[s]}'"

    def expand(m: re.Match[str]) -> str:
        marker, a, b = m.groups()
        if a is None:
            return values[marker]
        if not keyed:
            return ""
        if marker == "key":
            return f"{a}.{KEY} AS {KEY}, "
        if marker == "by":
            return f"{a}.{KEY}, "
        if marker == "groupby":
            return f"GROUP BY {a}.{KEY}"
        if marker == "where":
            return f" WHERE {a}.{KEY} = {b}.{KEY}"
        if marker == "and":
            return f" AND {a}.{KEY} = {b}.{KEY}"
        raise ValueError(f"unknown marker {m.group(0)!r} in the {name} template")

    return _MARKER.sub(expand, text).strip() + "\n"
