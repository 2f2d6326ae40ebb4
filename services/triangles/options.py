"""Options of the triangles service, their validation and the relations it accepts.

Ids are int64 or strings (docs/triangles/algorithm.md §5.1). One service instance uses one id type
(``id_type``), declared as the column type so the codec refuses the other kind: ``int`` (the default;
int64, values outside it are refused by the engine with ``id-out-of-range``, because Spark and RocksDB
keys are int64) or ``str``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ivmstream.sdk import Option, Relation, boolean, choice, mapping, optional
from ivmstream.services.triangles.base import EDGE_COLUMNS, EDGE_RELATION, MODES, REL_COLUMNS, REL_NAMES
from ivmstream.services.triangles.engine import STRATEGIES
from ivmstream.services.triangles.thresholds import parse_epsilon

ID_TYPES = ("int", "str")


def _epsilon_text(v: Any) -> str:
    """ε as canonical text ("1/2"), by the engine's own rules (range, denominator bound) and messages."""
    return str(parse_epsilon(v))


_per_relation_epsilon = mapping(_epsilon_text, keys=REL_NAMES, exact=True)


def _parse_epsilon(v: Any) -> str | dict[str, str]:
    """One ε, or one per relation ({"R": "1/3", ...}); text keeps options JSON-friendly."""
    return _per_relation_epsilon(v) if isinstance(v, Mapping) else _epsilon_text(v)


OPTIONS = {
    "mode": Option(
        "graph",
        choice(*MODES),
        "graph: one undirected edge relation 'edges'(src,dst), set semantics; "
        "relations: Z-relations R(a,b), S(b,c), T(c,a)",
    ),
    "strategy": Option(
        "auto",
        choice(*STRATEGIES),
        "auto (picks first-order, IVM^eps at 1/2 or a single-view plan from the updates it sees, and "
        "switches exactly); ivm-eps (the paper, any epsilon); or a baseline: first-order, factorized, "
        "recursive, recompute",
    ),
    "epsilon": Option(
        None,
        optional(_parse_epsilon),
        "ivm-eps only: rational in [0,1] like '1/2' (default), or per relation {R: .., S: .., T: ..} "
        "in relations mode",
    ),
    "always_iterate_s": Option(
        False, boolean(), "first-order only: always iterate the S row (the paper's worst-case baseline)"
    ),
    "id_type": Option("int", choice(*ID_TYPES), "type of vertex/attribute ids: int (int64) or str"),
}


def validate(options: Mapping[str, Any]) -> None:
    """Refuse option combinations that would silently run something else than asked."""
    mode = options["mode"]
    strategy = options["strategy"]
    eps = options["epsilon"]
    if eps is not None and strategy != "ivm-eps":
        raise ValueError(f"'epsilon' applies only to strategy 'ivm-eps', but strategy is {strategy!r}")
    if isinstance(eps, Mapping) and mode != "relations":
        raise ValueError(
            f"a per-relation 'epsilon' needs mode 'relations'; mode {mode!r} has the single relation "
            f"{EDGE_RELATION!r}"
        )
    if options["always_iterate_s"] and strategy != "first-order":
        raise ValueError(f"'always_iterate_s' applies only to strategy 'first-order', not {strategy!r}")


def relations(options: Mapping[str, Any]) -> Sequence[Relation]:
    """``edges(src, dst)`` in graph mode; ``R(a, b)``, ``S(b, c)``, ``T(c, a)`` in relations mode."""
    typ = options["id_type"]
    if options["mode"] == "graph":
        return [Relation(EDGE_RELATION, tuple((c, typ) for c in EDGE_COLUMNS))]
    return [
        Relation(name, tuple((c, typ) for c in cols))
        for name, cols in zip(REL_NAMES, REL_COLUMNS, strict=True)
    ]
