"""Types of the compiled change listing (shared/_backed_map.c)."""

from collections.abc import Callable
from typing import Any

def entry_changes(
    name: str, dirty: dict[bytes, Any], encode: Callable[[Any], bytes], /
) -> list[tuple[str, bytes, bytes | None]]: ...
