"""Options of the triangles service, their validation, the relations it accepts and the engine factory.

Ids are int64 or strings (docs/algorithms/triangles.md §5). One service instance uses one id type
(``id_type``), declared as the column type so the codec refuses the other kind: ``int`` (the default;
int64, values outside it are refused by the engine with ``id-out-of-range``, because Spark and RocksDB
keys are int64) or ``str``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.triangles.base import EDGE_COLUMNS, EDGE_RELATION, MODES, REL_COLUMNS, REL_NAMES
from services.triangles.engine import STRATEGIES, TriangleEngine, create_engine
from services.triangles.thresholds import parse_epsilon
from shared.config import Option
from shared.events import Relation

ID_TYPES = ("int", "str")


def _parse_mode(v: Any) -> str:
    if v not in MODES:
        raise ValueError(f"must be one of {', '.join(MODES)}")
    return v


def _parse_strategy(v: Any) -> str:
    if v not in STRATEGIES:
        raise ValueError(f"must be one of {', '.join(STRATEGIES)}")
    return v


def _parse_epsilon_option(v: Any) -> str | dict[str, str] | None:
    """Canonical text ("1/2", or {"R": "1/3", ...}), so options stay JSON-friendly; None = default 1/2."""
    if v is None:
        return None
    if isinstance(v, Mapping):
        keys = set(v)
        if keys != set(REL_NAMES):
            got = ", ".join(sorted(map(str, keys)))
            raise ValueError(f"a per-relation epsilon must give exactly R, S and T (got {got})")
        out = {}
        for name in REL_NAMES:
            try:
                out[name] = str(parse_epsilon(v[name]))
            except ValueError as exc:
                raise ValueError(f"for {name}: {exc}") from None
        return out
    return str(parse_epsilon(v))


def _parse_bool(v: Any) -> bool:
    if type(v) is not bool:
        raise ValueError("must be true or false")
    return v


def _parse_id_type(v: Any) -> str:
    if v not in ID_TYPES:
        raise ValueError(f"must be one of {', '.join(ID_TYPES)}")
    return v


OPTIONS = {
    "mode": Option(
        "graph",
        _parse_mode,
        "graph: one undirected edge relation 'edges'(src,dst), set semantics; "
        "relations: Z-relations R(a,b), S(b,c), T(c,a)",
    ),
    "strategy": Option(
        "ivm-eps",
        _parse_strategy,
        "ivm-eps (the paper), or a baseline: first-order, factorized, recursive, recompute",
    ),
    "epsilon": Option(
        None,
        _parse_epsilon_option,
        "ivm-eps only: rational in [0,1] like '1/2' (default), or per relation {R: .., S: .., T: ..} "
        "in relations mode",
    ),
    "always_iterate_s": Option(
        False, _parse_bool, "first-order only: always iterate the S row (the paper's worst-case baseline)"
    ),
    "id_type": Option("int", _parse_id_type, "type of vertex/attribute ids: int (int64) or str"),
}


def validate(options: Mapping[str, Any]) -> None:
    """Refuse option combinations that would silently run something else than asked."""
    mode = options.get("mode", "graph")
    strategy = options.get("strategy", "ivm-eps")
    eps = options.get("epsilon")
    if eps is not None and strategy != "ivm-eps":
        raise ValueError(f"'epsilon' applies only to strategy 'ivm-eps', but strategy is {strategy!r}")
    if isinstance(eps, Mapping) and mode != "relations":
        raise ValueError(
            f"a per-relation 'epsilon' needs mode 'relations'; mode {mode!r} has the single relation "
            f"{EDGE_RELATION!r}"
        )
    if options.get("always_iterate_s", False) and strategy != "first-order":
        raise ValueError(f"'always_iterate_s' applies only to strategy 'first-order', not {strategy!r}")


def relations(options: Mapping[str, Any]) -> Sequence[Relation]:
    """``edges(src, dst)`` in graph mode; ``R(a, b)``, ``S(b, c)``, ``T(c, a)`` in relations mode."""
    typ = options.get("id_type", "int")
    if options.get("mode", "graph") == "graph":
        return [Relation(EDGE_RELATION, tuple((c, typ) for c in EDGE_COLUMNS))]
    return [
        Relation(name, tuple((c, typ) for c in cols))
        for name, cols in zip(REL_NAMES, REL_COLUMNS, strict=True)
    ]


def make_engine(options: Mapping[str, Any]) -> TriangleEngine:
    """An empty engine for validated options (missing keys take their defaults, for benchmarks and tests)."""
    validate(options)
    return create_engine(
        options.get("mode", "graph"),
        options.get("strategy", "ivm-eps"),
        options.get("epsilon"),
        options.get("always_iterate_s", False),
    )
