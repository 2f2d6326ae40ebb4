from collections.abc import Sequence
from typing import Any

def member_hashes(keys: Sequence[bytes], /) -> list[int]: ...
def member_keys(relation: str, columns: list[list[Any]], /) -> list[bytes] | None: ...
def bag_rows(
    relation: str,
    columns: list[list[Any]],
    decimal_columns: bytes,
    deltas: list[int],
    dirty: dict[bytes, int | None],
    clean: dict[bytes, int | None],
    allow_negative: bool,
    sum_columns: list[int],
    sums: list[Any],
    prec: int,
    decimal_type: type,
    /,
) -> tuple[list[tuple[int, int]], int, int, int, int, list[Any]] | None: ...
