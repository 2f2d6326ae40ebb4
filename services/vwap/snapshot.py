"""The vwap engine's snapshot format, shared by the engine and the Spark bootstrap.

A snapshot is the live bag (the ledger every delete is validated against) plus, for order-book
queries, the per-price levels of each book side: price -> (W = Σ volume, cnt = Σ multiplicity,
PV = Σ price·volume). The levels fully determine every price-keyed index, so a restore builds the
trees in one ascending pass; restoring also re-derives them from the bag and refuses a snapshot whose
two halves disagree (a corrupt or mis-built bootstrap must not start a service).

    {"v": 1, "query": str, "strategy": str,
     "bag":    {relation: [[col1, ..., colN, multiplicity], ...]},      # rows sorted, multiplicity > 0
     "levels": {"bids"|"asks": [[price, W, cnt, PV], ...]},           # prices ascending; optional
     "counters": {"events": int, "rejected": int},                    # optional
     "auto": [running strategy, batch events, batch touched, credit]}  # strategy auto only

Exact numbers are ints or exact decimal strings (``exact.to_json``); text columns stay strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import orjson

from ivmstream.sdk import Relation, json_bytes
from ivmstream.services.vwap.exact import exact_context, from_json, to_json

VERSION = 1
Level = tuple[Any, Any, int, Any]  # price, W, cnt, PV


def encode_row(values: Sequence[Any]) -> list[Any]:
    """A bag tuple as JSON: exact decimals as exact strings, ints and text unchanged."""
    return [to_json(v) if isinstance(v, Decimal) else v for v in values]


def _exact_decimal(v: Any) -> Any:
    """orjson's ``default`` for ``bag_key``: an exact decimal as ``encode_row`` writes it; no other type
    becomes JSON."""
    if isinstance(v, Decimal):
        return to_json(v)
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def bag_key(rel: str, values: Sequence[Any]) -> bytes:
    """A bag tuple's key in the engine's state entries: ``[rel, *encode_row(values)]`` as JSON, in one
    orjson call (decimals through its ``default``)."""
    return json_bytes((rel, *values), default=_exact_decimal)


def column_types(relation: Relation) -> list[str]:
    return [t for _c, t in relation.columns]


def decode_row(values: Sequence[Any], types: Sequence[str]) -> tuple[Any, ...]:
    """The inverse of ``encode_row`` for a relation with the given column types."""
    exact = ("exact", "decimal")
    return tuple(from_json(v) if t in exact else v for v, t in zip(values, types, strict=False))


def _sort_key(values: Sequence[Any]) -> tuple[Any, ...]:
    # Deterministic order across mixed int/Decimal columns: compare as (type-rank, value) per column.
    return tuple((0, v) if not isinstance(v, str) else (1, v) for v in values)


def encode(
    query: str,
    strategy: str,
    bag: Mapping[str, Mapping[tuple[Any, ...], int]],
    levels: Mapping[str, Iterable[Level]] | None = None,
    counters: Mapping[str, int] | None = None,
    choice: Sequence[Any] | None = None,
) -> bytes:
    out: dict[str, Any] = {"v": VERSION, "query": query, "strategy": strategy, "bag": {}}
    for rel in sorted(bag):
        rows = [[*list(values), m] for values, m in bag[rel].items() if m]
        rows.sort(key=lambda r: _sort_key(r[:-1]))
        out["bag"][rel] = [[*encode_row(r[:-1]), r[-1]] for r in rows]
    if levels is not None:
        out["levels"] = {rel: [[to_json(x) for x in lv] for lv in levels[rel]] for rel in sorted(levels)}
    if counters is not None:
        out["counters"] = dict(counters)
    if choice is not None:
        out["auto"] = list(choice)
    return orjson.dumps(out)


def decode(data: bytes, relations: Mapping[str, Relation]) -> dict[str, Any]:
    """Parsed snapshot with exact values restored per column type: ints, Decimals, strings."""
    obj = orjson.loads(data)
    if obj.get("v") != VERSION:
        raise ValueError(f"unsupported vwap snapshot version {obj.get('v')!r}")
    bag: dict[str, dict[tuple[Any, ...], int]] = {}
    for rel, rows in obj["bag"].items():
        if rel not in relations:
            raise ValueError(f"snapshot has relation {rel!r}, which this query does not declare")
        types = column_types(relations[rel])
        table: dict[tuple[Any, ...], int] = {}
        for r in rows:
            *vals, m = r
            if len(vals) != len(types) or type(m) is not int or m <= 0:
                raise ValueError(f"malformed {rel} row in snapshot: {r!r}")
            table[decode_row(vals, types)] = m
        bag[rel] = table
    levels = None
    if "levels" in obj:
        levels = {
            rel: [(from_json(p), from_json(w), c, from_json(pv)) for p, w, c, pv in rows]
            for rel, rows in obj["levels"].items()
        }
    counters = obj.get("counters") or {}
    return {
        "query": obj["query"],
        "strategy": obj["strategy"],
        "bag": bag,
        "levels": levels,
        "counters": counters,
        "auto": obj.get("auto"),
    }


def book_levels(rows: Mapping[tuple[Any, ...], int], columns: Sequence[str]) -> list[Level]:
    """Per-price (W, cnt, PV) of one book side from its bag, prices ascending."""
    iv, ip = columns.index("volume"), columns.index("price")
    acc: dict[Any, list[Any]] = {}
    with exact_context():
        for values, m in rows.items():
            vol, price = values[iv], values[ip]
            a = acc.get(price)
            if a is None:
                acc[price] = a = [0, 0, 0]
            a[0] += m * vol
            a[1] += m
            a[2] += m * vol * price
    return [(p, a[0], a[1], a[2]) for p, a in sorted(acc.items())]
