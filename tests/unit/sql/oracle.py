"""DuckDB as the independent oracle of the SQL tests: it reads the data files itself and evaluates the
view's own SELECT (transpiled by sqlglot), over the net bag of a deletions stream."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from ivmstream.sql.inputs import InputChoice, source_path
from ivmstream.sql.model import Script, View

ROOT = Path(__file__).resolve().parents[2] / "data" / "sql" / "dbtoaster"
DATA = ROOT / "data"
SHARED = Path(__file__).resolve().parents[4] / "shared" / "data" / "dbtoaster"
DUCK_TYPES = {
    "int": "BIGINT",
    "float": "DOUBLE",
    "exact": "DOUBLE",
    "str": "VARCHAR",
    "date": "DATE",
    "bool": "BOOLEAN",
}


@contextmanager
def dbtoaster_cwd(tmp: Path, data: Path = DATA) -> Iterator[Path]:
    """A working directory two levels under one where ``experiments/data`` is ``data``, so the paths
    DBToaster's files carry ('../../experiments/data/...') resolve as they do in its repository."""
    (tmp / "experiments").mkdir(exist_ok=True)
    link = tmp / "experiments" / "data"
    if not link.exists():
        link.symlink_to(data)
    cwd = tmp / "w" / "x"
    cwd.mkdir(parents=True, exist_ok=True)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        yield cwd
    finally:
        os.chdir(old)


def duckdb_rows(
    script: Script, view: View, choice: InputChoice, before: Sequence[str] = ()
) -> list[list[Any]]:
    """The view's rows by DuckDB over the tables' files (``before``: statements run first, e.g. DML)."""
    con = duckdb.connect()
    names = {t.name for t in script.tables.values()}
    for name in names:
        table = script.tables[name]
        path, fs = source_path(table, choice)
        if fs.format != "csv":
            raise ValueError("the oracle reads csv tables only")
        cols = list(table.columns.items())
        declared = [(c, DUCK_TYPES[k]) for c, k in cols]
        if fs.deletions:
            declared = [("__order", "DOUBLE"), ("__flag", "INTEGER"), *declared]
        spec = "{" + ", ".join(f"'{c}': '{t}'" for c, t in declared) + "}"
        delim = fs.options.get("delimiter", ",")
        src = (
            f"read_csv('{path}', delim='{delim}', header=false, quote='', escape='', columns={spec}, "
            "null_padding=true)"
        )
        colnames = ", ".join(c for c, _k in cols)
        if fs.deletions:
            con.execute(
                f"CREATE TABLE {name} AS SELECT {colnames} FROM (SELECT {colnames}, "
                f"SUM(CASE WHEN __flag = 1 THEN 1 ELSE -1 END) AS m FROM {src} GROUP BY ALL) s, "
                "range(CAST(GREATEST(m, 0) AS BIGINT)) r"
            )
        else:
            con.execute(f"CREATE TABLE {name} AS SELECT {colnames} FROM {src}")
    for statement in before:
        con.execute(statement)
    sql = coalesced(view.select)
    return [list(r) for r in con.execute(sql).fetchall()]


def _norm(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None  # 0/0 in DuckDB; a ratio over an empty join is NULL here
    if isinstance(v, Decimal):
        return float(v)
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def same_rows(ours: Sequence[Sequence[Any]], theirs: Sequence[Sequence[Any]], rel: float = 1e-6) -> bool:
    """Equal as bags of rows, numbers within ``rel``; an empty SUM (SQL NULL) equals DBToaster's 0."""

    def key(row: Sequence[Any]) -> str:
        return repr([(round(x, 2) if isinstance(x, float) else x) for x in map(_norm, row)])

    a = sorted((list(map(_norm, r)) for r in ours), key=key)
    b = sorted((list(map(_norm, r)) for r in theirs), key=key)
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        for x, y in zip(ra, rb, strict=True):
            if x is None and y in (None, 0):
                continue
            if y is None and x in (None, 0, 0.0):
                continue
            if isinstance(x, int | float) and isinstance(y, int | float):
                if not math.isclose(float(x), float(y), rel_tol=rel, abs_tol=1e-6):
                    return False
            elif x != y:
                return False
    return True


def coalesced(select: Any) -> str:
    """The SELECT in DuckDB's dialect with every SUM read as DBToaster's (an empty SUM is 0)."""
    import sqlglot.expressions as e

    def fix(node: Any) -> Any:
        if isinstance(node, e.Sum) and not isinstance(node.parent, e.Coalesce):
            return e.Coalesce(this=node.copy(), expressions=[e.Literal.number(0)])
        return node

    return select.copy().transform(fix).sql(dialect="duckdb")


def book_rows(trace: Path, brokers: int = 10) -> dict[str, list[tuple[Any, ...]]]:
    """The live bids and asks after an order-book trace (the platform's adaptor, DBToaster's rules)."""
    from collections import Counter

    from ivmstream.events.orderbook import OrderBookAdaptor

    adaptor = OrderBookAdaptor(book="both", brokers=brokers)
    bags: dict[str, Counter[tuple[Any, ...]]] = {"bids": Counter(), "asks": Counter()}
    for line in trace.read_text().splitlines():
        if line.strip():
            for ev in adaptor.feed_line(line):
                bags[ev["relation"]][tuple(ev["row"].values())] += ev["delta"]
    return {side: [row for row, m in bag.items() for _ in range(m)] for side, bag in bags.items()}


def duckdb_book_rows(view: View, trace: Path) -> list[list[Any]]:
    con = duckdb.connect()
    for side, rows in book_rows(trace).items():
        con.execute(
            f"CREATE TABLE {side} (t DOUBLE, id BIGINT, broker_id BIGINT, volume DOUBLE, price DOUBLE)"
        )
        if rows:
            con.executemany(f"INSERT INTO {side} VALUES (?, ?, ?, ?, ?)", rows)
    return [list(r) for r in con.execute(coalesced(view.select)).fetchall()]
