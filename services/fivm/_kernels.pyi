from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

_Ints = npt.NDArray[np.int64]
_Floats = npt.NDArray[np.float64]

def mul_rows_into(
    ac: _Ints, a_sums: _Floats, a_quad: _Floats, bc: _Ints, b_sums: _Floats, b_quad: _Floats,
    counts: _Ints, sums: _Floats, quad: _Floats, /,
) -> None: ...  # fmt: skip
def mul_chain_into(
    slots: Sequence[tuple[_Ints, _Floats, _Floats]], swaps: Sequence[bool], counts: _Ints, sums: _Floats,
    quad: _Floats, /,
) -> None: ...  # fmt: skip
def lift_into(x: _Floats, mults: _Ints, sums: _Floats, quad: _Floats, /) -> None: ...
def gather_into(
    payloads: Sequence[Any],
    lo: int,
    counts: _Ints,
    sums: _Floats,
    quad: _Floats,
    row_cls: type | None = ...,
    /,
) -> bool: ...
def payload_rows(
    cls: type, keys: list[Any], lo: int, counts: list[int], block: Any, /
) -> list[tuple[Any, Any]]: ...
def absorb_run(
    events: Sequence[Any],
    start: int,
    relation: str,
    columns: Sequence[str],
    batch: dict[tuple[Any, ...], int],
    /,
) -> int: ...
def columns_into(rows: Sequence[tuple[Any, ...]], positions: Sequence[int], out: _Floats, /) -> None: ...
def probe_get(
    data: dict[Any, Any], keys: list[Any], rows: list[Any], /
) -> tuple[list[Any], list[int] | None, list[Any]]: ...
def install_new(
    data: dict[Any, Any], seq: dict[Any, int], changed: dict[Any, None], delta: list[tuple[Any, Any]],
    next_seq: int, /,
) -> tuple[int, list[tuple[Any, Any]]]: ...  # fmt: skip
def probe_all(
    datas: list[dict[Any, Any]], keylists: list[list[Any]], rows: list[Any], /
) -> tuple[list[list[Any]], list[int] | None, list[Any]]: ...
def view_entries(
    name: str, keys: dict[Any, Any], data: dict[Any, Any], seq: dict[Any, int], row_cls: type | None,
    key_of: Callable[[Any], bytes], /,
) -> list[tuple[str, bytes, bytes | None]]: ...  # fmt: skip
def absorb_columns(
    columns: Sequence[Sequence[Any]], deltas: Sequence[Any], /
) -> dict[tuple[Any, ...], int] | None: ...
