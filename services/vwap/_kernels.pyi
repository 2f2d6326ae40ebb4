from collections.abc import Callable, Mapping, Sequence
from typing import Any

def ledger_pass(
    events: Sequence[Any],
    bag: dict[str, dict[tuple[Any, ...], int]],
    columns: Mapping[str, Sequence[str]],
    reads: frozenset[str],
    netted: dict[str, dict[Any, list[Any]]] | None,
    update: Callable[[str, Any, int], None] | None,
    changed: set[tuple[str, tuple[Any, ...]]] | None,
    book: bool,
    brokers: int | None,
    reject: Callable[[int, Any, Any], None],
    /,
) -> int: ...
