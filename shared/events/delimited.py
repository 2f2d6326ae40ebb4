"""Delimited text tables as update events: CSV with a header row, and headerless ``|``-separated ``.tbl``.

Both turn each row into one event of a single relation. CSV cells carry no types, so ``parse_scalar``
guesses (integers stay exact); a ``.tbl`` file read for a known relation is typed by the relation's
declared column types instead, so a text column of digits stays text. Rows with too few or too many
cells still become events, so validation reports what is wrong (a missing or unexpected column)
rather than the row vanishing.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ivmstream.events.source import SourceError, SourceRecord, key_of, text_lines

_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # the integers orjson can encode


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


def _row_event(
    relation: str, header: Sequence[str], values: Sequence[Any], delta_column: str | None
) -> tuple[dict[str, Any], Any]:
    """The row (cells beyond the header as ``_extraN`` columns) and the delta (+1 unless a column has it)."""
    delta: Any = 1
    out: dict[str, Any] = {}
    for name, value in zip(header, values, strict=False):
        if name == delta_column:
            delta = value
        else:
            out[name] = value
    for j in range(len(header), len(values)):
        out[f"_extra{j - len(header) + 1}"] = values[j]
    return out, delta


def read_csv(
    path: str | Path,
    relation: str,
    *,
    key_field: str | None = None,
    delimiter: str = ",",
    columns: Sequence[str] | None = None,
    delta_column: str = "delta",
) -> Iterator[SourceRecord]:
    """Rows of one relation. The header names the columns unless ``columns`` is given (headerless
    files); a column named ``delta_column`` carries the multiplicity change, else +1."""
    if not relation:
        raise SourceError("CSV input needs --relation to say which relation its rows belong to")
    return _csv_records(Path(path), relation, key_field, delimiter, columns, delta_column)


def _csv_records(
    path: Path,
    relation: str,
    key_field: str | None,
    delimiter: str,
    columns: Sequence[str] | None,
    delta_column: str,
) -> Iterator[SourceRecord]:
    # Bytes that are not UTF-8 survive decoding as lone surrogates, so one bad row becomes an error
    # record instead of an exception in the middle of the file (quoted cells may span lines).
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as fh:
        reader = csv.reader(fh, delimiter=delimiter, skipinitialspace=True)
        header = list(columns) if columns is not None else None
        for row in reader:
            lineno = reader.line_num
            bad = _not_utf8(row)
            if header is None:
                if bad is not None:
                    raise SourceError(f"{path}: the CSV header (line {lineno}) is not valid UTF-8")
                header = [h.strip() for h in row]
                continue
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if bad is not None:
                raw = delimiter.join(row).encode("utf-8", "surrogateescape")
                yield SourceRecord(lineno, raw, None, error=f"not valid UTF-8: {bad}", relation=relation)
                continue
            if delimiter == "|" and len(row) == len(header) + 1 and row[-1] == "":
                row = row[:-1]  # TPC-H dbgen lines end with a trailing separator
            out, delta = _row_event(relation, header, [parse_scalar(c) for c in row], delta_column)
            yield SourceRecord(
                lineno,
                orjson.dumps({"relation": relation, "row": out, "delta": delta}),
                key_of(out, key_field),
                relation=relation,
            )


def _not_utf8(cells: Sequence[str]) -> str | None:
    """Why cells decoded with ``surrogateescape`` were not UTF-8 (None: they were)."""
    for cell in cells:
        if not cell.isascii():
            try:
                cell.encode("utf-8")
            except UnicodeEncodeError as exc:
                return str(exc)
    return None


# --- .tbl: headerless, |-separated, typed by the relation's declared columns --------------------------

_INT_RE = re.compile(r"[+-]?[0-9]+")
_DEC_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")


def _int_cell(s: str) -> int | str:
    if _INT_RE.fullmatch(s):
        v = int(s)
        if _INT_MIN <= v <= _INT_MAX:
            return v
    return s


def _float_cell(s: str) -> float | str:
    if "_" in s or not s.isascii():
        return s
    try:
        f = float(s)
    except ValueError:
        return s
    return f if math.isfinite(f) else s


def _number_cell(s: str) -> int | float | str:
    v = _int_cell(s)
    return v if type(v) is int else _float_cell(s)


def _exact_cell(s: str) -> int | str:
    """Integers as ints; other decimals stay text, which the codec reads as an exact Decimal."""
    v = _int_cell(s)
    if type(v) is int:
        return v
    return s[1:] if s.startswith("+") and _DEC_RE.fullmatch(s) else s


def _bool_cell(s: str) -> bool | str:
    low = s.lower()
    return True if low == "true" else False if low == "false" else s


# A cell that does not parse as its type stays text: the codec then rejects it with ``wrong-type``.
_TYPED_CELLS: dict[str, Callable[[str], Any]] = {
    "int": _int_cell,
    "float": _float_cell,
    "number": _number_cell,
    "decimal": _exact_cell,
    "exact": _exact_cell,
    "bool": _bool_cell,
}


def _cell_parser(typ: str | None) -> Callable[[str], Any]:
    if typ == "str":
        return lambda text: text  # verbatim: text columns may hold digits or end in spaces
    typed = _TYPED_CELLS.get(typ) if typ is not None else None
    if typed is None:
        return parse_scalar

    def parse(text: str) -> Any:
        s = text.strip()
        return None if s == "" else typed(s)

    return parse


def read_tbl(
    path: str | Path,
    relation: str,
    columns: Sequence[str],
    *,
    types: Mapping[str, str] | None = None,
    key_field: str | None = None,
) -> Iterator[SourceRecord]:
    """Insert events from a headerless ``|``-separated file whose fields are ``columns`` in order (a
    trailing ``|`` is allowed). ``types`` (column -> codec type) types the cells; columns without a type
    are guessed like CSV cells. A line that is not UTF-8 becomes an error record."""
    if not relation:
        raise SourceError("tbl input needs a relation (--relation, or the file name)")
    if not columns:
        raise SourceError(f"tbl input of {relation!r} needs its columns")
    parsers = [_cell_parser((types or {}).get(c)) for c in columns]
    return _tbl_records(Path(path), relation, tuple(columns), parsers, key_field)


def _tbl_records(
    path: Path,
    relation: str,
    columns: tuple[str, ...],
    parsers: list[Callable[[str], Any]],
    key_field: str | None,
) -> Iterator[SourceRecord]:
    n = len(columns)
    for line in text_lines(path, relation):
        if isinstance(line, SourceRecord):
            yield line
            continue
        lineno, _data, text = line
        cells = text.split("|")
        if len(cells) == n + 1 and cells[-1].strip() == "":
            cells.pop()  # the trailing separator dbgen writes
        values = [p(c) for p, c in zip(parsers, cells, strict=False)]
        values += [parse_scalar(c) for c in cells[n:]]
        row, delta = _row_event(relation, columns, values, None)
        yield SourceRecord(
            lineno,
            orjson.dumps({"relation": relation, "row": row, "delta": delta}),
            key_of(row, key_field),
            relation=relation,
        )
