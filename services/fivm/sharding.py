"""One fivm query over several workers: partial roots per shard, summed in the ring (two-phase aggregation).

With ``shard_by: P`` (docs/architecture.md, "Scaling one query over workers") every event of a relation
with column P goes to the input partition its P value hashes to, and every event of another relation
to all partitions. Each join tuple has one P value, so partition i joins exactly the join tuples whose
P hashes to i: its root is the query over them, and the query is the ring sum of the partitions' roots
(docs/fivm/algorithm.md §7.7). Any P gives the right sum; the root variable of the variable order is
the efficient choice, since then no join below P crosses partitions and only the relations without P
are replicated.

A shard publishes its root payloads in the ring's own encoding (``partial_result``), not their JSON
form, which rounds exact decimals to floats; the coordinator decodes them, adds them with the ring's
``add`` and renders the sum exactly as the engine renders a root (``combine_partials``). Pure.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from ivmstream.sdk import JSON, Engine
from ivmstream.services.fivm.engine import FivmEngine, make_engine, query_config, shape_result
from ivmstream.services.fivm.query import parse_query


def check_shard_by(options: Mapping[str, Any], shard_by: str) -> None:
    """ValueError unless the sum over shards is the query: every relation updatable (a static relation's
    loading ends at the first update, an order shards do not share) and every self-join occurrence of
    a sharded relation keeping P in P's column (else it would join a slice where the query joins the
    whole relation)."""
    query = parse_query(query_config(options))
    static = [r.name for r in query.relations if r.name not in query.updatable]
    if static:
        raise ValueError(
            f"static relations ({', '.join(static)}) end their loading at the first update, an order the "
            "shards do not share: leave 'updatable' unset to shard this query"
        )
    if shard_by not in query.variables:
        raise ValueError("it is a variable of no relation")
    bases = {r.name: r for r in query.relations}
    for occ in query.occurrences:
        base = bases[occ.base]
        if shard_by not in base.columns:
            continue
        at = base.columns.index(shard_by)
        if occ.columns[at] != shard_by:
            raise ValueError(
                f"{occ.name} is {base.name} with its column {shard_by} renamed: it would join one shard's "
                f"slice of {base.name} where the query joins all of it"
            )


def _encode(engine: FivmEngine, payload: Any) -> str:
    return base64.b64encode(engine.ring.encode(payload)).decode()


def partial_result(engine: Engine) -> JSON:
    """A shard's root payloads in the ring's encoding, keyed by group, and its engine's stats."""
    if not isinstance(engine, FivmEngine):
        raise TypeError(f"a fivm shard runs a FivmEngine, not {type(engine).__name__}")
    groups = engine.root_payloads()
    return {
        "groups": [[list(key), _encode(engine, p)] for key, p in sorted(groups.items())],
        "stats": engine.stats_exact(),
    }


def combine_partials(options: Mapping[str, Any], partials: Sequence[JSON]) -> JSON:
    """The ring sum of the shards' roots, rendered as the service renders one engine's result (groups
    sorted by key, zero groups dropped, the covariance model refitted from the summed matrix); ``stats``
    says how many shards it sums, whether any still loads, and the variable order."""
    engine = make_engine(options)
    ring = engine.ring
    total: dict[tuple[Any, ...], Any] = {}
    for partial in partials:
        for key, encoded in partial["groups"]:
            k = tuple(key)
            payload = ring.decode(base64.b64decode(encoded))
            total[k] = ring.add(total[k], payload) if k in total else payload
    stats = engine.stats_exact()
    del stats["views"]  # per shard, and views built only from broadcast relations are on every shard
    stats["loading"] = any(p["stats"]["loading"] for p in partials)
    stats["shards"] = len(partials)
    result = engine.render(total)
    result["stats"] = stats
    return shape_result(engine.query, result, options["model"])


class FivmSharding:
    """``ivmstream.service.Sharding`` of the fivm service."""

    check_shard_by = staticmethod(check_shard_by)
    partial_result = staticmethod(partial_result)
    combine_partials = staticmethod(combine_partials)


SHARDING = FivmSharding()
