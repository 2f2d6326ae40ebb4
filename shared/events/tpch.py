"""TPC-H tables as update streams: the standard schema, a ``.tbl``/``.csv`` reader, and an interleaver.

Files are ``|``-separated without a header, in standard TPC-H column order (``dbgen``/``tpchgen-cli``
``.tbl`` output, and DBToaster's ``tpch/*/*.csv``). ``dbgen`` ends every line with a trailing ``|``;
DBToaster's copies do not; both are accepted. Column names drop the ``l_``/``o_``/``c_``/... prefix.

Every line becomes one insert event ``{"relation": table, "row": {...}, "delta": 1}``. Numbers stay
exact: keys and counts are JSON integers; money, quantities and rates (``exact`` columns) are integers
when written without a fraction (``17``) and decimal strings otherwise (``"17954.55"``), which the codec's
``exact`` type turns into a ``Decimal`` without a float ever being involved. A line that cannot be read
(wrong number of fields, a non-number in a numeric column, bad UTF-8) becomes a ``SourceRecord`` with
``error`` set and a precise reason, never an exception.

``interleave_tpch`` streams several tables at once, round-robin in proportion to their sizes: the
RPAI paper does not say in which order its TPC-H tables arrive, and a proportional interleave keeps
every prefix of the trace a sample of each table (the TPC-H runs of docs/vwap/benchmark.md use it).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson

from ivmstream.events.source import SourceError, SourceRecord, key_of, text_lines

__all__ = [
    "TPCH_TABLES",
    "interleave_tpch",
    "parse_tpch_line",
    "read_tpch",
    "tpch_relation_of",
]

_I, _X, _S = "int", "exact", "str"

TPCH_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "lineitem": (
        ("orderkey", _I),
        ("partkey", _I),
        ("suppkey", _I),
        ("linenumber", _I),
        ("quantity", _X),
        ("extendedprice", _X),
        ("discount", _X),
        ("tax", _X),
        ("returnflag", _S),
        ("linestatus", _S),
        ("shipdate", _S),
        ("commitdate", _S),
        ("receiptdate", _S),
        ("shipinstruct", _S),
        ("shipmode", _S),
        ("comment", _S),
    ),
    "orders": (
        ("orderkey", _I),
        ("custkey", _I),
        ("orderstatus", _S),
        ("totalprice", _X),
        ("orderdate", _S),
        ("orderpriority", _S),
        ("clerk", _S),
        ("shippriority", _I),
        ("comment", _S),
    ),
    "customer": (
        ("custkey", _I),
        ("name", _S),
        ("address", _S),
        ("nationkey", _I),
        ("phone", _S),
        ("acctbal", _X),
        ("mktsegment", _S),
        ("comment", _S),
    ),
    "part": (
        ("partkey", _I),
        ("name", _S),
        ("mfgr", _S),
        ("brand", _S),
        ("type", _S),
        ("size", _I),
        ("container", _S),
        ("retailprice", _X),
        ("comment", _S),
    ),
    "partsupp": (
        ("partkey", _I),
        ("suppkey", _I),
        ("availqty", _I),
        ("supplycost", _X),
        ("comment", _S),
    ),
    "supplier": (
        ("suppkey", _I),
        ("name", _S),
        ("address", _S),
        ("nationkey", _I),
        ("phone", _S),
        ("acctbal", _X),
        ("comment", _S),
    ),
    "nation": (
        ("nationkey", _I),
        ("name", _S),
        ("regionkey", _I),
        ("comment", _S),
    ),
    "region": (
        ("regionkey", _I),
        ("name", _S),
        ("comment", _S),
    ),
}

_INT_RE = re.compile(r"[+-]?[0-9]+")
_DEC_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # int64, what Kafka-side consumers and orjson agree on


def tpch_relation_of(path: str | Path, relation: str | None = None) -> str:
    """The table a file holds: ``relation`` if given, else the file name up to its first dot
    (``lineitem.tbl``, ``lineitem.csv``, ``lineitem.tbl.3``). SourceError for an unknown table."""
    name = relation if relation else Path(path).name.split(".", 1)[0].lower()
    if name not in TPCH_TABLES:
        how = "--relation" if relation else f"the file name {Path(path).name!r}"
        raise SourceError(
            f"unknown TPC-H table {name!r} (from {how}); known: {', '.join(TPCH_TABLES)}"
            + ("" if relation else "; pass --relation to name the table")
        )
    return name


def _parse_int(text: str, col: str) -> int:
    s = text.strip()
    if not _INT_RE.fullmatch(s):
        raise ValueError(f"column {col!r}: expected an integer, got {text!r}")
    v = int(s)
    if not _INT_MIN <= v <= _INT_MAX:
        raise ValueError(f"column {col!r}: integer {s} does not fit in 64 bits")
    return v


def _parse_exact(text: str, col: str, decimals: bool) -> int | str | Decimal:
    s = text.strip()
    if not _DEC_RE.fullmatch(s):
        raise ValueError(f"column {col!r}: expected a decimal number, got {text!r}")
    if "." not in s:
        v = int(s)
        if not _INT_MIN <= v <= _INT_MAX:
            raise ValueError(f"column {col!r}: integer {s} does not fit in 64 bits")
        return v
    if s[0] == "+":
        s = s[1:]
    return Decimal(s) if decimals else s


def parse_tpch_line(relation: str, line: str, *, decimals: bool = False) -> dict[str, Any]:
    """One ``|``-separated line of ``relation`` as a row dict; ValueError with the reason if malformed.

    ``exact`` columns come back as ints, or as decimal strings (JSON-ready) unless ``decimals`` asks for
    ``Decimal`` objects. Text columns are kept verbatim (TPC-H comments may end in spaces)."""
    cols = TPCH_TABLES[relation]
    cells = line.split("|")
    n = len(cols)
    if len(cells) == n + 1 and cells[-1].strip() == "":
        cells.pop()  # dbgen's trailing separator
    if len(cells) != n:
        raise ValueError(f"{relation} has {n} columns, the line has {len(cells)} fields")
    row: dict[str, Any] = {}
    for (col, typ), cell in zip(cols, cells, strict=True):
        if typ == _S:
            row[col] = cell
        elif typ == _I:
            row[col] = _parse_int(cell, col)
        else:
            row[col] = _parse_exact(cell, col, decimals)
    return row


def _records(
    path: Path, relation: str, key_field: str | None, where: str | None = None
) -> Iterator[SourceRecord]:
    prefix = f"{where}: " if where else ""
    for line in text_lines(path, relation, prefix):
        if isinstance(line, SourceRecord):
            yield line
            continue
        lineno, data, text = line
        try:
            row = parse_tpch_line(relation, text)
        except ValueError as exc:
            yield SourceRecord(lineno, data, None, error=f"{prefix}{exc}", relation=relation)
            continue
        yield SourceRecord(
            lineno,
            orjson.dumps({"relation": relation, "row": row, "delta": 1}),
            key_of(row, key_field),
            relation=relation,
        )


def read_tpch(
    path: str | Path, relation: str | None = None, key_field: str | None = None
) -> Iterator[SourceRecord]:
    """Insert events for every line of one TPC-H table file.

    The table comes from ``relation`` or the file name (``lineitem.tbl``); an unknown table or a missing
    file raises SourceError on the call itself, not on first iteration. ``key_field`` names a column
    whose value becomes the record key (for example ``partkey`` to co-partition lineitem and part, so a
    part and its lineitems land on the same key); rows keep all their columns. As with ``read_csv``, a
    key field that is not a column of the table gives records without a key (a keyed service then
    rejects them as ``missing-key``)."""
    p = Path(path)
    rel = tpch_relation_of(p, relation)
    if not p.is_file():
        raise SourceError(f"input file not found: {path}")
    return _records(p, rel, key_field)


def _count_rows(path: Path) -> int:
    n = 0
    with open(path, "rb") as fh:
        for raw in fh:
            if raw.strip():
                n += 1
    return n


def interleave_tpch(
    paths: Sequence[str | Path] | Iterable[str | Path],
    *,
    relations: Sequence[str | None] | None = None,
    key_field: str | None = None,
    proportional: bool = True,
) -> Iterator[tuple[str, SourceRecord]]:
    """Stream several tables as one insert-only trace: yields ``(relation, record)``.

    With ``proportional`` (the default), row j of a table with n rows sits at position
    (j + ½)/n of the trace and tables are merged by that position (ties in the order given), so every
    prefix of the trace holds about the same fraction of each table: lineitems and the parts/orders they
    join with arrive together, in both orders. Otherwise the tables follow one another in the order
    given. ``lineno`` is the line in the record's own file; error texts name the file. A file that is
    listed twice, a missing file or an unknown table raises SourceError on the call."""
    plist = [Path(p) for p in paths]
    rels = list(relations) if relations is not None else [None] * len(plist)
    if len(rels) != len(plist):
        raise SourceError(f"interleave_tpch: {len(plist)} paths but {len(rels)} relations")
    tables = [tpch_relation_of(p, r) for p, r in zip(plist, rels, strict=True)]
    seen: set[Path] = set()
    for p in plist:
        if not p.is_file():
            raise SourceError(f"input file not found: {p}")
        rp = p.resolve()
        if rp in seen:
            raise SourceError(f"interleave_tpch: {p} is listed twice")
        seen.add(rp)
    return _interleave(plist, tables, key_field, proportional)


def _interleave(
    plist: list[Path], tables: list[str], key_field: str | None, proportional: bool
) -> Iterator[tuple[str, SourceRecord]]:
    streams = [_records(p, t, key_field, where=p.name) for p, t in zip(plist, tables, strict=True)]
    if not proportional:
        for t, s in zip(tables, streams, strict=True):
            for rec in s:
                yield t, rec
        return
    sizes = [_count_rows(p) for p in plist]
    # Merge by exact position (2j+1)/(2n); the table index breaks ties deterministically.
    heap: list[tuple[Fraction, int, int]] = [(Fraction(1, 2 * n), i, 0) for i, n in enumerate(sizes) if n]
    heapq.heapify(heap)
    while heap:
        _, i, j = heapq.heappop(heap)
        rec = next(streams[i], None)
        if rec is None:  # the file shrank since it was counted
            continue
        yield tables[i], rec
        j += 1
        if j < sizes[i]:
            heapq.heappush(heap, (Fraction(2 * j + 1, 2 * sizes[i]), i, j))
    for t, s in zip(tables, streams, strict=True):  # rows of a file that grew since it was counted
        for rec in s:
            yield t, rec
