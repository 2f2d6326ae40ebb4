"""IMP's ``UPDATEPS (dml[; dml ...]) PROVENANCE WITH COARSE GRAINED RANGESB(...) OF (query)``: the
query's provenance sketch maintained under the DML, applied after the tables' data.

The DML is ``INSERT INTO t [(cols)] VALUES (...), ...``, ``DELETE FROM t [WHERE cond]`` or
``UPDATE t SET c = expr, ... [WHERE cond]``; each becomes update events of ``t`` against the table's
contents when it runs (a delete retracts every matching row with its multiplicity; an update retracts
it and inserts its new image), so the sketches service maintains the sketch incrementally, as IMP's
UPDATEPS does. Tables, columns and types are checked when the file is loaded.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ivmstream.sql.errors import SqlError
from ivmstream.sql.expr import Compiler, Fn, position_of
from ivmstream.sql.model import Script, Table
from ivmstream.sql.source import Statement

_UPDATEPS = re.compile(r"UPDATEPS\s*\(", re.IGNORECASE)
Event = tuple[str, dict[str, Any], int]


@dataclass
class Dml:
    """One DML statement, compiled: its table, the rows it inserts, or its filter and new values."""

    kind: str  # insert | delete | update
    table: str
    rows: list[dict[str, Any]]
    where: Fn | None
    sets: dict[str, Fn]

    def events(self, bag: Counter[tuple[Any, ...]], columns: list[str]) -> Iterator[Event]:
        """The DML's events against the table's contents ``bag`` (updated as they are made)."""
        if self.kind == "insert":
            for row in self.rows:
                bag[tuple(row[c] for c in columns)] += 1
                yield self.table, dict(row), 1
            return
        for key, m in list(bag.items()):
            if m <= 0:
                continue
            row = dict(zip(columns, key, strict=True))
            if self.where is not None and not self.where(row):
                continue
            bag[key] -= m
            yield self.table, row, -m
            if self.kind == "update":
                new = {**row, **{c: f(row) for c, f in self.sets.items()}}
                bag[tuple(new[c] for c in columns)] += m
                yield self.table, new, m


def updateps_clause(stmt: Statement) -> list[tuple[str, int]] | None:
    """The DML texts (with their offsets) of ``UPDATEPS (...)``, the clause blanked; None otherwise."""
    m = _UPDATEPS.match(stmt.text)
    if m is None:
        return None
    depth, quote, close = 0, "", -1
    for i in range(m.end() - 1, len(stmt.text)):
        ch = stmt.text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch == "'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                close = i
                break
    if close < 0:
        raise SqlError("UPDATEPS (: the update statements are not closed", stmt.position(m.end() - 1))
    out, start = [], m.end()
    for piece in re.split(r";", stmt.text[m.end() : close]):
        if piece.strip():
            out.append((piece, start))
        start += len(piece) + 1
    if not out:
        raise SqlError("UPDATEPS (): no update statement", stmt.position(m.start()))
    stmt.blank(0, close + 1)
    return out


def compile_dml(texts: list[tuple[str, int]], stmt: Statement, script: Script) -> list[Dml]:
    """Each DML statement checked against the declared tables and compiled."""
    return [_one(text, offset, stmt, script) for text, offset in texts]


def _one(text: str, offset: int, stmt: Statement, script: Script) -> Dml:
    where_at = stmt.position(offset + len(text) - len(text.lstrip()))
    try:
        tree = sqlglot.parse_one(text)
    except ParseError as exc:
        raise SqlError(
            f"UPDATEPS: cannot parse {text.strip()!r}: {str(exc).splitlines()[0]}", where_at
        ) from None
    sub = Statement(text, stmt.file, where_at.line, where_at.col)
    target = (
        tree.this.this if isinstance(tree, exp.Insert) and isinstance(tree.this, exp.Schema) else tree.this
    )
    if not isinstance(tree, exp.Insert | exp.Delete | exp.Update) or not isinstance(target, exp.Table):
        raise SqlError(
            f"UPDATEPS: {tree.key.upper()} is not an update (supported: INSERT ... VALUES, DELETE, UPDATE)",
            where_at,
        )
    table = script.tables.get(target.name.lower())
    if table is None:
        raise SqlError(f"UPDATEPS: unknown table {target.name!r}", position_of(sub, target))
    compiler = _compiler(sub, table)
    if isinstance(tree, exp.Insert):
        return Dml("insert", table.name, _values(tree, table, sub, compiler), None, {})
    cond = tree.args.get("where")
    where = None
    if cond is not None:
        compiler.check_condition(cond.this)
        where = compiler.compile(cond.this)
    sets: dict[str, Fn] = {}
    for assign in tree.expressions if isinstance(tree, exp.Update) else []:
        column = assign.this.name.lower()
        if column not in table.columns:
            raise SqlError(f"UPDATEPS: unknown column {column!r} of {table.name}", position_of(sub, assign))
        _check_type(compiler, assign.expression, table.columns[column], sub)
        sets[column] = compiler.compile(assign.expression)
    return Dml("update" if sets else "delete", table.name, [], where, sets)


def _compiler(sub: Statement, table: Table) -> Compiler:
    def resolve(col: exp.Column) -> tuple[tuple[str, str], str]:
        name = col.name.lower()
        if name not in table.columns:
            raise SqlError(f"UPDATEPS: unknown column {name!r} of {table.name}", position_of(sub, col))
        return (table.name, name), table.columns[name]

    return Compiler(sub, resolve, lambda ref: lambda row: row[ref[1]])


def _check_type(compiler: Compiler, node: exp.Expression, kind: str, sub: Statement) -> None:
    got = compiler.type_of(node)
    numeric = {"int", "float", "exact"}
    if not (got == kind or (got in numeric and kind in numeric) or {got, kind} <= {"str", "date"}):
        raise SqlError(
            f"UPDATEPS: type mismatch: {node.sql()!r} is {got}, the column {kind}", position_of(sub, node)
        )


def _values(tree: exp.Insert, table: Table, sub: Statement, compiler: Compiler) -> list[dict[str, Any]]:
    names = (
        [c.name.lower() for c in tree.this.expressions]
        if isinstance(tree.this, exp.Schema)
        else list(table.columns)
    )
    values = tree.args.get("expression")
    if not isinstance(values, exp.Values):
        raise SqlError("UPDATEPS: INSERT takes VALUES (...)", position_of(sub, tree))
    if sorted(names) != sorted(table.columns):
        raise SqlError(f"UPDATEPS: INSERT INTO {table.name} must give every column", position_of(sub, tree))
    rows = []
    for tup in values.expressions:
        if len(tup.expressions) != len(names):
            raise SqlError(
                f"UPDATEPS: a row of {len(tup.expressions)} values for {len(names)} columns",
                position_of(sub, tup),
            )
        row = {}
        for name, node in zip(names, tup.expressions, strict=True):
            _check_type(compiler, node, table.columns[name], sub)
            value = compiler.compile(node)(None)
            row[name] = float(value) if table.columns[name] == "float" else value
        rows.append(row)
    return rows


def dml_events(dml: list[Dml], script: Script, bags: dict[str, Counter[tuple[Any, ...]]]) -> list[Event]:
    """Every DML statement's events, in order, against the tables' contents ``bags``."""
    out: list[Event] = []
    for d in dml:
        out.extend(d.events(bags[d.table], list(script.tables[d.table].columns)))
    return out


def with_updates(script: Script, views: list[Any], events: Iterator[Event]) -> Iterator[Event]:
    """The tables' events, then the events of every ``UPDATEPS`` statement's DML (in file order) against
    the tables as those events left them."""
    dml = [d for v in views for d in getattr(v, "updates", [])]
    if not dml:
        yield from events
        return
    bags: dict[str, Counter[tuple[Any, ...]]] = {d.table: Counter() for d in dml}
    columns = {t: list(script.tables[t].columns) for t in bags}
    for table, row, delta in events:
        if table in bags:
            bags[table][tuple(row[c] for c in columns[table])] += delta
        yield table, row, delta
    yield from dml_events(dml, script, bags)
