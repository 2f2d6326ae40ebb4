"""Engine state holding non-finite floats, encoded so that it comes back exactly.

JSON has no infinity or NaN, and orjson writes them as ``null``: a sum that overflowed to ``inf`` (or an
``inf - inf`` that became NaN) would restore as None and break the next update. ``state_bytes`` writes
each non-finite float as the tagged object ``{"$float": "inf" | "-inf" | "nan"}`` and everything else
exactly as ``json_bytes`` does, so finite values (``-0.0`` included) keep their bytes and entries written
before the tag existed still restore. ``state_loads`` reads both. A JSON string cannot hold the bytes
``{"$float":`` unescaped, so finding them in the encoded text is an exact test for a tag.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from ivmstream.events.encoding import json_bytes

TAG = "$float"
_MARK = b'{"' + TAG.encode() + b'":'
_NAMES = {math.inf: "inf", -math.inf: "-inf"}
_dumps, _loads = orjson.dumps, orjson.loads
_VALUES = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def tagged(value: Any) -> Any:
    """``value`` with each non-finite float (in lists, tuples and dict values) as its tagged object."""
    t = type(value)
    if t is float:
        if value - value == 0.0:  # finite (inf - inf and nan - nan are nan)
            return value
        return {TAG: "nan" if value != value else _NAMES[value]}
    if t is list or t is tuple:
        return [tagged(v) for v in value]
    if t is dict:
        return {k: tagged(v) for k, v in value.items()}
    return value


def untagged(value: Any) -> Any:
    """The inverse of ``tagged`` on decoded JSON: each tagged object back to its float."""
    t = type(value)
    if t is list:
        return [untagged(v) for v in value]
    if t is dict:
        if len(value) == 1 and TAG in value:
            name = value[TAG]
            if name not in _VALUES:
                raise ValueError(f"state holds {{{TAG!r}: {name!r}}}, not inf, -inf or nan")
            return _VALUES[name]
        return {k: untagged(v) for k, v in value.items()}
    return value


def state_bytes(value: Any) -> bytes:
    """``json_bytes(value)``, non-finite floats tagged. orjson writes ``null`` for None and for a
    non-finite float only, so a value whose text has no ``null`` is written once, as it is."""
    out = b"%b" % _dumps(value)  # json_bytes, inlined: this runs once per entry a checkpoint writes
    if b"null" in out:
        return json_bytes(tagged(value))
    return out


def state_loads(data: bytes | bytearray | memoryview | str) -> Any:
    """``orjson.loads(data)`` with tagged non-finite floats read back as floats."""
    value = _loads(data)
    if type(data) is bytes:
        if _MARK not in data:
            return value
    elif _MARK not in (data.encode() if isinstance(data, str) else bytes(data)):
        return value
    return untagged(value)
