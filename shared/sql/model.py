"""The query model: what a SQL file declares (tables, streams, views), independent of its dialect.

Names are case-insensitive (DBToaster's files mix ``LINEITEM`` and ``lineitem``) and kept lowercase.
Column types are the platform's (``int``, ``float``, ``str``, ``bool``, ``exact``) plus ``date``
(ISO text, so that comparisons of dates are comparisons of strings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ivmstream.sql.errors import Position
from ivmstream.sql.source import Statement

# SQL type names (sqlglot's DType names) -> the model's column types.
SQL_TYPES: dict[str, str] = {
    "INT": "int",
    "INTEGER": "int",
    "BIGINT": "int",
    "SMALLINT": "int",
    "TINYINT": "int",
    "FLOAT": "float",
    "DOUBLE": "float",
    "REAL": "float",
    "DECIMAL": "exact",
    "NUMERIC": "exact",
    "MONEY": "exact",
    "CHAR": "str",
    "VARCHAR": "str",
    "NCHAR": "str",
    "NVARCHAR": "str",
    "TEXT": "str",
    "STRING": "str",
    "DATE": "date",
    "BOOLEAN": "bool",
}
NUMERIC_TYPES = frozenset({"int", "float", "exact"})


@dataclass(frozen=True)
class FileSource:
    """``FROM FILE 'path' LINE DELIMITED <format> (options)``: csv (``delimiter``, ``deletions``) or
    orderbook (``book``, ``brokers``, ``deterministic``)."""

    path: str
    format: str
    options: dict[str, str]
    where: Position

    @property
    def deletions(self) -> bool:
        return self.options.get("deletions", "false").lower() in ("true", "yes", "1")


@dataclass(frozen=True)
class TopicSource:
    """``WITH (topic = '...', format = '...', key = '...', mode = '...', project = '...')``: a Kafka
    topic of the table's changes, read as the runtime's ``inputs`` read it (docs/change-data.md)."""

    topic: str
    format: str
    key: str | None
    where: Position
    mode: str | None = None  # full | upsert (change formats)
    project: bool = False  # drop record columns the table does not declare


@dataclass
class Table:
    """A declared relation: ``stream`` receives updates, ``table`` is static (loaded first)."""

    name: str
    columns: dict[str, str]  # column -> model type, in declared order
    kind: str  # "stream" | "table"
    source: FileSource | TopicSource | None
    where: Position
    primary_key: tuple[str, ...] = ()
    scales: dict[str, int] = field(default_factory=dict)  # DECIMAL(p, s) columns -> s

    @property
    def static(self) -> bool:
        return self.kind == "table"


@dataclass
class View:
    """One view: a SELECT (parsed), where it came from, and the dialect clauses around it."""

    name: str
    select: exp.Select
    statement: Statement
    dialect: str  # dbtoaster | kafka | fivm | imp
    sample: int | None = None  # USING SAMPLE reservoir(k ROWS)
    provenance: dict[str, Any] | None = None  # IMP: {table: str, column: str, boundaries: [...]}
    lifts: dict[str, Any] = field(default_factory=dict)  # F-IVM ring lifts by column
    ring: str | None = None  # F-IVM: the ring a CREATE TYPE / lift names
    updates: list[Any] = field(default_factory=list)  # IMP UPDATEPS: the DML applied after the data

    @property
    def where(self) -> Position:
        return self.statement.position(0)


@dataclass
class Script:
    """Everything one SQL file declares, checked."""

    path: str
    tables: dict[str, Table] = field(default_factory=dict)
    views: list[View] = field(default_factory=list)
    variable_order: Any = None  # F-IVM: IMPORT DTREE, as fivm's nested mapping
    types: dict[str, str] = field(default_factory=dict)  # F-IVM: CREATE TYPE name -> ring

    def view(self, name: str) -> View:
        for v in self.views:
            if v.name == name:
                return v
        raise KeyError(name)
