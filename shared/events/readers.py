"""Input-file readers that turn jsonl, CSV, DBToaster order-book and TPC-H table files into wire records.

Every reader yields ``SourceRecord``s: the exact bytes that go on the topic (so ``produce`` and
``replay`` feed services identical input), the partition key, and the source line number for error
reports. A line a reader cannot turn into an event at all yields a record with ``error`` set instead
of being dropped silently.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from shared.events.orderbook import OrderBookAdaptor

FORMATS = ("jsonl", "csv", "orderbook", "tpch")
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # the integers orjson can encode


@dataclass(slots=True, frozen=True)
class SourceRecord:
    lineno: int
    value: bytes
    key: bytes | None = None
    error: str | None = None


class SourceError(ValueError):
    """The input as a whole cannot be read (missing file, bad options)."""


def guess_format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".csv", ".tbl"):
        return "csv"
    raise SourceError(f"cannot tell the format of {path}; pass --format ({'|'.join(FORMATS)})")


def _key_of(row: Any, key_field: str | None) -> bytes | None:
    if key_field is None or type(row) is not dict:
        return None
    kv = row.get(key_field)
    if kv is None:
        return None
    return str(kv).encode()


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
                key = _key_of(obj.get("row") if type(obj) is dict else None, key_field)
            yield SourceRecord(lineno, line, key)


def parse_scalar(text: str) -> int | float | str | None:
    """CSV cells carry no types: integers stay exact, then floats, else the string; empty is null."""
    s = text.strip()
    if s == "":
        return None
    if "_" in s or not s.isascii():
        return s  # Python's int()/float() accept "1_000" and non-ASCII digits; CSV numbers do not
    try:
        i = int(s)
    except ValueError:
        pass
    else:
        # orjson cannot write integers outside 64 bits; the exact text still suits a decimal column
        return i if _INT_MIN <= i <= _INT_MAX else s
    try:
        f = float(s)
    except ValueError:
        return s
    # "nan"/"inf" have no JSON form (orjson would write null): keep the text so validation is honest
    return f if math.isfinite(f) else s


def read_csv(
    path: str | Path,
    relation: str,
    *,
    key_field: str | None = None,
    delimiter: str = ",",
    columns: list[str] | None = None,
    delta_column: str = "delta",
) -> Iterator[SourceRecord]:
    """Rows of one relation. The header names the columns unless ``columns`` is given (headerless
    files such as TPC-H ``.tbl``); a column named ``delta`` carries the multiplicity change, else +1.
    Rows with too few or too many cells still become events so validation reports what is wrong."""
    if not relation:
        raise SourceError("CSV input needs --relation to say which relation its rows belong to")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter=delimiter, skipinitialspace=True)
        header = columns
        for row in reader:
            lineno = reader.line_num
            if header is None:
                header = [h.strip() for h in row]
                continue
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if delimiter == "|" and len(row) == len(header) + 1 and row[-1] == "":
                row = row[:-1]  # TPC-H dbgen lines end with a trailing separator
            values = [parse_scalar(c) for c in row]
            delta: Any = 1
            out: dict[str, Any] = {}
            for i, name in enumerate(header):
                if i >= len(values):
                    break
                if name == delta_column:
                    delta = values[i]
                else:
                    out[name] = values[i]
            for j in range(len(header), len(values)):
                out[f"_extra{j - len(header) + 1}"] = values[j]
            yield SourceRecord(
                lineno,
                orjson.dumps({"relation": relation, "row": out, "delta": delta}),
                _key_of(out, key_field),
            )


def read_orderbook(
    path: str | Path, *, book: str = "bids", brokers: int = 10, key: str | None = None
) -> Iterator[SourceRecord]:
    """DBToaster finance traces (``t,id,action,volume,price``) through the order-book adaptor."""
    adaptor = OrderBookAdaptor(book=book, brokers=brokers)
    kbytes = key.encode() if key is not None else None
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                events = adaptor.feed_line(line)
            except ValueError as exc:
                yield SourceRecord(lineno, line.strip().encode(), kbytes, error=str(exc))
                continue
            for ev in events:
                yield SourceRecord(lineno, orjson.dumps(ev), kbytes)


def read_source(
    path: str | Path,
    fmt: str | None = None,
    *,
    relation: str | None = None,
    key_field: str | None = None,
    book: str = "bids",
    brokers: int = 10,
    delimiter: str = ",",
) -> Iterator[SourceRecord]:
    """Open any supported input; raises SourceError for a missing file or a bad option."""
    p = Path(path)
    if not p.is_file():
        raise SourceError(f"input file not found: {path}")
    fmt = fmt or guess_format(p)
    # Options are checked now, not on first iteration of the (lazy) reader.
    if fmt == "csv" and not relation:
        raise SourceError("CSV input needs --relation to say which relation its rows belong to")
    if fmt == "orderbook":
        try:
            OrderBookAdaptor(book=book, brokers=brokers)
        except ValueError as exc:
            raise SourceError(str(exc)) from None
    if fmt == "jsonl":
        return read_jsonl(p, key_field)
    if fmt == "csv":
        return read_csv(p, relation or "", key_field=key_field, delimiter=delimiter)
    if fmt == "orderbook":
        return read_orderbook(p, book=book, brokers=brokers)
    if fmt == "tpch":  # headerless TPC-H .tbl/.csv; the table comes from --relation or the file name
        from shared.events.tpch import read_tpch  # tpch imports this module

        return read_tpch(p, relation, key_field)
    raise SourceError(f"unknown input format {fmt!r} (known: {', '.join(FORMATS)})")
