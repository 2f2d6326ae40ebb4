"""Why a record was refused: the stable reason codes and the checks behind the hostile-input ones.

A reason code is a metric label and the ``ivmstream.reason`` header of a dead letter, so the set is
closed and small, and each kind of hostile record has its own code: an operator reading the dead-letter
topic must be able to tell a flood of oversized records from a producer writing NaN. The checks here run
only on the reference (slow) path, which the fast decoders hand every record they cannot decide.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from typing import Any

# The decoder's codes -> what each means (docs/security.md lists them; tests reach every one). Engines add
# codes of their own for events that decode but cannot apply (e.g. deleting an absent tuple).
REASONS: dict[str, str] = {
    "oversized": "the record is longer than the codec's record size limit",
    "malformed-json": "the record is empty or not JSON",
    "invalid-utf8": "the record's text is not valid UTF-8 (or escapes a lone surrogate)",
    "non-finite-number": "a number is NaN, Infinity or overflows a double (JSON has no such numbers)",
    "integer-out-of-range": "an integer literal outside [-2**63, 2**64 - 1] (a JSON parser rounds it)",
    "too-deep": "JSON nested deeper than the nesting limit",
    "not-an-object": "the event or its row is not a JSON object",
    "missing-field": "the event lacks relation, row or delta",
    "unknown-field": "the event has a field besides relation, row and delta",
    "unknown-relation": "the relation is not one the service reads",
    "bad-delta": "delta is not an integer",
    "zero-delta": "delta is 0",
    "missing-key": "the row lacks the partition key field",
    "missing-column": "the row lacks a column of its relation",
    "null-value": "a column is null",
    "wrong-type": "a column or the key has the wrong JSON type",
    "unexpected-column": "the row has a column its relation does not declare",
}

# The change formats' own codes (docs/change-data.md); their records are also refused with the codes above
# (malformed-json, not-an-object, unknown-relation, wrong-type, ...) once decoded into events.
CHANGE_REASONS: dict[str, str] = {
    "unknown-op": "a change record's operation is none its format defines",
    "missing-before": "an update or delete without its before-image (the source does not log full rows)",
    "unavailable-value": "a column the view needs holds Debezium's __debezium_unavailable_value",
    "schema-mismatch": "the record's schema and its row disagree (a column or an encoding)",
    "decimal-without-scale": "a Connect decimal whose schema gives no scale",
    "missing-primary-key": "upsert mode: a record with neither a key nor the primary-key columns",
    "truncate-without-images": "a truncate on an input that keeps no row images (not upsert mode)",
}

# Codes the runtime and replay give records that decode but cannot be taken where they arrived.
RUNTIME_REASONS: dict[str, str] = {
    "keyless-partition": "an event of a view without a partition key arrived on a second input partition",
    "misrouted": "a sharded worker got an event whose shard column hashes to another shard",
    "not-a-partial": "a record on the coordinator's topic is not a shard's published partial result",
    "unreadable-line": "replay or produce could not read a line of an input file into an event",
}

# The default record size limit: Kafka's default maximum message size. IVMSTREAM_MAX_RECORD_BYTES
# overrides it for every codec of the process (a worker's, ``replay``'s).
MAX_RECORD_BYTES = 1 << 20
MAX_RECORD_BYTES_ENV = "IVMSTREAM_MAX_RECORD_BYTES"
# An event is two levels deep ({"row": {...}}); anything nested past this is hostile, not a typo.
MAX_NESTING = 16
# The integers the reference parser (orjson) reads exactly: signed 64-bit minimum to unsigned maximum.
INT_MIN, INT_MAX = -(2**63), 2**64 - 1

# An integer literal of 19 or more digits may be out of range; shorter ones never are. Cheap to search,
# so the exact check (a second parse) runs only on the few records with such a run of digits.
_LONG_DIGITS = re.compile(rb"\d{19}")
_NON_FINITE = (b"NaN", b"Infinity", b"-Infinity")
_INTEGER_LITERAL = re.compile(rb"-?\d+(?![\d.eE])")


def max_record_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The record size limit: IVMSTREAM_MAX_RECORD_BYTES if set (a positive integer), else the default."""
    text = (os.environ if environ is None else environ).get(MAX_RECORD_BYTES_ENV)
    if text is None or not text.strip():
        return MAX_RECORD_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{MAX_RECORD_BYTES_ENV} must be a positive number of bytes, got {text!r}")
    return value


def as_bytes(value: bytes | str) -> bytes:
    """The record as bytes (a str keeps lone surrogates, so that they are reported, not re-encoded away)."""
    return value if type(value) is bytes else str(value).encode("utf-8", "surrogatepass")


def json_error_reason(raw: bytes, message: str, pos: int) -> str:
    """The reason code for text the JSON parser refused (``message``/``pos`` from its error; ``pos``
    counts characters of the decoded text, so it is turned into an offset in ``raw`` first)."""
    if "depth limit" in message or "recursion" in message.lower():
        return "too-deep"
    if "UTF-8" in message or "surrogate" in message:
        return "invalid-utf8"
    if not raw.isascii():
        with contextlib.suppress(UnicodeDecodeError):  # not UTF-8: the message said so above
            pos = len(raw.decode("utf-8")[:pos].encode("utf-8"))
    if "infinity" in message:  # a literal no double holds: 1e400, or an integer of 309 digits or more
        return "integer-out-of-range" if _INTEGER_LITERAL.match(raw, max(pos, 0)) else "non-finite-number"
    for start in (pos, pos - 1):
        if 0 <= start < len(raw) and raw.startswith(_NON_FINITE, start):
            return "non-finite-number"
    return "malformed-json"


# JSON strings (escapes included) and integer literals outside them: a literal of 19 digits or more that
# is neither part of a float nor an exponent. Scanning the text is exact for valid JSON and much cheaper
# than a second parse.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_LONG_INTEGER = re.compile(rb"(?<![\d.eE+-])-?\d{19,}(?![\d.eE])")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def out_of_range_integer(raw: bytes) -> str | None:
    """The first integer literal of ``raw`` (valid JSON) outside [INT_MIN, INT_MAX], abbreviated (None: none).

    The JSON parser reads such literals as floats, which would silently round an exact column."""
    if _LONG_DIGITS.search(raw) is None:
        return None
    for match in _LONG_INTEGER.finditer(_STRING.sub(b'""', raw)):
        text = match[0].decode()
        if not INT_MIN <= int(text) <= INT_MAX:
            return text if len(text) <= 40 else f"{text[:20]}...({len(text)} digits)"
    return None


def too_deep(raw: bytes, limit: int = MAX_NESTING) -> bool:
    """Whether the JSON text ``raw`` nests arrays and objects more than ``limit`` levels deep, read from
    its brackets outside strings (exact for valid JSON), before any parser builds the nested values."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    for bracket in _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS):
        if bracket == 0x5B or bracket == 0x7B:  # [ {
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def shown(value: Any, limit: int = 80) -> str:
    """A value as a rejection's detail quotes it: containers by kind and size (the repr of a deeply
    nested one would overflow the stack), anything else by a repr cut to ``limit`` characters."""
    if type(value) is dict:
        return f"an object of {len(value)} member(s)"
    if type(value) is list:
        return f"an array of {len(value)} element(s)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
