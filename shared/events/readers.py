"""The built-in input formats (jsonl, csv, tbl, orderbook, tpch) and ``read_source``, the front door.

Every reader yields ``SourceRecord``s: the exact bytes that go on the topic (so ``produce`` and
``replay`` feed services identical input), the partition key, and the source line number for error
reports. A line a reader cannot turn into an event at all yields a record with ``error`` set instead
of being dropped silently. The readers live in their own modules (``delimited``, ``orderbook``,
``tpch``); this one declares them as formats in ``FORMATS`` and depends on them, never the reverse.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from ivmstream.events.change_formats import CHANGE_FILE_FORMATS
from ivmstream.events.codec import Schema
from ivmstream.events.delimited import parse_scalar, read_csv, read_tbl
from ivmstream.events.formats import (
    FormatRegistry,
    InputFormat,
    ReadOption,
    ReadRequest,
    merge_options,
    name_list,
    non_empty_text,
    one_char,
)
from ivmstream.events.orderbook import read_orderbook
from ivmstream.events.source import SourceError, SourceRecord, file_stem, key_of
from ivmstream.events.tpch import read_tpch
from ivmstream.options import choice, positive_int

__all__ = [
    "FORMATS",
    "SourceError",
    "SourceRecord",
    "guess_format",
    "parse_scalar",
    "read_csv",
    "read_jsonl",
    "read_orderbook",
    "read_source",
    "read_tbl",
    "register_format",
]


def read_jsonl(path: str | Path, key_field: str | None = None) -> Iterator[SourceRecord]:
    """One event per line, forwarded byte for byte; blank lines are skipped."""
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            key = None
            if key_field is not None:
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError:
                    obj = None
                key = key_of(obj.get("row") if type(obj) is dict else None, key_field)
            yield SourceRecord(lineno, line, key)


# --- the built-in formats: a ReadRequest in, the reader's records out ---------------------------------


def _jsonl(req: ReadRequest) -> Iterator[SourceRecord]:
    return read_jsonl(req.path, req.key_field)


def _csv(req: ReadRequest) -> Iterator[SourceRecord]:
    opts = req.options
    return read_csv(
        req.path,
        req.relation or "",
        key_field=req.key_field,
        delimiter=opts["delimiter"],
        columns=opts["columns"],
        delta_column=opts["delta_column"],
    )


BOOK_SIDES = ("bids", "asks")


def orderbook_sides(book: str, schema: Schema | None) -> str:
    """The side(s) to emit: ``auto`` is the sides the consuming service declares (both without one)."""
    if book != "auto":
        return book
    if schema is None:
        return "both"
    sides = [s for s in BOOK_SIDES if s in schema.relations]
    if not sides:
        raise SourceError(
            "format orderbook: the service declares neither bids nor asks "
            f"(relations: {', '.join(schema.relations)}); pass --read-option book=bids|asks|both"
        )
    return "both" if len(sides) == 2 else sides[0]


def _orderbook(req: ReadRequest) -> Iterator[SourceRecord]:
    book = orderbook_sides(req.options["book"], req.schema)
    return read_orderbook(req.path, book=book, brokers=req.options["brokers"])


def _tbl(req: ReadRequest) -> Iterator[SourceRecord]:
    relation = req.relation or file_stem(req.path)
    how = "--relation" if req.relation else f"the file name {req.path.name!r}"
    declared = req.schema.relations.get(relation) if req.schema is not None else None
    columns = req.options["columns"]
    if columns is None:
        if req.schema is None:
            raise SourceError(
                f"format tbl needs the columns of {relation!r}: pass --read-option columns=a,b,c, or the "
                "service whose relation it is (produce --service S [--config C]; replay knows it)"
            )
        if declared is None:
            raise SourceError(
                f"format tbl: {relation!r} (from {how}) is not a relation of the service "
                f"(relations: {', '.join(req.schema.relations)}); pass --relation"
            )
        columns = declared.column_names
    types = dict(declared.columns) if declared is not None else None
    return read_tbl(req.path, relation, columns, types=types, key_field=req.key_field)


def _tpch(req: ReadRequest) -> Iterator[SourceRecord]:
    return read_tpch(req.path, req.relation, req.key_field)


JSONL = InputFormat(
    "jsonl",
    'one update event per line, {"relation", "row", "delta"}, forwarded byte for byte',
    _jsonl,
    suffixes=(".jsonl", ".ndjson", ".json"),
)
CSV = InputFormat(
    "csv",
    "rows of --relation with a header row naming the columns; a delta column is optional (default +1)",
    _csv,
    {
        "delimiter": ReadOption(",", one_char, "the field separator (alias --delimiter)"),
        "columns": ReadOption(None, name_list, "column names of a file without a header row"),
        "delta_column": ReadOption("delta", non_empty_text, "the column holding the multiplicity change"),
    },
    suffixes=(".csv",),
)
TBL = InputFormat(
    "tbl",
    "headerless |-separated rows of one relation (--relation, default the file name up to its first "
    "dot), fields in the relation's declared column order, a trailing | allowed; inserts",
    _tbl,
    {
        "columns": ReadOption(
            None, name_list, "the fields in order (default: the relation's columns, from the service)"
        ),
    },
    suffixes=(".tbl",),
)
ORDERBOOK = InputFormat(
    "orderbook",
    "DBToaster order-book trace t,id,action,volume,price: B/S insert bids/asks, E executes, D/F delete",
    _orderbook,
    {
        "book": ReadOption(
            "auto",
            choice("auto", "bids", "asks", "both"),
            "side(s) to emit; auto: those the service declares, both without a service (alias --book)",
        ),
        "brokers": ReadOption(10, positive_int(text=True), "broker_id = id mod brokers (alias --brokers)"),
    },
)
TPCH = InputFormat(
    "tpch",
    "a TPC-H table (dbgen .tbl or DBToaster .csv), the table from --relation or the file name; "
    "--input repeatable: the tables are interleaved in proportion to their sizes",
    _tpch,
)

FORMATS = FormatRegistry([JSONL, CSV, TBL, ORDERBOOK, TPCH, *CHANGE_FILE_FORMATS])


def register_format(fmt: InputFormat) -> InputFormat:
    """Add a format to the built-in registry (for code that is not a service; services declare theirs on
    ``ServiceDefinition.formats``)."""
    return FORMATS.register(fmt)


def guess_format(path: str | Path) -> str:
    """The built-in format a file's suffix names; SourceError if none does."""
    return FORMATS.guess(path)


def read_source(
    path: str | Path,
    fmt: str | None = None,
    *,
    relation: str | None = None,
    key_field: str | None = None,
    schema: Schema | None = None,
    formats: FormatRegistry | None = None,
    options: Mapping[str, Any] | None = None,
    **read_options: Any,
) -> Iterator[SourceRecord]:
    """Open any input: ``fmt`` (default: from the suffix) in ``formats`` (default the built-ins), with
    read options from ``options`` and keyword arguments (``book="both"``, ``delimiter=";"``). ``schema``,
    the consuming service's, lets readers fill in what the file leaves out (tbl columns, book sides).
    Raises SourceError on the call for a missing file, an unknown format or a bad option."""
    registry = formats if formats is not None else FORMATS
    return registry.read(
        path,
        fmt,
        options=merge_options(options or {}, read_options),
        relation=relation,
        key_field=key_field,
        schema=schema,
    )
