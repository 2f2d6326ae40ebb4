"""Structural matching of a query against a pattern query, up to renaming and reordering.

Both are brought to a canonical tree (parentheses dropped, ``a > b`` as ``b < a``, ``a >= b`` as
``b <= a``) and unified: pattern aliases bind query aliases one to one, pattern tables bind query
tables, FROM lists and WHERE conjuncts match in any order, ``=``, ``+``, ``*`` and ``AND`` in either
operand order. A pattern column without a table named ``k_<x>`` matches any number (bound as
``x``), ``s_<x>`` any string. Matching is by structure, never by the query's text.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp

from ivmstream.sql.expr import _date_text, number_literal

Node = tuple[Any, ...]
COMMUTATIVE = frozenset({"eq", "add", "mul", "and", "neq"})
_OPS: dict[type, str] = {
    exp.EQ: "eq",
    exp.NEQ: "neq",
    exp.LT: "lt",
    exp.LTE: "lte",
    exp.Add: "add",
    exp.Sub: "sub",
    exp.Mul: "mul",
    exp.Div: "div",
    exp.And: "and",
    exp.Or: "or",
}
_FLIP: dict[type, str] = {exp.GT: "lt", exp.GTE: "lte"}


def canon(node: exp.Expression | None) -> Node:
    """The canonical tree of an expression or SELECT."""
    if node is None:
        return ("none",)
    if isinstance(node, exp.Paren | exp.Where):
        return canon(node.this)
    if isinstance(node, exp.Subquery):
        return canon(node.this)
    if isinstance(node, exp.Alias):
        return canon(node.this)
    date = _date_text(node)
    if date is not None:
        return ("str", date)
    if isinstance(node, exp.Select):
        froms: list[tuple[str, str, Node | None]] = []
        from_ = node.args.get("from_") or node.args.get("from")
        sources = [from_.this] if from_ is not None else []
        sources += [j.this for j in node.args.get("joins") or []]
        for src in sources:
            if isinstance(src, exp.Subquery):
                froms.append(("", src.alias.lower(), canon(src.this)))
            else:
                froms.append((src.name.lower(), (src.alias or src.name).lower(), None))
        group = node.args.get("group")
        return (
            "select",
            tuple(canon(e) for e in node.expressions),
            tuple(froms),
            tuple(_conjuncts(node.args.get("where"))),
            tuple(canon(g) for g in group.expressions) if group is not None else (),
        )
    if isinstance(node, exp.Column):
        name = node.name.lower()
        if not node.table and name.startswith(("k_", "s_")):
            return ("hole", name)
        return ("col", node.table.lower() if node.table else None, name)
    if isinstance(node, exp.Literal):
        return ("str", str(node.this)) if node.is_string else ("num", number_literal(str(node.this)))
    if isinstance(node, exp.Neg):
        inner = canon(node.this)
        return ("num", -inner[1]) if inner[0] == "num" else ("neg", inner)
    if isinstance(node, exp.Sum | exp.Avg | exp.Count | exp.Max | exp.Min):
        arg = node.this
        return (node.key, "*" if isinstance(arg, exp.Star) or arg is None else canon(arg))
    if isinstance(node, exp.In):
        query = node.args.get("query")
        if query is not None:
            return ("in", canon(node.this), canon(query))
        return ("inlist", canon(node.this), tuple(canon(e) for e in node.expressions))
    if type(node) in _FLIP:
        return (_FLIP[type(node)], canon(node.expression), canon(node.this))
    op = _OPS.get(type(node))
    if op is not None:
        return (op, canon(node.this), canon(node.expression))
    return ("other", node.sql())


def _conjuncts(node: exp.Expression | None) -> list[Node]:
    if node is None:
        return []
    c = canon(node)
    out: list[Node] = []

    def walk(n: Node) -> None:
        if n[0] == "and":
            walk(n[1])
            walk(n[2])
        else:
            out.append(n)

    walk(c)
    return out


@dataclass
class Binding:
    aliases: dict[str, str] = field(default_factory=dict)  # pattern alias -> query alias
    tables: dict[str, str] = field(default_factory=dict)  # pattern table -> query table
    holes: dict[str, Any] = field(default_factory=dict)  # hole name (no prefix) -> value

    def copy(self) -> Binding:
        return Binding(dict(self.aliases), dict(self.tables), dict(self.holes))


def _bind(d: dict[str, str], key: str, value: str) -> bool:
    if key in d:
        return d[key] == value
    if value in d.values():
        return False
    d[key] = value
    return True


def unify(p: Any, q: Any, b: Binding) -> Iterator[Binding]:
    """Every binding extending ``b`` under which pattern ``p`` matches query ``q``."""
    if isinstance(p, tuple) and p and p[0] == "hole":
        kind, name = p[1][:2], p[1][2:]
        if (kind == "k_" and q[0] == "num") or (kind == "s_" and q[0] == "str"):
            if name in b.holes and b.holes[name] != q[1]:
                return
            nb = b.copy()
            nb.holes[name] = q[1]
            yield nb
        return
    if not isinstance(p, tuple) or not isinstance(q, tuple):
        if p == q:
            yield b
        return
    if not p or not q or p[0] != q[0]:
        return
    head = p[0]
    if head == "col":
        if p[2] != q[2] or (p[1] is None) != (q[1] is None):
            return
        nb = b.copy()
        if p[1] is None or _bind(nb.aliases, p[1], q[1]):
            yield nb
        return
    if head == "num":
        if Decimal(p[1]) == Decimal(q[1]):
            yield b
        return
    if head == "select":
        yield from _unify_select(p, q, b)
        return
    if len(p) != len(q):
        return
    yield from _unify_seq(p[1:], q[1:], b)
    if head in COMMUTATIVE:
        yield from _unify_seq((p[2], p[1]), q[1:], b)


def _unify_seq(ps: tuple[Any, ...], qs: tuple[Any, ...], b: Binding) -> Iterator[Binding]:
    if len(ps) != len(qs):
        return
    if not ps:
        yield b
        return
    for nb in unify(ps[0], qs[0], b):
        yield from _unify_seq(ps[1:], qs[1:], nb)


def _unify_set(ps: list[Any], qs: list[Any], b: Binding) -> Iterator[Binding]:
    """Match every pattern item with a distinct query item (same counts)."""
    if len(ps) != len(qs):
        return
    if not ps:
        yield b
        return
    for i, q in enumerate(qs):
        for nb in unify(ps[0], q, b):
            yield from _unify_set(ps[1:], qs[:i] + qs[i + 1 :], nb)


def _unify_from(ps: tuple[Any, ...], qs: tuple[Any, ...], b: Binding) -> Iterator[Binding]:
    if len(ps) != len(qs):
        return
    for perm in itertools.permutations(qs):
        nb: Binding | None = b.copy()
        subs: list[tuple[Node, Node]] = []
        for (pt, pa, psub), (qt, qa, qsub) in zip(ps, perm, strict=True):
            assert nb is not None
            if (psub is None) != (qsub is None) or not _bind(nb.aliases, pa, qa):
                nb = None
                break
            if psub is None and not _bind(nb.tables, pt, qt):
                nb = None
                break
            if psub is not None:
                subs.append((psub, qsub))
        if nb is None:
            continue
        yield from _unify_seq(tuple(s[0] for s in subs), tuple(s[1] for s in subs), nb)


def _unify_select(p: Node, q: Node, b: Binding) -> Iterator[Binding]:
    for b1 in _unify_from(p[2], q[2], b):
        for b2 in _unify_set(list(p[1]), list(q[1]), b1):
            for b3 in _unify_set(list(p[3]), list(q[3]), b2):
                yield from _unify_set(list(p[4]), list(q[4]), b3)


def pattern(sql: str) -> Node:
    """A pattern's canonical tree (written in the dialect the queries are written in)."""
    tree: exp.Expression = sqlglot.parse_one(sql)  # type: ignore[assignment]
    return canon(tree)


def match(p: Node, q: Node) -> Binding | None:
    """The first binding under which the pattern matches, or None."""
    return next(unify(p, q, Binding()), None)
