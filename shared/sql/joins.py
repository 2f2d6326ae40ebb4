"""Join variables: equi-joined columns as one variable, named by a member's column (fivm, reservoir
and triangles join by shared variable names)."""

from __future__ import annotations

from ivmstream.sql.analyze import Shape
from ivmstream.sql.errors import SqlError
from ivmstream.sql.expr import ColumnRef

# The model's types as the services declare them (numbers they compute in floats; dates as text).
SERVICE_TYPE = {"int": "int", "float": "float", "exact": "float", "bool": "int", "str": "str", "date": "str"}


def join_classes(shape: Shape) -> list[list[ColumnRef]]:
    """The equivalence classes of equi-joined columns, members in FROM order."""
    parent: dict[ColumnRef, ColumnRef] = {}

    def find(x: ColumnRef) -> ColumnRef:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, b in shape.equi:
        parent[find(a)] = find(b)
    classes: dict[ColumnRef, list[ColumnRef]] = {}
    for ref in list(parent):
        classes.setdefault(find(ref), []).append(ref)
    order = [o.alias for o in shape.occurrences]
    out = [sorted(m, key=lambda r: (order.index(r[0]), r[1])) for m in classes.values()]
    return sorted(out, key=lambda m: (order.index(m[0][0]), m[0][1]))


def variables(shape: Shape, extra: list[ColumnRef]) -> tuple[dict[ColumnRef, str], dict[str, str]]:
    """A variable per join class and per other column in ``extra``: (column -> variable, variable -> type)."""
    var_of: dict[ColumnRef, str] = {}
    types: dict[str, str] = {}

    def fresh(ref: ColumnRef) -> str:
        name = ref[1] if ref[1] not in types else f"{ref[0]}_{ref[1]}"
        while name in types:
            name += "_"
        return name

    for members in join_classes(shape):
        kinds = {SERVICE_TYPE[shape.column_type(m)] for m in members}
        if len(kinds) > 1:
            raise SqlError(
                f"type mismatch: the equi-joined columns {', '.join('.'.join(m) for m in members)} "
                "have types "
                f"{', '.join(sorted(kinds))}",
                shape.view.where,
            )
        name = fresh(members[0])
        types[name] = kinds.pop()
        for m in members:
            var_of[m] = name
    for ref in extra:
        if ref not in var_of:
            name = fresh(ref)
            types[name] = SERVICE_TYPE[shape.column_type(ref)]
            var_of[ref] = name
    return var_of, types
