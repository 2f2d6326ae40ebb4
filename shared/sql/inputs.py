"""The files a script's ``FROM FILE`` clauses name, read as one ordered stream of base-table events.

Static tables (``CREATE TABLE``) come first, whole; then the streams, merged: a deletions file by its
first field (the event's global order, shared by every file of the stream), other files by line
number (insert-only streams reach the same final state in any order). ``orderbook`` files go through
the platform's order-book adaptor; a file read by several tables (bids and asks) is read once.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ivmstream.events.orderbook import OrderBookAdaptor
from ivmstream.secrets import redact
from ivmstream.sql.errors import SqlError
from ivmstream.sql.model import FileSource, Script, Table, TopicSource

Event = tuple[str, dict[str, Any], int]  # table, row, delta
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class InputChoice:
    """How paths are chosen: ``inputs`` overrides a table's file; ``dataset`` swaps the path component
    ``standard`` for another data set (a ``*_del`` data set reads DBToaster's deletions format)."""

    inputs: Mapping[str, str]
    dataset: str | None = None
    base: Path | None = None


def input_overrides(items: list[str] | None) -> dict[str, str]:
    """The ``--input TABLE=PATH`` options as {table: path} (table names lower-cased, as the script's are);
    SqlError for an option without both parts."""
    out: dict[str, str] = {}
    for item in items or []:
        table, sep, path = item.partition("=")
        if not sep or not table or not path:
            # echoed back, and a path may be a URL with a password
            raise SqlError(f"--input {redact(item)!r}: expected TABLE=PATH")
        out[table.lower()] = path
    return out


def source_path(table: Table, choice: InputChoice) -> tuple[Path, FileSource]:
    """The file a table reads and its source clause; SqlError if it has none or it is unreadable."""
    src = table.source
    if table.name in choice.inputs:
        path = Path(choice.inputs[table.name])
        if isinstance(src, FileSource):
            fs = src
        elif isinstance(src, TopicSource) and path.suffix in (".jsonl", ".json"):
            fs = FileSource(str(path), src.format, {}, table.where)  # records as the topic holds them
        else:
            fs = FileSource(str(path), "csv", {"delimiter": "|"}, table.where)
    else:
        if not isinstance(src, FileSource):
            raise SqlError(
                f"table {table.name} has no FROM FILE clause (pass --input {table.name}=PATH)", table.where
            )
        fs = src
        name = src.path
        if choice.dataset:
            name = re.sub(r"(?<=/)standard(?=/)", choice.dataset, name)
            if choice.dataset.endswith("_del") and src.format == "csv":
                fs = FileSource(name, "csv", {**src.options, "deletions": "true"}, src.where)
        path = Path(name)
        if not path.is_absolute():
            path = (choice.base or Path.cwd()) / path
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise SqlError(
            f"cannot read {str(path)!r} for table {table.name}: {exc.strerror}", fs.where
        ) from None
    return path, fs


def _cell(text: str, kind: str, col: str) -> Any:
    s = text.strip()
    if kind == "str":
        return text
    if kind == "int":
        return int(s)
    if kind == "float":
        return float(s)
    if kind == "exact":
        return int(s) if re.fullmatch(r"[+-]?\d+", s) else Decimal(s)
    if kind == "date":
        if not _DATE.fullmatch(s):
            raise ValueError(f"column {col}: {text!r} is not a date YYYY-MM-DD")
        return s
    if kind == "bool":
        return s.lower() in ("1", "true", "t", "yes")
    raise ValueError(kind)


def _csv(table: Table, path: Path, fs: FileSource, index: int) -> Iterator[tuple[Any, int, int, Event]]:
    delim = fs.options.get("delimiter", ",")
    cols = list(table.columns.items())
    deletions = fs.deletions
    width = len(cols) + (2 if deletions else 0)
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            cells = line.split(delim)
            if len(cells) == width + 1 and not cells[-1].strip():
                cells.pop()
            try:
                if len(cells) != width:
                    raise ValueError(f"expected {width} fields, found {len(cells)}")
                order: Any = lineno
                delta = 1
                if deletions:
                    order = Decimal(cells[0].strip())
                    delta = 1 if cells[1].strip() == "1" else -1
                    cells = cells[2:]
                row = {c: _cell(v, k, c) for (c, k), v in zip(cols, cells, strict=True)}
            except (ValueError, InvalidOperation) as exc:
                raise SqlError(f"{path}:{lineno}: table {table.name}: {exc}", fs.where) from None
            yield order, index, lineno, (table.name, row, delta)


def _json(table: Table, path: Path, fs: FileSource, index: int) -> Iterator[tuple[Any, int, int, Event]]:
    """Native events (``{"relation", "row", "delta"}``) of the relation ``relation`` (default the
    table's name, either case); columns the table does not declare are ignored."""
    import orjson

    from ivmstream.events.codec import COLUMN_TYPES
    from ivmstream.sql.topics import PLATFORM_TYPE

    relation = fs.options.get("relation", table.name).lower()
    checks = [(c, COLUMN_TYPES[PLATFORM_TYPE[k]]) for c, k in table.columns.items()]
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                ev = orjson.loads(line)
                if str(ev["relation"]).lower() != relation:
                    continue
                row = ev["row"]
                values = {c: check(row[c]) for c, check in checks}
                delta = ev.get("delta", 1)
                if type(delta) is not int or delta == 0:
                    raise ValueError(f"delta {delta!r} is not a non-zero integer")
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
                raise SqlError(f"{path}:{lineno}: table {table.name}: {what}", fs.where) from None
            yield lineno, index, lineno, (table.name, values, delta)


def _orderbook(
    tables: list[Table], path: Path, fs: FileSource, index: int
) -> Iterator[tuple[Any, int, int, Event]]:
    by_side = {
        str(t.source.options.get("book", "bids")).lower(): t
        for t in tables
        if isinstance(t.source, FileSource)
    }
    book = "both" if len(by_side) > 1 else next(iter(by_side))
    try:
        brokers = int(fs.options.get("brokers", "10"))
        adaptor = OrderBookAdaptor(book=book, brokers=brokers)
    except ValueError as exc:
        raise SqlError(f"orderbook: {exc}", fs.where) from None
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                events = adaptor.feed_line(line)
            except ValueError as exc:
                raise SqlError(f"{path}:{lineno}: orderbook: {exc}", fs.where) from None
            for ev in events:
                table = by_side.get(ev["relation"])
                if table is None:
                    continue
                row = dict(zip(table.columns, ev["row"].values(), strict=True))
                yield lineno, index, lineno, (table.name, row, ev["delta"])


def read_events(script: Script, tables: set[str], choice: InputChoice) -> Iterator[Event]:
    """Every event of the named tables' files: static tables whole first, then the streams merged.
    Every file is checked readable before the first event is yielded."""
    chosen = [script.tables[t] for t in script.tables if t in tables]
    resolved = {t.name: source_path(t, choice) for t in chosen}
    for t in chosen:
        if len(t.columns) != 5 and resolved[t.name][1].format == "orderbook":
            raise SqlError(
                f"orderbook table {t.name} must have 5 columns (t, id, broker_id, volume, price)", t.where
            )

    def readers(group: list[Table], start: int) -> list[Iterator[tuple[Any, int, int, Event]]]:
        out: list[Iterator[tuple[Any, int, int, Event]]] = []
        books: dict[Path, list[Table]] = {}
        for i, t in enumerate(group):
            path, fs = resolved[t.name]
            if fs.format == "orderbook":
                books.setdefault(path, []).append(t)
            elif fs.format == "json":
                out.append(_json(t, path, fs, start + i))
            elif fs.format != "csv":
                out.append(topic_records(t, path, fs, start + i))
            else:
                out.append(_csv(t, path, fs, start + i))
        for j, (path, ts) in enumerate(books.items()):
            out.append(_orderbook(ts, path, resolved[ts[0].name][1], start + len(group) + j))
        return out

    static = [t for t in chosen if t.static]
    streams = [t for t in chosen if not t.static]
    for reader in readers(static, 0):
        for _o, _i, _l, event in reader:
            yield event
    merged = heapq.merge(*readers(streams, len(static)), key=lambda item: (item[0], item[1], item[2]))
    for _o, _i, _l, event in merged:
        yield event


def topic_records(
    table: Table, path: Path, fs: FileSource, index: int
) -> Iterator[tuple[Any, int, int, Event]]:
    """A file of the records a table's topic holds (one per line: native events or change records),
    decoded as the worker decodes the topic."""
    from ivmstream.events import EventCodec, EventError, Schema
    from ivmstream.events.change_formats import ChangeCodec
    from ivmstream.events.changes import ChangeSpec, ImageTable
    from ivmstream.sql.topics import table_relation

    src = table.source
    schema = Schema.of(table_relation(table))
    decode: Any
    if fs.format == "native":
        native = EventCodec(schema)
        decode = lambda value: native.decode_many([value])[0]  # noqa: E731
    else:
        assert isinstance(src, TopicSource)
        images = fs.format == "upsert-json" or src.mode == "upsert"
        spec = ChangeSpec(fs.format, table.name, table.primary_key or None, src.project, images)
        codec = ChangeCodec(spec, schema, ImageTable() if images else None)
        decode = lambda value: codec.decode(None, value)  # noqa: E731
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            out = decode(line)
            if isinstance(out, EventError):
                raise SqlError(f"{path}:{lineno}: table {table.name}: {out.code}: {out.detail}", fs.where)
            for ev in out if isinstance(out, list) else [out]:
                yield lineno, index, lineno, (table.name, dict(ev.row), ev.delta)
