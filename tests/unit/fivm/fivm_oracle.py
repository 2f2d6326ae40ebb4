"""Brute force for F-IVM tests: the query evaluated by DuckDB SQL over the current Z-relations.

Independent of the engine: the database is kept here as tuple -> multiplicity per relation, each
relation occurrence becomes a DuckDB table with a multiplicity column, and the aggregate is
``SUM(m_1 * ... * m_n * expr) GROUP BY free`` over the natural join written as explicit equalities
(so Cartesian products and self-joins need no special case).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent

SQL_TYPES = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR"}
PANDAS_TYPES = {"int": "int64", "float": "float64", "str": "object"}


def occurrences(config: Mapping[str, Any]) -> list[tuple[str, str, list[str], list[str]]]:
    """(occurrence, base relation, columns, types) from a configuration, read independently."""
    plain: dict[str, tuple[list[str], list[str]]] = {}
    for name, spec in config["relations"].items():
        if isinstance(spec, Mapping):
            continue
        cols, types = [], []
        for c in spec:
            if isinstance(c, str):
                cols.append(c)
                types.append("float")
            else:
                ((col, typ),) = c.items()
                cols.append(col)
                types.append(typ)
        plain[name] = (cols, types)
    out = []
    for name, spec in config["relations"].items():
        if isinstance(spec, Mapping):
            base = spec["alias_of"]
            out.append((name, base, list(spec["columns"]), plain[base][1]))
        else:
            out.append((name, name, *plain[name]))
    return out


@dataclass
class Database:
    """Z-relations: base relation -> tuple -> multiplicity (never 0)."""

    relations: dict[str, dict[tuple[Any, ...], int]] = field(default_factory=dict)

    def apply(self, events: Iterable[UpdateEvent], columns: Mapping[str, Sequence[str]]) -> None:
        for ev in events:
            rel = self.relations.setdefault(ev.relation, {})
            t = tuple(ev.row[c] for c in columns[ev.relation])
            m = rel.get(t, 0) + ev.delta
            if m:
                rel[t] = m
            else:
                rel.pop(t, None)


def brute_force(config: Mapping[str, Any], db: Database, con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The expected ``result()`` without stats: {"value": v} or {"groups": [...]} sorted by key."""
    cur = con.cursor()
    try:
        return _brute_force(config, db, cur)
    finally:
        cur.close()


def _brute_force(config: Mapping[str, Any], db: Database, con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    occs = occurrences(config)
    ring = config.get("ring", "count")
    free = list(config.get("free") or [])
    sums = config.get("sum") or []
    sums = [sums] if isinstance(sums, str) else list(sums)
    var_types: dict[str, str] = {}
    first: dict[str, str] = {}
    conds = []
    for i, (_, base, cols, types) in enumerate(occs):
        rows = db.relations.get(base, {})
        frame = pd.DataFrame(
            {
                **{
                    c: pd.Series([t[j] for t in rows], dtype=PANDAS_TYPES[typ])
                    for j, (c, typ) in enumerate(zip(cols, types, strict=True))
                },
                "m": pd.Series(list(rows.values()), dtype="int64"),
            }
        )
        con.register(f"t{i}", frame)
        for c, typ in zip(cols, types, strict=True):
            var_types[c] = typ
            if c in first:
                conds.append(f't{i}."{c}" = {first[c]}')
            else:
                first[c] = f't{i}."{c}"'
    real = ring == "sum" and any(var_types[v] == "float" for v in sums)
    num = "DOUBLE" if real else "HUGEINT"
    factors = [f"CAST(t{i}.m AS {num})" for i in range(len(occs))]
    factors += [f"CAST({first[v]} AS {num})" for v in sums]
    expr = " * ".join(factors)
    source = ", ".join(f"t{i}" for i in range(len(occs)))
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    if not free:
        ((v,),) = con.execute(f"SELECT SUM({expr}) FROM {source}{where}").fetchall()
        if v is None:
            v = 0.0 if real else 0
        return {"value": float(v) if real else int(v)}
    keys = ", ".join(first[v] for v in free)
    rows = con.execute(
        f"SELECT {keys}, SUM({expr}) AS v FROM {source}{where} GROUP BY {keys} HAVING SUM({expr}) <> 0"
    ).fetchall()
    groups = sorted(rows, key=lambda r: tuple(r[:-1]))
    return {
        "groups": [
            {"key": dict(zip(free, r[:-1], strict=True)), "value": float(r[-1]) if real else int(r[-1])}
            for r in groups
        ]
    }


def without_stats(result: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "stats"}


# --- random schemas and streams -------------------------------------------------------------------------


def values_of(typ: str, domain: int, float_step: float = 0.5) -> st.SearchStrategy[Any]:
    """Few distinct values (skew): ``domain`` of them, of the column's type. Float sums are exact with
    the default step; a step like 0.1 makes them depend on the order of additions."""
    ints = st.integers(0, domain - 1)
    if typ == "int":
        return ints
    if typ == "float":
        return ints.map(lambda i: i * float_step - float_step)
    return ints.map(lambda i: f"v{i}")


@st.composite
def acyclic_schema(draw: st.DrawFn, components: int = 1) -> dict[str, Any]:
    """A random alpha-acyclic join (a random join tree of 2-4 relations per component, each sharing 1-2
    variables with a parent): stars, paths and snowflakes; ``components`` > 1 gives a Cartesian product."""
    relations: dict[str, list[Any]] = {}
    types: dict[str, str] = {}
    counter = 0

    def fresh() -> str:
        nonlocal counter
        counter += 1
        name = f"x{counter}"
        types[name] = draw(st.sampled_from(["int", "float", "str"]))
        return name

    for c in range(components):
        n = draw(st.integers(1 if components > 1 else 2, 4))
        schemas: list[list[str]] = []
        for i in range(n):
            cols: list[str] = []
            if i:
                parent = schemas[draw(st.integers(0, i - 1))]
                k = draw(st.integers(1, min(2, len(parent))))
                cols += draw(st.permutations(parent))[:k]
            cols += [fresh() for _ in range(draw(st.integers(0 if i else 1, 2)))]
            schemas.append(cols)
        for i, cols in enumerate(schemas):
            relations[f"R{c}_{i}"] = [{v: types[v]} for v in cols]
    return {"relations": relations}


def relation_columns(config: Mapping[str, Any]) -> dict[str, list[str]]:
    return {name: cols for name, base, cols, _ in occurrences(config) if name == base}


def relation_types(config: Mapping[str, Any]) -> dict[str, list[str]]:
    return {name: types for name, base, _, types in occurrences(config) if name == base}


@st.composite
def event_batches(
    draw: st.DrawFn,
    config: Mapping[str, Any],
    relations: Sequence[str] | None = None,
    max_batches: int = 6,
    domain: int | None = None,
    float_step: float = 0.5,
) -> list[list[UpdateEvent]]:
    """Batches of inserts and deletes over a small pool of tuples per relation: duplicates, deletes of
    present and absent tuples (negative multiplicities), insert/delete pairs in one batch, skew."""
    cols = relation_columns(config)
    types = relation_types(config)
    rels = list(relations if relations is not None else cols)
    dom = domain if domain is not None else draw(st.integers(1, 3))
    pools = {
        r: draw(
            st.lists(
                st.tuples(*(values_of(t, dom, float_step) for t in types[r])),
                min_size=1,
                max_size=4,
                unique=True,
            )
        )
        for r in rels
    }
    event = st.sampled_from(rels).flatmap(
        lambda r: st.tuples(st.just(r), st.sampled_from(pools[r]), st.sampled_from([1, 1, 1, 2, -1, -1, -2]))
    )
    batches = draw(st.lists(st.lists(event, min_size=0, max_size=8), min_size=1, max_size=max_batches))
    return [[UpdateEvent(r, dict(zip(cols[r], t, strict=True)), m) for r, t, m in batch] for batch in batches]
