"""Types of the compiled dead-letter loop (_deadletters.c)."""

from collections.abc import Callable, Sequence
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
    msgs: Sequence[Any],
    decoded: Sequence[Any],
    event_type: type,
    /,
) -> dict[str, int]:
    """Dead-letter every error in ``decoded``, in order; how many per reason code."""
