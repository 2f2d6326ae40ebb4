"""Hostile records for a relation, each with the reason the decoders must refuse it for.

Built from good events (same relation, key and shape), so a flood of them looks like the real stream to
everything but validation: the test of the dead-letter path (tests/integration/hostile/test_flood.py) and the
throughput benchmark (bench/hostile.py) mix them with the good events.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from ivmstream.events import Relation

# A JSON value each column type refuses (as text, spliced into the record).
WRONG_TYPE: dict[str, Sequence[str]] = {
    "int": ['"7"', "7.5", "true", "[7]"],
    "float": ['"1.5"', "false", "{}"],
    "number": ['"2"', "true", "[]"],
    "str": ["1", "2.5", "false", '{"s":1}'],
    "bool": ["1", '"true"', "[]"],  # null has its own reason, null-value
    "decimal": ["true", "[]", '"abc"'],
    "exact": ["false", "{}", '"x"'],
}
_PLACEHOLDER = "\x00HOSTILE"


def _with_column(event: dict[str, Any], column: str, raw: str | bytes) -> bytes:
    """``event`` as JSON with ``column`` of its row holding the JSON text ``raw`` verbatim."""
    spliced = dict(event, row=dict(event["row"], **{column: _PLACEHOLDER}))
    text = raw if isinstance(raw, bytes) else raw.encode()
    return orjson.dumps(spliced).replace(b'"\\u0000HOSTILE"', text)


def _with_delta(event: dict[str, Any], raw: str) -> bytes:
    return orjson.dumps(dict(event, delta=0)).replace(b'"delta":0', b'"delta":' + raw.encode())


def hostile_record(
    kind: str, event: dict[str, Any], relation: Relation, rng: random.Random, max_record_bytes: int
) -> tuple[bytes, str]:
    """One hostile variant of ``event`` (a good event of ``relation``): ``(value, expected reason)``."""
    columns = relation.columns
    column, typ = columns[rng.randrange(len(columns))]
    strings = [c for c, t in columns if t == "str"]
    if kind == "oversized":
        pad = "x" * (max_record_bytes + rng.randrange(1, 200))
        target = strings[0] if strings else column
        return _with_column(event, target, orjson.dumps(pad).decode()), "oversized"
    if kind == "too-deep":
        depth = rng.randrange(17, min(1500, max_record_bytes // 3))
        return _with_column(event, column, "[" * depth + "]" * depth), "too-deep"
    if kind == "integer-out-of-range":
        beyond = rng.choice([2**64, -(2**63) - 1, 10**30, -(10**40)])
        literal = str(beyond + (rng.randrange(1000) if beyond > 0 else -rng.randrange(1000)))
        return _with_delta(event, literal), "integer-out-of-range"
    if kind == "non-finite-number":
        return _with_delta(event, rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "-2E400"])), kind
    if kind == "invalid-utf8":
        bad = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"ok\x80"])  # not UTF-8
        if strings:
            return _with_column(event, strings[0], b'"' + bad + b'"'), kind
        value = orjson.dumps(event)
        name = orjson.dumps(event["relation"])
        return value.replace(name, name[:-1] + bad + b'"', 1), kind
    if kind == "wrong-type":
        return _with_column(event, column, rng.choice(WRONG_TYPE[typ])), kind
    if kind == "null-value":
        return _with_column(event, column, "null"), kind
    if kind == "malformed-json":  # cut short, at a character boundary (a cut character is invalid-utf8)
        value = orjson.dumps(event)
        return value[: rng.randrange(1, len(value) - 1)].decode("utf-8", "ignore").encode(), kind
    raise ValueError(f"unknown kind of hostile record {kind!r}")


KINDS = (
    "oversized",
    "too-deep",
    "integer-out-of-range",
    "non-finite-number",
    "invalid-utf8",
    "wrong-type",
    "null-value",
    "malformed-json",
)


def interleave(
    good: Sequence[tuple[bytes | None, bytes]],
    relation_of: Callable[[dict[str, Any]], Relation],
    seed: int,
    max_record_bytes: int,
) -> list[tuple[bytes | None, bytes, str | None]]:
    """``good`` (key, value) records with one hostile record after each (half the stream), kinds in turn:
    ``(key, value, expected reason or None for a good record)``; the hostile one takes the good one's key."""
    rng = random.Random(seed)
    out: list[tuple[bytes | None, bytes, str | None]] = []
    for i, (key, value) in enumerate(good):
        event = orjson.loads(value)
        out.append((key, value, None))
        bad, reason = hostile_record(KINDS[i % len(KINDS)], event, relation_of(event), rng, max_record_bytes)
        out.append((key, bad, reason))
    return out
