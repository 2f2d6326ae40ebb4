"""Payload rings for F-IVM view trees (docs/fivm/algorithm.md §2.8), selected by name.

``RINGS`` maps a ring name to its factory (``base.RingFactory``): called once per
query with the lifted variables in view-tree preorder and the ring's options.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ivmstream.services.fivm.rings.base import Ring, RingFactory
from ivmstream.services.fivm.rings.cofactor import make_cofactor_ring
from ivmstream.services.fivm.rings.degree import make_degree_ring
from ivmstream.services.fivm.rings.dense_cofactor import make_dense_cofactor_ring
from ivmstream.services.fivm.rings.factorized import make_factorized_ring
from ivmstream.services.fivm.rings.listing import make_listing_ring
from ivmstream.services.fivm.rings.matrix import make_matrix_ring
from ivmstream.services.fivm.rings.scalar import make_count_ring, make_sum_ring

RINGS: dict[str, RingFactory] = {
    "count": make_count_ring,
    "sum": make_sum_ring,
    "cofactor": make_cofactor_ring,
    "degree": make_degree_ring,
    "listing": make_listing_ring,
    "factorized": make_factorized_ring,
    "matrix": make_matrix_ring,
}


def make_ring(name: str, lifted: Sequence[str], **options: Any) -> Ring[Any]:
    """The ring ``name`` over ``lifted`` (view-tree preorder); ValueError for unknown names or options.
    The cofactor ring's option ``payload: dense`` gives full-width payloads (``dense_cofactor``), as the
    baselines keep them, so the fivm strategy can be compared with them on equal payloads."""
    if name == "cofactor" and options.get("payload") == "dense":
        return make_dense_cofactor_ring(lifted, **{k: v for k, v in options.items() if k != "payload"})
    factory = RINGS.get(name)
    if factory is None:
        raise ValueError(f"unknown ring {name!r} (available: {', '.join(sorted(RINGS))})")
    return factory(lifted, **options)


__all__ = ["RINGS", "Ring", "RingFactory", "make_ring"]
