"""The change from one result to the next as a JSON Patch (RFC 6902), for ``emit: every-event``.

A worker that publishes a key's result after every event sends only what changed: ``add``, ``replace``
and ``remove`` operations on JSON Pointer paths (RFC 6901). Objects are compared member by member,
recursively; a list that changed is replaced whole (results hold short lists, sorted, whose
element-wise diff would rarely be smaller). JSON Patch, unlike a merge patch, can set a member to
``null``, which results use ("join_size": null). Any JSON Patch library applies these records;
``apply`` here is the small one the tests use.
"""

from __future__ import annotations

import copy
from typing import Any

Patch = list[dict[str, Any]]


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def diff(before: Any, after: Any, path: str = "") -> Patch:
    """The operations that turn ``before`` into ``after`` (an empty list when they are equal)."""
    if isinstance(before, dict) and isinstance(after, dict):
        ops: Patch = []
        for name, value in after.items():
            here = f"{path}/{_escape(name)}"
            if name not in before:
                ops.append({"op": "add", "path": here, "value": value})
            elif before[name] != value or type(before[name]) is not type(value):
                ops.extend(diff(before[name], value, here))
        gone = [name for name in before if name not in after]
        ops.extend({"op": "remove", "path": f"{path}/{_escape(name)}"} for name in gone)
        return ops
    if before == after and type(before) is type(after):
        return []
    return [{"op": "replace", "path": path, "value": after}]


def apply(doc: Any, patch: Patch) -> Any:
    """``doc`` with ``patch`` applied (``doc`` itself is not changed); objects and whole values only."""
    out = copy.deepcopy(doc)
    for op in patch:
        path = op["path"]
        if path == "":
            if op["op"] == "remove":
                raise ValueError("cannot remove the whole document")
            out = copy.deepcopy(op["value"])
            continue
        *parents, last = [_unescape(t) for t in path[1:].split("/")]
        target = out
        for token in parents:
            target = target[token]
        if op["op"] == "remove":
            del target[last]
        elif op["op"] in ("add", "replace"):
            target[last] = copy.deepcopy(op["value"])
        else:
            raise ValueError(f"unsupported operation {op['op']!r}")
    return out
