"""Encoded values that are kept: the one place orjson's buffer behaviour is guarded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson


def json_bytes(value: Any, default: Callable[[Any], Any] | None = None, option: int | None = None) -> bytes:
    """``orjson.dumps(value)`` in a bytes object of its own size: use it for every encoded value that is
    kept (keys of bags, indexes, logs and caches) or handed to a checkpoint in bulk.

    orjson builds each result in a buffer of at least 4 KiB and shrinks it in place when done; the tail
    freed is too small for the next result's buffer, so every result kept alive pins about 4 KiB of heap
    (8 KiB at 600 bytes of content). The copy is allocated at its content's size, and the buffer it was
    copied from is reused by the next call."""
    return b"%b" % orjson.dumps(value, default=default, option=option)
