"""Pre-parsers for what sqlglot does not know, one per dialect clause, each keeping positions.

Each consumes its clause from a ``Statement`` (blanked, so later positions still point into the file)
and returns what it read:

- DBToaster: ``CREATE STREAM|TABLE t (...) FROM FILE 'f' LINE DELIMITED CSV (delimiter := '|',
  deletions := 'true')`` or ``... orderbook (book := 'bids', brokers := '10', deterministic := 'yes')``,
  and the platform's native events ``... json (relation := 'r')``;
  ``IN LIST (...)`` (rewritten to ``IN (...)``);
- Kafka DDL: ``CREATE TABLE t (..., PRIMARY KEY (...)) WITH (topic = '...', format = '...', key = '...')``
  and the sampling clause ``USING SAMPLE reservoir(k ROWS)``;
- IMP: ``PROVENANCE WITH COARSE GRAINED RANGESB(table(column b1, b2, ...)) OF (query)``;
- F-IVM: ``IMPORT DTREE FROM FILE 'f'`` and ``CREATE [DISTRIBUTED] TYPE name FROM FILE 'f' ...``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ivmstream.events.changes import NATIVE
from ivmstream.events.inputs import FORMATS as TOPIC_FORMATS
from ivmstream.sql.errors import SqlError
from ivmstream.sql.model import FileSource, TopicSource
from ivmstream.sql.source import Statement

_CREATE = re.compile(r"CREATE\s+(STREAM|TABLE)\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.IGNORECASE)
_FROM_FILE = re.compile(
    r"\s*FROM\s+FILE\s+'([^']*)'\s+LINE\s+DELIMITED\s+([A-Za-z_]+)\s*(\((.*)\))?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_WITH = re.compile(r"\s*WITH\s*\((.*)\)\s*$", re.IGNORECASE | re.DOTALL)
_ASSIGN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(:=|=)\s*'([^']*)'\s*(,|$)")
_IN_LIST = re.compile(r"\bIN\s+LIST\s*\(", re.IGNORECASE)
_SAMPLE = re.compile(r"\bUSING\s+SAMPLE\s+reservoir\s*\(\s*(\d+)\s+ROWS\s*\)\s*$", re.IGNORECASE)
_PROVENANCE = re.compile(
    r"\s*PROVENANCE\s+WITH\s+COARSE\s+GRAINED\s+RANGESB\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*"
    r"([A-Za-z_][A-Za-z0-9_]*)\s+([^()]*)\)\s*\)\s+OF\s*\(",
    re.IGNORECASE,
)
_DTREE = re.compile(r"IMPORT\s+DTREE\s+FROM\s+FILE\s+'([^']*)'\s*$", re.IGNORECASE)
_TYPE = re.compile(
    r"CREATE\s+(?:DISTRIBUTED\s+)?TYPE\s+([A-Za-z_][A-Za-z0-9_]*)\s+FROM\s+FILE\s+'([^']*)'", re.IGNORECASE
)
FILE_FORMATS = ("csv", "orderbook", "json")
CSV_OPTIONS = ("delimiter", "deletions", "schema")
ORDERBOOK_OPTIONS = ("book", "brokers", "deterministic", "validate")
JSON_OPTIONS = ("relation",)
TOPIC_OPTIONS = ("topic", "format", "key", "mode", "project")


@dataclass
class CreateClause:
    """What a CREATE statement's pre-parse found: kind and source (the rest is for sqlglot)."""

    kind: str  # stream | table
    source: FileSource | TopicSource | None


def _close_paren(text: str, open_at: int) -> int:
    depth, quote = 0, ""
    for i in range(open_at, len(text)):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _assignments(
    stmt: Statement, text: str, offset: int, allowed: tuple[str, ...], what: str
) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text) and text[pos:].strip():
        m = _ASSIGN.match(text, pos)
        if m is None:
            raise SqlError(f"{what}: expected name := 'value' here", stmt.position(offset + pos))
        name = m.group(1).lower()
        if name not in allowed:
            raise SqlError(
                f"{what}: unknown option {name!r} (known: {', '.join(allowed)})",
                stmt.position(offset + m.start(1)),
            )
        out[name] = m.group(3)
        pos = m.end()
    return out


def create_clause(stmt: Statement) -> CreateClause | None:
    """For ``CREATE STREAM|TABLE``: its kind and source, with the statement left as sqlglot's
    ``CREATE TABLE t (...)``; None for any other statement."""
    m = _CREATE.match(stmt.text)
    if m is None:
        return None
    kind = m.group(1).lower()
    if kind == "stream":
        stmt.replace(m.start(1), m.end(1), "TABLE")
    close = _close_paren(stmt.text, m.end() - 1)
    if close < 0:
        raise SqlError("CREATE: the column list is not closed", stmt.position(m.end() - 1))
    tail_at = close + 1
    tail = stmt.text[tail_at:]
    source: FileSource | TopicSource | None = None
    if tail.strip():
        source = _file_source(stmt, tail, tail_at) or _topic_source(stmt, tail, tail_at)
        if source is None:
            first = tail_at + len(tail) - len(tail.lstrip())
            raise SqlError(
                "expected FROM FILE '...' LINE DELIMITED csv|orderbook (...) or WITH (topic = '...', ...)",
                stmt.position(first),
            )
        stmt.blank(tail_at, len(stmt.text))
    if isinstance(source, TopicSource):
        kind = "stream"  # a topic carries the table's changes: it is updatable
    return CreateClause(kind, source)


def _file_source(stmt: Statement, tail: str, at: int) -> FileSource | None:
    m = _FROM_FILE.match(tail)
    if m is None:
        return None
    fmt = m.group(2).lower()
    where = stmt.position(at + m.start(1))
    if fmt not in FILE_FORMATS:
        raise SqlError(f"LINE DELIMITED {m.group(2)}: unknown format (known: CSV, orderbook, json)", where)
    allowed = {"csv": CSV_OPTIONS, "orderbook": ORDERBOOK_OPTIONS, "json": JSON_OPTIONS}[fmt]
    opts = _assignments(stmt, m.group(4) or "", at + (m.start(4) if m.group(4) else 0), allowed, fmt)
    return FileSource(m.group(1), fmt, opts, where)


def _topic_source(stmt: Statement, tail: str, at: int) -> TopicSource | None:
    m = _WITH.match(tail)
    if m is None:
        return None
    opts = _assignments(stmt, m.group(1), at + m.start(1), TOPIC_OPTIONS, "WITH")
    where = stmt.position(at + m.start())
    if "topic" not in opts:
        raise SqlError("WITH (...) must name the table's 'topic'", where)
    fmt = opts.get("format", NATIVE)
    if fmt not in TOPIC_FORMATS:
        raise SqlError(f"WITH format {fmt!r}: unknown (known: {', '.join(TOPIC_FORMATS)})", where)
    mode = opts.get("mode")
    if mode is not None and (fmt == NATIVE or mode not in ("full", "upsert")):
        raise SqlError("WITH mode: 'full' or 'upsert', for a change format", where)
    project = opts.get("project", "false").lower()
    if project not in ("true", "false"):
        raise SqlError("WITH project: 'true' or 'false'", where)
    return TopicSource(opts["topic"], fmt, opts.get("key"), where, mode, project == "true")


def rewrite_in_list(stmt: Statement) -> None:
    """DBToaster's ``x IN LIST (a, b)`` is SQL's ``x IN (a, b)``."""
    for m in reversed(list(_IN_LIST.finditer(stmt.text))):
        stmt.replace(m.start(), m.end(), "IN (")


def sample_clause(stmt: Statement) -> int | None:
    """``... USING SAMPLE reservoir(k ROWS)`` at the end of a view: k, the clause removed."""
    m = _SAMPLE.search(stmt.text)
    if m is None:
        return None
    k = int(m.group(1))
    if k < 1:
        raise SqlError("USING SAMPLE reservoir(k ROWS) needs k >= 1", stmt.position(m.start(1)))
    stmt.blank(m.start(), m.end())
    return k


def provenance_clause(stmt: Statement) -> dict[str, Any] | None:
    """IMP's ``PROVENANCE WITH COARSE GRAINED RANGESB(t(c b1, b2, ...)) OF (q)``: the table, column and
    range boundaries; the statement is left as ``q``."""
    m = _PROVENANCE.match(stmt.text)
    if m is None:
        return None
    close = _close_paren(stmt.text, m.end() - 1)
    if close < 0:
        raise SqlError("PROVENANCE ... OF (: the query is not closed", stmt.position(m.end() - 1))
    bounds: list[int | float] = []
    for piece in m.group(3).split(","):
        text = piece.strip()
        try:
            bounds.append(int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text))
        except ValueError:
            raise SqlError(f"RANGESB: boundary {text!r} is not a number", stmt.position(m.start(3))) from None
    if len(bounds) < 1 or sorted(bounds) != bounds:
        raise SqlError("RANGESB: boundaries must be ascending numbers", stmt.position(m.start(3)))
    stmt.blank(close, close + 1)
    stmt.blank(0, m.end())
    return {"table": m.group(1).lower(), "column": m.group(2).lower(), "boundaries": bounds}


def dtree_import(stmt: Statement) -> str | None:
    """F-IVM's ``IMPORT DTREE FROM FILE 'f'``: the file."""
    m = _DTREE.match(stmt.text)
    return m.group(1) if m else None


def type_declaration(stmt: Statement) -> tuple[str, str] | None:
    """F-IVM's ``CREATE [DISTRIBUTED] TYPE name FROM FILE 'ring/....hpp' ...``: (name, file)."""
    m = _TYPE.match(stmt.text)
    return (m.group(1), m.group(2)) if m else None
