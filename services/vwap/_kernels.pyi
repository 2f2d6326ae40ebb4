from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

def ledger_pass(
    events: Sequence[Any],
    bag: dict[str, dict[tuple[Any, ...], int]],
    columns: Mapping[str, Sequence[str]],
    reads: frozenset[str],
    netted: dict[str, dict[Any, list[Any]]] | None,
    update: Callable[[str, Any, int], None] | None,
    changed: dict[str, dict[tuple[Any, ...], bool]] | None,
    book: bool,
    brokers: int | None,
    reject: Callable[[int, Any, Any], None],
    /,
) -> int: ...
def ledger_columns(
    rel: str,
    deltas: list[Any],
    lists: list[list[Any]],
    bag: dict[str, dict[tuple[Any, ...], int]],
    columns: Mapping[str, Sequence[str]],
    reads: frozenset[str],
    netted: dict[str, dict[Any, list[Any]]] | None,
    changed: dict[str, dict[tuple[Any, ...], bool]] | None,
    book: bool,
    brokers: int | None,
    reject: Callable[[int, Any, Any], None],
    /,
) -> int: ...
def bag_entries(
    ledger: dict[tuple[Any, ...], int],
    touched: Mapping[tuple[Any, ...], bool] | None,
    tag: str,
    prefix: bytes,
    key_of: Callable[[tuple[Any, ...]], bytes],
    value_of: Callable[[Any], bytes],
    /,
) -> list[tuple[str, bytes, bytes | None]]: ...

@final
class LevelTree:
    def __len__(self) -> int: ...
    def add(self, price: int, dw: int, dpv: int, /) -> None: ...
    def delete(self, price: int, /) -> None: ...
    def min_key_prefix_gt(self, x: int, /) -> int | None: ...
    def suffix_ge(self, price: int, /) -> int: ...
    def items(self) -> list[tuple[int, int, int]]: ...
    def depth(self) -> int: ...
    def apply_netted(
        self, cnt: dict[Any, Any], changes: dict[Any, list[Any]], total: Any, /
    ) -> tuple[int, Any]: ...
    def load_netted(self, changes: Mapping[Any, list[Any]], /) -> tuple[dict[int, int], int]: ...
