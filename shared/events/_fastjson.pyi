"""Types of the compiled update-event decoder (_fastjson.c)."""

from collections.abc import Callable, Iterable, Sequence
from typing import Any, final

T_INT: int
T_FLOAT: int
T_NUMBER: int
T_STR: int
T_BOOL: int
T_EXACT: int
T_DECLINE: int
T_DECIMAL: int
T_CONNECT_DECIMAL: int

@final
class Decoder:
    def __init__(
        self,
        relations: Sequence[tuple[str, tuple[tuple[Any, ...], ...]]],  # (column, type[, scale])
        key_field: str | None,
        event_type: Callable[..., Any],
        error_type: type,
        fallback: Callable[[Any], Any],
        max_size: int = ...,
        refuse: Callable[[Any], Any] | None = ...,
        max_depth: int = ...,
        decimal_type: Callable[[str], Any] | None = ...,
        invalid_utf8_detail: str | None = ...,
        json_loads: Callable[[bytes], Any] | None = ...,
        json_messages: tuple[str, ...] | None = ...,  # four messages
    ) -> None: ...
    def decode_grouped(self, values: Sequence[bytes | None]) -> tuple[list[Any], dict[Any, list[Any]], int]:
        """Every value decoded (declined ones by the fallback), the events grouped by partition key in
        input order, and the number of errors."""
    def decode_columns(
        self, values: Iterable[bytes | None], decimal_text: bool = False, /
    ) -> tuple[list[tuple[int, Any]], dict[Any, dict[str, list[list[Any]]]]]:
        """The refused values' (index, error), and every decoded row as columns per key and relation:
        ``[indexes, deltas, column 0, ...]``, without an event per row; ``decimal_text``: a decimal
        written as a plain decimal string stays that string."""
    def decode_many(self, values: Sequence[bytes | None]) -> list[Any]:
        """Every value decoded (declined ones by the fallback), not grouped."""
    def decode_debezium(self, value: bytes, start: int, stop: int, relation: str | None) -> list[Any] | None:
        """The common Debezium envelope in value[start:stop] as its events; None declines."""
