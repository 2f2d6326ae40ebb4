"""A SQL file to a checked ``Script``: statements pre-parsed per dialect, then parsed by sqlglot."""

from __future__ import annotations

from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ivmstream.sql import dialects
from ivmstream.sql.dtree import read_dtree
from ivmstream.sql.errors import SqlError
from ivmstream.sql.model import SQL_TYPES, Script, Table, TopicSource, View
from ivmstream.sql.source import Statement, read_statements
from ivmstream.sql.updateps import compile_dml, updateps_clause

RINGS_BY_FILE = {  # F-IVM ring headers -> the fivm ring they are
    "ring_cofactor": "covariance",
    "ring_relational": "listing",
    "ring_factorized": "factorized",
    "ring_degree": "sum",
    "ring_matrix": "matrix",
}


def parse_sql(stmt: Statement) -> exp.Expression:
    """sqlglot's parse of the (pre-parsed) statement; its errors as one positioned line."""
    try:
        tree: exp.Expression = sqlglot.parse_one(stmt.text)  # type: ignore[assignment]
    except ParseError as exc:
        err = exc.errors[0] if exc.errors else {}
        where = stmt.at(int(err.get("line") or 1), int(err.get("col") or 1))
        desc = str(err.get("description") or exc).splitlines()[0]
        raise SqlError(f"cannot parse: {desc}", where) from None
    except TokenError as exc:
        raise SqlError(f"cannot parse: {exc}", stmt.position(0)) from None
    return tree


def load_script(path: str | Path, *, base: Path | None = None) -> Script:
    """Every table and view of a SQL file (INCLUDEs followed); SqlError on the first problem."""
    script = Script(str(path))
    stem = Path(path).name.split(".", 1)[0]
    unnamed = 0
    for stmt in read_statements(path, base=base):
        dtree = dialects.dtree_import(stmt)
        if dtree is not None:
            script.variable_order = read_dtree(dtree, stmt, base)
            continue
        typ = dialects.type_declaration(stmt)
        if typ is not None:
            script.types[typ[0].lower()] = _ring_of(typ[1], stmt)
            continue
        create = dialects.create_clause(stmt)
        if create is not None:
            _add_table(script, stmt, create)
            continue
        dml = updateps_clause(stmt)
        provenance = dialects.provenance_clause(stmt)
        if dml is not None and provenance is None:
            raise SqlError(
                "UPDATEPS (...) must be followed by PROVENANCE WITH COARSE GRAINED RANGESB(...) OF (query)",
                stmt.position(0),
            )
        sample = dialects.sample_clause(stmt)
        dialects.rewrite_in_list(stmt)
        lifts = _lifts(stmt)
        tree = parse_sql(stmt)
        name = None
        select = tree
        if isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "VIEW":
            name = tree.this.name.lower() if isinstance(tree.this, exp.Table) else None
            select = tree.expression
        if not isinstance(select, exp.Select):
            raise SqlError(
                f"unsupported statement {tree.key.upper()} (supported: CREATE STREAM/TABLE, CREATE VIEW, "
                "SELECT, INCLUDE, IMPORT DTREE, CREATE TYPE, PROVENANCE ... OF (SELECT ...))",
                stmt.position(0),
            )
        unnamed += name is None
        dialect = "imp" if provenance else "fivm" if lifts or script.variable_order else "dbtoaster"
        if name is not None:
            dialect = "kafka" if dialect == "dbtoaster" else dialect
        view = View(name or f"{stem}_{unnamed}", select, stmt, dialect, sample, provenance, lifts)
        if dml is not None:
            view.updates = compile_dml(dml, stmt, script)
        if any(v.name == view.name for v in script.views):
            raise SqlError(f"view {view.name!r} is defined twice", stmt.position(0))
        script.views.append(view)
    return script


def _ring_of(header: str, stmt: Statement) -> str:
    stem = Path(header).name.split(".", 1)[0].lower()
    for prefix, ring in RINGS_BY_FILE.items():
        if stem.startswith(prefix):
            return ring
    raise SqlError(
        f"CREATE TYPE: unknown ring file {header!r} (known: {', '.join(RINGS_BY_FILE)})", stmt.position(0)
    )


def _add_table(script: Script, stmt: Statement, create: dialects.CreateClause) -> None:
    tree = parse_sql(stmt)
    schema = tree.this if isinstance(tree, exp.Create) else None
    if not isinstance(schema, exp.Schema) or not isinstance(schema.this, exp.Table):
        raise SqlError("CREATE: expected CREATE STREAM|TABLE name (column type, ...)", stmt.position(0))
    name = schema.this.name.lower()
    if name in script.tables:
        raise SqlError(f"table {name!r} is declared twice", stmt.position(0))
    columns: dict[str, str] = {}
    scales: dict[str, int] = {}
    key: tuple[str, ...] = ()
    for item in schema.expressions:
        if isinstance(item, exp.PrimaryKey):
            key = tuple(e.name.lower() for e in item.expressions)
            continue
        if not isinstance(item, exp.ColumnDef):
            raise SqlError(f"CREATE {name}: unsupported item {item.sql()!r}", stmt.position(0))
        col = item.name.lower()
        kind = item.args.get("kind")
        sql_type = kind.this.name if isinstance(kind, exp.DataType) else "?"
        if sql_type not in SQL_TYPES:
            where = stmt.at(**_meta(item.this))
            raise SqlError(
                f"column {name}.{col}: unsupported type {sql_type} "
                f"(supported: {', '.join(sorted(SQL_TYPES))})",
                where,
            )
        if col in columns:
            raise SqlError(f"column {name}.{col} is declared twice", stmt.at(**_meta(item.this)))
        columns[col] = SQL_TYPES[sql_type]
        params = kind.expressions if isinstance(kind, exp.DataType) else []
        if SQL_TYPES[sql_type] == "exact" and len(params) == 2:
            scales[col] = int(params[1].name)
    src = create.source
    if isinstance(src, TopicSource) and src.key is not None:
        named = tuple(k.strip().lower() for k in src.key.split(","))
        if key and named != key:
            raise SqlError(f"WITH key {src.key!r} differs from the PRIMARY KEY of {name}", src.where)
        key = named
    for k in key:
        if k not in columns:
            raise SqlError(f"PRIMARY KEY names {k!r}, which is not a column of {name}", stmt.position(0))
    script.tables[name] = Table(name, columns, create.kind, create.source, stmt.position(0), key, scales)


def _meta(node: exp.Expression) -> dict[str, int]:
    meta = node.meta
    return {"line": int(meta.get("line", 1)), "col": int(meta.get("col", 1))}


def _lifts(stmt: Statement) -> dict[str, str]:
    """F-IVM lifts are read by ``ivmstream.sql.fivm_dialect`` (the statement is rewritten there)."""
    from ivmstream.sql.fivm_dialect import rewrite_lifts

    return rewrite_lifts(stmt)
