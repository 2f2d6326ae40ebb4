from typing import Any

class SimpleGraph:
    tuples: int
    fwd: dict[Any, dict[Any, int]]
    def __init__(self, fwd: dict[Any, dict[Any, int]], bwd: dict[Any, dict[Any, int]]) -> None: ...
    def run(
        self,
        events: list[Any],
        start: int,
        changes: dict[tuple[Any, Any], int] | None,
        skip: int,
        stride: int,
        cheap_pair: int,
        /,
    ) -> tuple[int, int, int, int, int, int, int, int, Any, Any, int, int]: ...
    def has_edge(self, u: Any, v: Any, /) -> bool: ...
    def node_count(self) -> int: ...
