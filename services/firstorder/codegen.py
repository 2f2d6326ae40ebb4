"""Delta plans generated as Python source (docs/firstorder/algorithm.md §3), one function per relation.

The expression closures (``expressions.py``) stay the language's reference: they validate a config and
define what every expression means. Per update, though, a tree of closures costs a call per node and a
plan walked by ``FirstOrderEngine._probe`` a call per probed tuple. Here each relation's delta plan, its
checks and its aggregate arguments become the statements of one function, compiled once with
``compile()``: the join's variables are local variables, each probe a ``for`` loop over an index
bucket, each expression straight-line code over temporaries with the closures' NULL rules spelled out
(the same operators applied to the same operands in the same order, so the same values, the same
float roundings and the same exceptions). When the group-by variables are all bound by the updated
tuple, the group's count and sums are local accumulators written to the delta once.

The source is built from the parsed expressions only (names become ``v<position>``, constants their
``repr`` or a bound name), so a config still cannot run code. A plan whose source Python refuses (an
expression nested past the compiler's limits) keeps the interpreted path.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from .expressions import ExpressionError, parse
from .expressions import _compile as _closure
from .plan import DeltaPlan, Query

# (updated tuple, its delta, the delta's groups out) -> tuples visited
DeltaFunction = Callable[[tuple[Any, ...], int, dict[tuple[Any, ...], list[Any]]], int]

_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_LISTED = (int, float, str, type(None))
_BUILTINS = {"len": len, "TypeError": TypeError}  # all the generated code reads besides its constants


class _Source:
    """Statements being written, their temporaries and the constants they name."""

    def __init__(self, position: Mapping[str, int]) -> None:
        self.position = position
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {"_min": min, "_max": max}
        self._count = 0

    def temp(self) -> str:
        self._count += 1
        return f"_t{self._count}"

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def unless_null(self, depth: int, nulls: list[str], on_null: str) -> int:
        """``if <a null operand>: on_null`` then ``else:`` when an operand can be null; the depth the
        non-null code goes at."""
        if not nulls:
            return depth
        self.line(depth, f"if {' or '.join(nulls)}:")
        self.line(depth + 1, on_null)
        self.line(depth, "else:")
        return depth + 1

    def constant(self, value: Any) -> str:
        name = f"_k{len(self.constants)}"
        self.constants[name] = value
        return name

    def literal(self, value: Any) -> str:
        if type(value) in (int, str, bool, type(None)) or (type(value) is float and math.isfinite(value)):
            text = repr(value)
            return f"({text})" if text.startswith("-") else text
        return self.constant(value)

    def _fold(self, node: ast.AST) -> tuple[str, bool] | None:
        """A subexpression over constants alone, valued once by the closures (their value is what the
        statements would compute on every row); None when valuing it raises (left to the rows)."""
        try:
            value = _closure(node, {})[0](())
        except Exception:  # the same failure then happens per row, as in the closures
            return None
        return self.literal(value), value is None

    # --- expressions: statements at ``depth`` leaving the value in the returned atom ---------------

    def expr(self, node: ast.AST, depth: int) -> tuple[str, bool]:
        """(atom holding the value, whether it may be None), mirroring ``expressions._compile``."""
        if isinstance(node, ast.Constant) and node.value is None:
            return "None", True
        if isinstance(node, ast.Constant) and type(node.value) in (int, float, str):
            return self.literal(node.value), False
        if not any(isinstance(n, ast.Name) and n.id in self.position for n in ast.walk(node)):
            folded = self._fold(node)
            if folded is not None:
                return folded
        if isinstance(node, ast.Name) and node.id in self.position:
            return f"v{self.position[node.id]}", True
        if isinstance(node, ast.BoolOp):
            return self._bool(node, depth), True
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner, nullable = self.expr(node.operand, depth)
            out = self.temp()
            if nullable:
                self.line(depth, f"{out} = None if {inner} is None else not {inner}")
            else:
                self.line(depth, f"{out} = not {inner}")
            return out, True
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner, nullable = self.expr(node.operand, depth)
            sign = "-1" if isinstance(node.op, ast.USub) else "1"
            out = self.temp()
            if nullable:
                self.line(depth, f"{out} = None if {inner} is None else {sign} * {inner}")
            else:
                self.line(depth, f"{out} = {sign} * {inner}")
            return out, nullable
        if isinstance(node, ast.BinOp) and (type(node.op) in _ARITH or isinstance(node.op, ast.Div)):
            return self._binary(node, depth)
        if isinstance(node, ast.Compare):
            return self._compare(node, depth), True
        if isinstance(node, ast.IfExp):
            test, _ = self.expr(node.test, depth)
            out = self.temp()
            self.line(depth, f"if {test}:")
            yes, n1 = self.expr(node.body, depth + 1)
            self.line(depth + 1, f"{out} = {yes}")
            self.line(depth, "else:")
            no, n2 = self.expr(node.orelse, depth + 1)
            self.line(depth + 1, f"{out} = {no}")
            return out, n1 or n2
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("min", "max")
            and node.args
            and not node.keywords
        ):
            args = [self.expr(a, depth) for a in node.args]
            pick = f"_{node.func.id}"
            out = self.temp()
            if any(n for _a, n in args):
                values = self.temp()
                self.line(depth, f"{values} = []")
                for atom, nullable in args:
                    if nullable:
                        self.line(depth, f"if {atom} is not None:")
                        self.line(depth + 1, f"{values}.append({atom})")
                    else:
                        self.line(depth, f"{values}.append({atom})")
                self.line(depth, f"{out} = {pick}({values}) if {values} else None")
                return out, True
            self.line(depth, f"{out} = {pick}([{', '.join(a for a, _n in args)}])")
            return out, False
        raise ExpressionError(f"{ast.unparse(node)!r} is outside the language")  # validated before

    def _binary(self, node: ast.BinOp, depth: int) -> tuple[str, bool]:
        (a, n1), (b, n2) = self.expr(node.left, depth), self.expr(node.right, depth)
        div = isinstance(node.op, ast.Div)
        value = f"(None if {b} == 0 else {a} / {b})" if div else f"{a} {_ARITH[type(node.op)]} {b}"
        out = self.temp()
        nulls = [f"{x} is None" for x, n in ((a, n1), (b, n2)) if n]
        if nulls:
            self.line(depth, f"{out} = None if {' or '.join(nulls)} else {value}")
        else:
            self.line(depth, f"{out} = {value}")
        return out, n1 or n2 or div

    def _bool(self, node: ast.BoolOp, depth: int) -> str:
        """SQL's AND (OR): false (true) at the first false (true) operand, the rest not evaluated; else
        unknown if an operand is, else true (false)."""
        conjunction = isinstance(node.op, ast.And)
        decided, settled = ("False", "not ") if conjunction else ("True", "")
        out, unknown = self.temp(), self.temp()
        self.line(depth, f"{out} = None")  # None: undecided so far
        self.line(depth, f"{unknown} = False")
        for i, part in enumerate(node.values):
            inner = depth
            if i:
                self.line(depth, f"if {out} is None:")
                inner = depth + 1
            atom, nullable = self.expr(part, inner)
            if nullable:
                self.line(inner, f"if {atom} is None:")
                self.line(inner + 1, f"{unknown} = True")
            self.line(inner, f"{'elif' if nullable else 'if'} {settled}{atom}:")
            self.line(inner + 1, f"{out} = {decided}")
        undecided = "True" if conjunction else "False"
        self.line(depth, f"if {out} is None:")
        self.line(depth + 1, f"{out} = None if {unknown} else {undecided}")
        return out

    def _compare(self, node: ast.Compare, depth: int) -> str:
        left, left_nullable = self.expr(node.left, depth)
        out = self.temp()
        if any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            listed = node.comparators[0]
            if (
                len(node.ops) != 1
                or not isinstance(listed, ast.Tuple | ast.List)
                or not all(isinstance(e, ast.Constant) and type(e.value) in _LISTED for e in listed.elts)
            ):
                raise ExpressionError(f"{ast.unparse(node)!r}: 'in' takes one tuple of constants, unchained")
            values = frozenset(e.value for e in listed.elts if isinstance(e, ast.Constant))
            negated = isinstance(node.ops[0], ast.NotIn)
            absent = "None" if None in values else repr(negated)
            if left_nullable:
                self.line(depth, f"if {left} is None:")
                self.line(depth + 1, f"{out} = None")
            self.line(depth, f"{'elif' if left_nullable else 'if'} {left} in {self.constant(values)}:")
            self.line(depth + 1, f"{out} = {not negated!r}")
            self.line(depth, "else:")
            self.line(depth + 1, f"{out} = {absent}")
            return out
        if len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            right, right_nullable = self.expr(node.comparators[0], depth)
            nulls = [f"{x} is None" for x, n in ((left, left_nullable), (right, right_nullable)) if n]
            test = self.unless_null(depth, nulls, f"{out} = None")
            self.line(test, "try:")
            self.line(test + 1, f"{out} = True if {left} {_COMPARE[type(node.ops[0])]} {right} else False")
            self.line(test, "except TypeError:")
            self.line(test + 1, f"{out} = None")
            return out
        unknown = self.temp()
        self.line(depth, f"{out} = True")  # False at the first false link
        self.line(depth, f"{unknown} = False")
        a, a_nullable = left, left_nullable
        for i, (op, operand) in enumerate(zip(node.ops, node.comparators, strict=True)):
            if type(op) not in _COMPARE:
                raise ExpressionError(f"{ast.unparse(node)!r}: {type(op).__name__} is outside the language")
            inner = depth
            if i:
                self.line(depth, f"if {out}:")
                inner = depth + 1
            b, b_nullable = self.expr(operand, inner)
            nulls = [f"{x} is None" for x, n in ((a, a_nullable), (b, b_nullable)) if n]
            test = self.unless_null(inner, nulls, f"{unknown} = True")
            self.line(test, "try:")
            self.line(test + 1, f"if not ({a} {_COMPARE[type(op)]} {b}):")
            self.line(test + 2, f"{out} = False")
            self.line(test, "except TypeError:")  # a text against a number: unknown
            self.line(test + 1, f"{unknown} = True")
            a, a_nullable = b, b_nullable
        self.line(depth, f"if {out} and {unknown}:")
        self.line(depth + 1, f"{out} = None")
        return out


def _accumulate(src: _Source, query: Query, depth: int, mult: str, hoisted: bool) -> None:
    """One joined row of multiplicity ``mult`` into its group's count and sums, as ``_emit`` adds it."""
    if hoisted:
        src.line(depth, "hit = True")
        src.line(depth, f"c0 += {mult}")
        target = [f"c{i}" for i in range(1 + len(query.aggregates))]
    else:
        key = "".join(f"v{p}, " for p in query.free_env)
        src.line(depth, f"key = ({key})")
        src.line(depth, "acc = out.get(key)")
        src.line(depth, "if acc is None:")
        src.line(depth + 1, f"acc = out[key] = [0] * {1 + len(query.aggregates)}")
        src.line(depth, f"acc[0] += {mult}")
        target = [f"acc[{i}]" for i in range(1 + len(query.aggregates))]
    for i, agg in enumerate(query.aggregates, 1):
        atom, nullable = src.expr(parse(agg.text), depth)
        if nullable:
            src.line(depth, f"if {atom} is not None:")
            src.line(depth + 1, f"{target[i]} += {mult} * {atom}")
        else:
            src.line(depth, f"{target[i]} += {mult} * {atom}")


def _checks(src: _Source, plan_checks: tuple[Any, ...], depth: int, skip: str) -> None:
    for check in plan_checks:
        atom, _ = src.expr(parse(check.text), depth)
        src.line(depth, f"if not {atom}:")
        src.line(depth + 1, skip)


def plan_source(query: Query, plan: DeltaPlan) -> tuple[str, dict[str, Any], list[tuple[str, Any]]]:
    """The factory's source for ``plan``, its constants, and the stores it reads (name, what)."""
    src = _Source(query.position)
    stores: list[tuple[str, Any]] = []
    bound = {pos for _col, pos in plan.bind}
    hoisted = set(query.free_env) <= bound
    body = 2
    names = ", ".join(f"v{pos}" for _col, pos in plan.bind)
    src.line(body, f"{names}, = tup")
    src.line(body, "visited = 0")
    _checks(src, plan.checks, body, "return 0")
    if hoisted:
        src.line(body, "hit = False")
        for i in range(1 + len(query.aggregates)):
            src.line(body, f"c{i} = 0")
    depth, mult = body, "delta"
    for d, probe in enumerate(plan.probes, 1):
        store = f"_s{d}"
        stores.append((store, (probe.relation, probe.key) if probe.key else probe.relation))
        if probe.key:
            key = "".join(f"v{p}, " for p in probe.key_env)
            src.line(depth, f"b{d} = {store}.get(({key}))")
            src.line(depth, f"if b{d}:")
            depth += 1
        else:
            src.line(depth, f"b{d} = {store}")
        src.line(depth, f"visited += len(b{d})")
        src.line(depth, f"for t{d}, m{d} in b{d}.items():")
        depth += 1
        width = len(query.relations[probe.relation])
        slots = ["_"] * width
        for col, pos in probe.bind:
            slots[col] = f"v{pos}"
        src.line(depth, f"{', '.join(slots)}, = t{d}")
        _checks(src, probe.checks, depth, "continue")
        src.line(depth, f"m{d} = {mult} * m{d}")
        mult = f"m{d}"
    _accumulate(src, query, depth, mult, hoisted)
    if hoisted:
        key = "".join(f"v{p}, " for p in query.free_env)
        accs = ", ".join(f"c{i}" for i in range(1 + len(query.aggregates)))
        src.line(body, "if hit:")
        src.line(body + 1, f"out[({key})] = [{accs}]")
    src.line(body, "return visited")
    header = [
        f"def _factory({', '.join(name for name, _ in stores)}):",
        "    def delta_of(tup, delta, out):",
    ]
    return "\n".join(header + src.lines + ["    return delta_of", ""]), src.constants, stores


Factory = Callable[..., DeltaFunction]


Generated = tuple[Factory, list[tuple[str, Any]]]
# A worker keeps one engine per key, each of the same query: the factories are compiled once per query
# (they hold no state; each engine calls them with its own stores). The oldest query leaves first.
_FACTORIES: dict[tuple[bytes, str], Generated | None] = {}
_FACTORIES_KEPT = 64


def generate(query: Query, relation: str) -> Generated | None:
    """The factory of ``relation``'s delta function (called with its stores, in order) and the stores;
    None when Python refuses the source (the interpreted plan then serves)."""
    key = (orjson.dumps(query.describe_query()), relation)
    if key in _FACTORIES:
        return _FACTORIES[key]
    source, constants, stores = plan_source(query, query.plans[relation])
    namespace: dict[str, Any] = {"__builtins__": _BUILTINS, **constants}
    made: Generated | None
    try:
        exec(compile(source, f"<firstorder delta of {relation}>", "exec"), namespace)
        made = namespace["_factory"], stores
    except (SyntaxError, RecursionError, MemoryError):
        made = None
    if len(_FACTORIES) >= _FACTORIES_KEPT:
        del _FACTORIES[next(iter(_FACTORIES))]
    _FACTORIES[key] = made
    return made


def expression_function(text: str, position: Mapping[str, int]) -> Callable[[tuple[Any, ...]], Any]:
    """One expression generated as a function of an environment tuple (what the plans inline)."""
    src = _Source(position)
    atom, _ = src.expr(parse(text), 1)
    names = "".join(f"v{p}, " for p in range(len(position)))
    unpack = [f"    {names} = env"] if names else []
    lines = ["def _expression(env):", *unpack, *src.lines, f"    return {atom}", ""]
    namespace: dict[str, Any] = {"__builtins__": _BUILTINS, **src.constants}
    exec(compile("\n".join(lines), f"<firstorder expression {text!r}>", "exec"), namespace)
    return namespace["_expression"]  # type: ignore[no-any-return]
