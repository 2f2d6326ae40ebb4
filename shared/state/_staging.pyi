"""Types of the compiled staging pass (shared/state/_staging.c)."""

from collections.abc import Callable, Sequence
from typing import Any

def stage_entries(
    put: Callable[[bytes, bytes], Any],
    delete: Callable[[bytes], Any],
    prefix: bytes,
    changes: Sequence[tuple[str, bytes, bytes | None]],
) -> int: ...
