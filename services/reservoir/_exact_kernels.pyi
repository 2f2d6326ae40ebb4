"""Types of the compiled step of the exact join index (``_exact_kernels.c``)."""

from typing import Any

def reweigh(index: Any, e: int, item: tuple[Any, ...], old_f: int, f: int, /) -> None: ...
