"""The msgspec path: a record decoded and type-checked by one msgspec decoder for the schema.

The middle of the codec's three tiers (``ivmstream.events.codec``): where the compiled decoder is not
built or is switched off, batches are decoded here, and whatever this path cannot accept is handed to
the reference decoder, which owns the error messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Union

import msgspec

from ivmstream.events.model import COLUMN_TYPES, EventError, Schema, UpdateEvent
from ivmstream.events.reasons import MAX_RECORD_BYTES


class _NeedsSlowPath(Exception):
    """The fast path cannot decide; the reference decoder will (and report why, if it rejects)."""


# What the msgspec path leaves to the reference decoder: its own refusals, type mismatches, text that
# is not UTF-8 (msgspec raises UnicodeDecodeError; for a str with a lone surrogate, UnicodeEncodeError)
# and nesting deeper than Python's recursion limit (RecursionError).
DECLINED = (msgspec.DecodeError, TypeError, UnicodeError, RecursionError, _NeedsSlowPath)

# orjson (the reference parser) reads integers outside [-2**63, 2**64 - 1] as floats, and msgspec reads
# any integer as an int: integers beyond int64 (the widest bounds msgspec checks) go to the reference.
_JSON_INT = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]

# Column types as msgspec decodes them. Only exact, strict types are decoded natively; decimal and
# number columns arrive as their JSON type and go through the same checker as the slow path. A float
# column takes integers as int64 and converts them, so that a longer literal is declined (the reference
# refuses it) rather than read as a float.
_FAST_TYPES: dict[str, Any] = {
    "int": _JSON_INT,
    "float": _JSON_INT | float,
    "number": _JSON_INT | float,
    "str": str,
    "bool": bool,
    "decimal": _JSON_INT | float | str,
    "exact": _JSON_INT | float | str,
}


class MsgspecDecoder:
    """One msgspec decoder for the schema: a tagged union of per-relation event structs.

    msgspec parses and type-checks in C, about half the cost of ``orjson.loads`` alone; whatever it
    cannot accept is handed to the pure-Python path, which owns the error messages.

    The per-record loops that turn decoded structs into ``UpdateEvent``s are generated for the schema
    (as ``dataclasses`` generates ``__init__``): each relation's row dict is one dict display over the
    struct's attributes, with no per-record lookups of field names, relations or checkers. Struct
    attributes are named ``c0, c1, ...`` (``k`` for the key field) and renamed to the column names, so
    any column name works; names reach the generated source only as ``str`` literals."""

    def __init__(self, schema: Schema, max_record_bytes: int = MAX_RECORD_BYTES) -> None:
        self.key_field = key_field = schema.key_field
        self.max_record_bytes = max_record_bytes
        structs = []
        self._relations: list[tuple[Any, str, tuple[tuple[str, Callable[[Any], Any] | None], ...]]] = []
        for i, (name, rel) in enumerate(schema.relations.items()):
            fields: list[tuple[str, Any]] = [
                (f"c{j}", _FAST_TYPES[typ]) for j, (_, typ) in enumerate(rel.columns)
            ]
            rename = {f"c{j}": col for j, (col, _) in enumerate(rel.columns)}
            if key_field is not None:
                fields.append(("k", str | _JSON_INT))
                rename["k"] = key_field
            row_t = msgspec.defstruct(f"Row{i}", fields, rename=rename, forbid_unknown_fields=True, gc=False)
            event_t = msgspec.defstruct(
                f"Event{i}",
                [("row", row_t), ("delta", _JSON_INT)],
                tag_field="relation",
                tag=name,
                forbid_unknown_fields=True,
                gc=False,  # a temporary holding scalars only
            )
            structs.append(event_t)
            # Decimal, exact and float columns arrive as their JSON type and go through the slow path's
            # checker.
            checks = tuple(
                (col, COLUMN_TYPES[typ] if typ in ("decimal", "exact", "float") else None)
                for col, typ in rel.columns
            )
            self._relations.append((event_t, name, checks))
        # msgspec does not insist on the tag of a lone tagged struct: a schema of one relation gets a
        # second member no record can decode into, so that the union makes "relation" required.
        unused = "\x00unused"
        while unused in schema.relations:
            unused += "\x00"
        fields_unused = [("row", Any, None), ("delta", Any, 0)]
        structs.append(msgspec.defstruct("Unused", fields_unused, tag_field="relation", tag=unused))
        union = Union[tuple(structs)]  # noqa: UP007 - runtime union
        self._decoder = msgspec.json.Decoder(union)
        self.decode_many = self._compile(grouped=False)
        self.decode_grouped = self._compile(grouped=True)

    def decode(self, value: bytes | str | None) -> UpdateEvent:
        if value is None:
            raise _NeedsSlowPath
        [item] = self.decode_many([value])
        if item.__class__ is not UpdateEvent:
            raise _NeedsSlowPath
        return item

    def _compile(self, grouped: bool) -> Callable[..., Any]:
        """Generate one tight loop over a batch of record values, with locals only.

        ``grouped=False``: ``decode_many(values)`` gives, per value, its UpdateEvent where the fast path
        decides and the value itself where it cannot.

        ``grouped=True``: ``decode_grouped(values, slow)`` decodes every value, calling ``slow`` (the
        reference decoder) where the fast path cannot decide, and returns ``(decoded, groups, errors)``:
        per value its UpdateEvent or EventError, the UpdateEvents per partition key (``""`` without a
        key field) in their order, and the number of EventErrors."""
        keyed = self.key_field is not None
        namespace: dict[str, Any] = {
            "UpdateEvent": UpdateEvent,
            "EventError": EventError,
            "_NeedsSlowPath": _NeedsSlowPath,
            "_DECLINE": DECLINED,
            "_decode": self._decoder.decode,
            "_limit": self.max_record_bytes,
        }
        src = ["def decode_grouped(values, slow):" if grouped else "def decode_many(values):"]
        src += ["    decode = _decode", "    limit = _limit", "    decoded = []"]
        if grouped:
            src += ["    errors = 0"]
            if keyed:
                src += ["    groups = {}"]
        src += [
            "    for v in values:",
            "        try:",
            "            if len(v) > limit:",  # None: a TypeError, declined like the oversized
            "                raise _NeedsSlowPath",
            "            ev = decode(v)",
            "            d = ev.delta",  # msgspec already refused bools and floats
            "            if not d:",
            "                raise _NeedsSlowPath",
        ]
        src += ["            cls = type(ev)"]
        for i, (event_t, name, checks) in enumerate(self._relations):
            indent = "                "
            namespace[f"Event{i}"] = event_t
            src += [f"            {'if' if i == 0 else 'elif'} cls is Event{i}:"]
            items = []
            for j, (col, check) in enumerate(checks):
                if check is None:
                    items.append(f"{_literal(col)}: r.c{j}")
                else:
                    namespace[f"check{i}_{j}"] = check
                    items.append(f"{_literal(col)}: check{i}_{j}(r.c{j})")  # TypeError: the slow path decides
            src += [f"{indent}r = ev.row"]
            if keyed:
                src += [f"{indent}k = r.k", f"{indent}if type(k) is not str:", f"{indent}    k = str(k)"]
            src += [
                f"{indent}e = UpdateEvent({_literal(name)}, {{{', '.join(items)}}}, d, "
                f"{'k' if keyed else 'None'})"
            ]
        if self._relations:
            src += ["            else:", "                raise _NeedsSlowPath  # the union's unused member"]
        else:
            src += ["            raise _NeedsSlowPath"]
        src += ["        except _DECLINE:"]
        if grouped:
            src += [
                "            try:",
                "                e = slow(v)",
                "            except EventError as err:",
                "                decoded.append(err)",
                "                errors += 1",
                "                continue",
            ]
            if keyed:
                src += ["            k = e.key"]
        else:
            src += ["            decoded.append(v)", "            continue"]
        src += ["        decoded.append(e)"]
        if grouped and keyed:
            src += [
                "        group = groups.get(k)",
                "        if group is None:",
                "            groups[k] = [e]",
                "        else:",
                "            group.append(e)",
                "    return decoded, groups, errors",
            ]
        elif grouped:  # one group, the valid events in order
            src += [
                "    events = decoded.copy() if not errors else [",
                "        e for e in decoded if e.__class__ is UpdateEvent",
                "    ]",
                "    return decoded, ({'': events} if events else {}), errors",
            ]
        else:
            src += ["    return decoded"]
        exec(
            compile(
                "\n".join(src) + "\n", f"<ivmstream fast decoder {'grouped' if grouped else 'many'}>", "exec"
            ),
            namespace,
        )
        return namespace["decode_grouped" if grouped else "decode_many"]


def _literal(name: Any) -> str:
    """The Python literal of a relation or column name, for generated source (the value, as a plain str)."""
    if not isinstance(name, str):
        raise TypeError(f"relation and column names must be strings, got {name!r}")
    return str.__repr__(name)
