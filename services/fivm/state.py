"""The state layout: named maps of byte entries (docs/fivm/algorithm.md §4.1).

* one map per materialized view, named like the view (``V@X``, a relation's name, ``I@X:R``): entry
  key = the key tuple as JSON, value = the key's creation number (8 bytes, big-endian) followed by the
  ring's encoding of the payload;
* ``@base:R``: the support of relation R (kept when R has indicator projections, or in debug mode):
  entry key = the full tuple as JSON, value = its multiplicity (signed little-endian bytes);
* ``@meta``: ``config`` (the normalized configuration), ``phase`` (``loading`` or ``sealed``), ``seq``
  (each view's next creation number).

Map names never collide: relation names are identifiers, the other names contain ``@``. Indexes and
indicator counts are derived and rebuilt on restore.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

from ivmstream.sdk import json_bytes
from ivmstream.services.fivm import kernels
from ivmstream.services.fivm.rings.cofactor import CofactorRing, RowCofactor
from ivmstream.services.fivm.views import Key

META = "@meta"
SUPPORT_PREFIX = "@base:"
_SEQ = struct.Struct(">Q")


def support_map(relation: str) -> str:
    return SUPPORT_PREFIX + relation


def encode_key(key: Key) -> bytes:
    return json_bytes(key)


def encode_keys(keys: list[Key]) -> list[bytes]:
    """``encode_key`` of each key, without a call per key through ``json_bytes``."""
    dumps = orjson.dumps
    return [b"%b" % dumps(key) for key in keys]


def decode_key(data: bytes) -> Key:
    return tuple(orjson.loads(data))


def encode_view_value(seq: int, payload: bytes) -> bytes:
    return _SEQ.pack(seq) + payload


def encode_view_values(ring: Any, items: list[tuple[int, Any] | None]) -> list[bytes | None]:
    """``encode_view_value(seq, ring.encode(payload))`` of each (seq, payload), None for None: in one
    compiled pass for the float cofactor ring (a checkpoint encodes every key a batch added), else one
    at a time."""
    if isinstance(ring, CofactorRing) and not ring.exact:
        try:
            return kernels.view_values(items, RowCofactor)
        except (OverflowError, TypeError):  # a count past int64, or arrays of another kind: in Python
            pass
    return [None if sp is None else encode_view_value(sp[0], ring.encode(sp[1])) for sp in items]


def decode_view_value(data: bytes) -> tuple[int, bytes]:
    return _SEQ.unpack_from(data)[0], data[_SEQ.size :]


def encode_int(m: int) -> bytes:
    return m.to_bytes((m.bit_length() + 8) // 8, "little", signed=True)


def decode_int(data: bytes) -> int:
    return int.from_bytes(data, "little", signed=True)


def encode_json(value: Any) -> bytes:
    return json_bytes(value, option=orjson.OPT_SORT_KEYS)
