"""A state store as a dict, for the tests of an engine's checkpoint entries: each checkpoint's puts and
deletes (``changed_entries()``) folded in as the store applies them."""

from __future__ import annotations

from collections.abc import Iterable


def fold_changes(
    store: dict[tuple[str, bytes], bytes], changes: Iterable[tuple[str, bytes, bytes | None]]
) -> None:
    """One checkpoint's changes applied to ``store``: a None value deletes the entry, any other puts it."""
    for name, key, value in changes:
        if value is None:
            store.pop((name, key), None)
        else:
            store[(name, key)] = value
