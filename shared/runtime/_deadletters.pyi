"""Types of the compiled dead-letter loop (shared/runtime/_deadletters.c)."""

from collections.abc import Callable
from typing import Any

def produce_refused(
    produce: Callable[..., Any],
    retry: Callable[..., Any],
    topic: str,
    callback: Callable[..., Any],
    service_header: tuple[str, Any],
    reasons: dict[str, Any],
    max_value: int,
    max_key: int,
    source_prefix: bytes,
    msgs: list[Any],
    decoded: list[Any],
    event_type: type,
    /,
) -> dict[str, int]: ...
