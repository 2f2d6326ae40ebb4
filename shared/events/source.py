"""What every input reader produces: ``SourceRecord``s, and ``SourceError`` for input that cannot be read.

The base of the readers: it imports no reader, so every reader module (and the format registry) can
build on it without importing each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass(slots=True, frozen=True)
class SourceRecord:
    """The exact bytes that go on the topic, the partition key, and the source line for error reports.

    ``error`` is set (and ``value`` holds the raw line) when the line could not be turned into an event
    at all, with ``code`` its reason code where the reader names one (a change record's refusal);
    ``relation`` is the relation the reader wrote into ``value``, when it knows it (reports)."""

    lineno: int
    value: bytes
    key: bytes | None = None
    error: str | None = None
    relation: str | None = None
    code: str | None = None

    def refusal(self) -> str:
        """The error as reported: its reason code first, where known."""
        return f"{self.code}: {self.error}" if self.code is not None else str(self.error)


class SourceError(ValueError):
    """The input as a whole cannot be read (missing file, bad format or read option)."""


def key_of(row: Any, key_field: str | None) -> bytes | None:
    """The record key: the row's ``key_field`` value as text, or None (no key field, or no such column)."""
    if key_field is None or type(row) is not dict:
        return None
    value = row.get(key_field)
    return None if value is None else str(value).encode()


def file_stem(path: str | Path) -> str:
    """A file's name up to its first dot (``lineitem.tbl``, ``lineitem.tbl.3`` -> ``lineitem``)."""
    return Path(path).name.split(".", 1)[0]


_CANONICAL = b'{"relation":"'


def relation_of(record: SourceRecord) -> str | None:
    """The relation a record names: what its reader said, else read from its bytes (None if unreadable).

    Records the readers write start with ``{"relation":"`` and are read without parsing; other jsonl
    lines are parsed."""
    if record.relation is not None:
        return record.relation
    value = record.value
    if value.startswith(_CANONICAL):
        end = value.find(b'"', len(_CANONICAL))
        raw = value[len(_CANONICAL) : end]
        if end > 0 and b"\\" not in raw:
            try:
                return raw.decode()
            except UnicodeDecodeError:
                return None
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    name = obj.get("relation") if type(obj) is dict else None
    return name if type(name) is str else None


def text_lines(
    path: Path, relation: str, prefix: str = ""
) -> Iterator[tuple[int, bytes, str] | SourceRecord]:
    """``(lineno, raw, text)`` for each non-blank line of a headerless table file; a line that is not
    UTF-8 comes as an error record instead, so one bad line never stops the file."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            data = raw.rstrip(b"\r\n")
            if not data.strip():
                continue
            try:
                yield lineno, data, data.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield SourceRecord(
                    lineno, data, None, error=f"{prefix}not valid UTF-8: {exc}", relation=relation
                )
