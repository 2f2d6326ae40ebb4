"""One key's checkpoint entries staged into a write batch: each run of one map's puts in stored-key order.

A run is a map's consecutive puts up to another map's change or a delete. Its entries are put in
stored-key order (stable, so an entry put twice keeps its last value): RocksDB's memtable then inserts
each next to the previous one, about a third of the CPU random order costs. A delete is issued where
it stands, so what the batch stores equals the changes applied in order.

``stage_entries`` is the compiled pass (``ivmstream.state._staging``, shared/state/_staging.c: the
stored keys built and sorted in C and handed to ``put`` one at a time, no list of keys, values or
order made); ``py_stage_entries`` is its Python form, used where the extension is not built or under
``IVMSTREAM_PURE_PYTHON=1``. Both make the same calls in the same order.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

from ivmstream.engine import EntryChange

Put = Callable[[bytes, bytes], Any]
Delete = Callable[[bytes], Any]

_MAP, _ENTRY, _VALUE = itemgetter(0), itemgetter(1), itemgetter(2)


def _put_in_order(put: Put, map_prefix: bytes, run: Sequence[EntryChange]) -> int:
    """Put one run's entries in stored-key order; the bytes put."""
    keys = list(map(map_prefix.__add__, map(_ENTRY, run)))
    values = list(map(_VALUE, run))
    order = sorted(range(len(keys)), key=keys.__getitem__)  # stable
    deque(map(put, map(keys.__getitem__, order), map(values.__getitem__, order)), maxlen=0)
    return sum(map(len, keys)) + sum(map(len, values))


def py_stage_entries(put: Put, delete: Delete, prefix: bytes, changes: Sequence[EntryChange]) -> int:
    """Stage one key's entry changes (``prefix``: the key's ``entry_prefix``); the bytes of keys and
    values put. A map's changes are grouped in C (``groupby``), and a group without deletes is one run."""
    size = 0
    for map_name, group in groupby(changes, _MAP):
        run = list(group)
        map_prefix = prefix + map_name.encode() + b"\x00"
        values = list(map(_VALUE, run))
        if None not in values:
            size += _put_in_order(put, map_prefix, run)
            continue
        start = 0
        for i, value in enumerate(values):
            if value is None:
                if i > start:
                    size += _put_in_order(put, map_prefix, run[start:i])
                delete(map_prefix + run[i][1])
                start = i + 1
        if start < len(run):
            size += _put_in_order(put, map_prefix, run[start:])
    return size


try:
    from ivmstream.state._staging import stage_entries as compiled_stage_entries
except ImportError:  # no C compiler where it was installed: the Python form
    compiled_stage_entries = None  # type: ignore[assignment]

# Set IVMSTREAM_PURE_PYTHON=1 to stage entries in Python even where the extension is built.
stage_entries: Callable[[Put, Delete, bytes, Sequence[EntryChange]], int] = (
    compiled_stage_entries
    if compiled_stage_entries is not None and os.environ.get("IVMSTREAM_PURE_PYTHON", "") != "1"
    else py_stage_entries
)
