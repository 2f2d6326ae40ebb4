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
from ivmstream.services.fivm.views import Key, View

META = "@meta"
SUPPORT_PREFIX = "@base:"
_SEQ = struct.Struct(">Q")


def support_map(relation: str) -> str:
    return SUPPORT_PREFIX + relation


def encode_key(key: Key) -> bytes:
    return json_bytes(key)


def decode_key(data: bytes) -> Key:
    return tuple(orjson.loads(data))


def encode_view_value(seq: int, payload: bytes) -> bytes:
    return _SEQ.pack(seq) + payload


def view_entries(
    ring: Any, name: str, keys: dict[Key, Any], view: View
) -> list[tuple[str, bytes, bytes | None]]:
    """The entry ``(name, encode_key(key), value)`` of each of ``keys`` (a view's change log, or its data
    for all entries), None for a key the view no longer holds: in one compiled pass for the float cofactor
    ring (``kernels.view_entries``), else one at a time."""
    if isinstance(ring, CofactorRing) and not ring.exact:
        try:
            return kernels.view_entries(name, keys, view.data, view.seq, RowCofactor, encode_key)
        except (OverflowError, TypeError):  # a count past int64, or arrays of another kind: in Python
            pass
    data, seq = view.data, view.seq
    return [
        (
            name,
            encode_key(key),
            None if (p := data.get(key)) is None else encode_view_value(seq[key], ring.encode(p)),
        )
        for key in list(keys)
    ]


def decode_view_value(data: bytes) -> tuple[int, bytes]:
    return _SEQ.unpack_from(data)[0], data[_SEQ.size :]


def encode_int(m: int) -> bytes:
    return m.to_bytes((m.bit_length() + 8) // 8, "little", signed=True)


def decode_int(data: bytes) -> int:
    return int.from_bytes(data, "little", signed=True)


def encode_json(value: Any) -> bytes:
    return json_bytes(value, option=orjson.OPT_SORT_KEYS)
