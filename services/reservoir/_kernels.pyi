"""Types of the compiled weight updates of the rounded join index (``_kernels.c``)."""

from typing import Any

def reweigh(index: Any, e: int, item: tuple[Any, ...], old_f: int, f: int, /) -> None: ...
