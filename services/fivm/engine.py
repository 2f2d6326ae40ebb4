"""The F-IVM engine: event intake and state persistence in front of one maintenance strategy.

docs/fivm/algorithm.md §2.5 (updates), §2.12 (edge cases) and §4 (state). ``FivmEngine(config)`` parses
the configuration (``ivmstream.services.fivm.query``), builds the strategy named by ``strategy`` from
``STRATEGIES`` and feeds it consolidated per-relation deltas. Baselines (first-order IVM, a
DBToaster-style hierarchy, re-evaluation) plug in as further strategies exposing the same maintainer
interface (``Maintainer`` below). Pure and deterministic: no I/O.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, cast

import orjson

from ivmstream.sdk import EngineError, Entry, EntryChange, EventColumns, Rejection, UpdateEvent
from ivmstream.services.fivm import model
from ivmstream.services.fivm import state as st
from ivmstream.services.fivm.baselines.registry import BASELINES
from ivmstream.services.fivm.factorized_updates import (
    Factor,
    FactorizedDelta,
    apply_factorized,
    expand,
    supports_factorized,
)
from ivmstream.services.fivm.intake import Intake, Refused, consolidate, events_of
from ivmstream.services.fivm.maintain import FivmMaintainer, Support
from ivmstream.services.fivm.order import VariableOrder
from ivmstream.services.fivm.query import KEYS, Query, parse_query
from ivmstream.services.fivm.rings import Ring
from ivmstream.services.fivm.views import Key, View

SNAPSHOT_FORMAT = "ivmstream.fivm/1"


class Maintainer(Protocol):
    """What the engine needs from a strategy: its state as named views (and supports), the phase, and
    one entry point per consolidated relation delta. Baselines implement the same interface."""

    ring: Ring[Any]
    order: VariableOrder
    loading: bool
    updatable: frozenset[str]
    views: dict[str, View]
    supports: dict[str, Support]
    dropped: dict[str, list[Key]]

    def seal(self) -> None: ...

    def apply_relation(self, base: str, delta: dict[Key, int]) -> None: ...

    def roots(self) -> list[View]: ...

    def rebuild_derived(self) -> None: ...


STRATEGIES: dict[str, Callable[[Query], Maintainer]] = {
    "fivm": FivmMaintainer,  # U = every relation, or the configured ``updatable``
    "fivm-one": FivmMaintainer,  # U = the one relation ``updatable`` names (checked by parse_query)
    **BASELINES,  # docs/fivm/baselines.md
}


def _group_key(item: tuple[Key, Any]) -> Key:
    return item[0]


class FivmEngine:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.query = parse_query(config)
        self.maint = STRATEGIES[self.query.strategy](self.query)
        self.intake = Intake(self.query)
        self.ring = self.maint.ring
        # Product deltas (docs/fivm/algorithm.md §2.13): how many, and the entries stored views absorbed.
        self.factorized_updates = 0
        self.factorized_absorbed: dict[str, int] = {}
        self._check: Callable[[], None] | None = None
        # Whether changes are logged: once a checkpoint has taken the state (replay and benchmarks never
        # checkpoint, so their views keep no change log); the first changed_entries() is every entry.
        self._logging = False
        if self.query.debug:
            from ivmstream.services.fivm.check import check_invariants

            self._check = lambda: check_invariants(self.maint)  # type: ignore[arg-type]

    # --- Engine protocol ---------------------------------------------------------------------------------

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        """Validate, consolidate per relation (§1.2) and propagate each relation's delta in turn (§2.6).

        While static relations load, the first event of an updatable relation first propagates what came
        before it and then ends the loading phase; later events of static relations are refused."""
        rejections: list[Rejection] = []
        pending: dict[str, dict[Key, int]] = {}
        maint = self.maint
        intake = self.intake
        parse = intake.parse
        fast = intake.float_columns
        updatable = maint.updatable
        i = 0
        n = len(events)
        while i < n:
            ev = events[i]
            rel = ev.relation
            if rel in fast and rel in updatable and not maint.loading:
                # A run of this relation's all-float tuples, consolidated in one loop (§1.2).
                got = pending.get(rel)
                batch = {} if got is None else got
                j = intake.absorb_floats(events, i, rel, batch)
                if j > i:
                    if got is None:  # relations propagate in the order of their first tuple
                        pending[rel] = batch
                    i = j
                    continue
            parsed = parse(i, ev)
            i += 1
            if isinstance(parsed, Rejection):
                rejections.append(parsed)
                continue
            if isinstance(parsed, FactorizedDelta):
                # In stream order: what came before is propagated first (§2.6).
                if parsed.relation not in maint.updatable and not maint.loading:
                    rejections.append(Rejection(i - 1, "static-relation", self._static(parsed.relation)))
                    continue
                self._flush(pending)
                pending = {}
                if parsed.relation in maint.updatable:
                    maint.seal()
                self._apply_product(parsed)
                continue
            rel, t, m = parsed
            if rel not in maint.updatable:
                if not maint.loading:
                    rejections.append(Rejection(i - 1, "static-relation", self._static(rel)))
                    continue
            elif maint.loading:
                self._flush(pending)
                pending = {}
                maint.seal()
            into = pending.get(rel)
            if into is None:
                into = pending[rel] = {}
            into[t] = into.get(t, 0) + m
        self._flush(pending)
        if not self._logging:
            self._forget_changes()
        return rejections

    def apply_columns(self, batch: EventColumns) -> list[Rejection]:
        """``apply`` of a batch given as columns (``ColumnarEngine``): each relation's tuples summed
        straight from its columns, no event or row dict made, then propagated as ``apply`` propagates
        them (in the order of each relation's first tuple). A batch with a row the per-event checks
        must see (a refusal, a static relation, the loading phase, a product delta) goes to ``apply``."""
        maint = self.maint
        pending = None
        if not maint.loading and maint.updatable.issuperset(batch.relations):
            pending = self.intake.absorb_columns(batch.relations)
        if pending is None:
            return self.apply(events_of(batch))
        self._flush(pending)
        if not self._logging:
            self._forget_changes()
        return []

    def _static(self, rel: str) -> str:
        return (
            f"{rel} is static (not updatable) and its loading ended with the first update "
            f"to {', '.join(sorted(self.maint.updatable))}"
        )

    def apply_factorized(
        self,
        relation: str,
        factors: Sequence[Factor | tuple[str | Sequence[str], Mapping[Any, int | float]]],
        copies: int = 1,
    ) -> dict[str, int]:
        """Add ``copies`` times the product of ``factors`` to ``relation`` (docs/fivm/algorithm.md §2.13).

        A factor is ``Factor(columns, {key: number})`` or ``(columns, {key: number})``; a one-column
        factor may key by bare values. The factors' columns split the relation's columns (but its
        weight column) disjointly; numbers are multiplicities, or weights of a weighted relation. fivm
        propagates the product factorized; other strategies get its expansion as tuples. Returns the
        entries each stored view absorbed (empty when expanded); refusals raise ``EngineError``."""
        if copies.__class__ is not int or not copies:
            raise EngineError(f"copies must be a non-zero integer, got {copies!r}")
        raw = [
            (f.columns, f.entries.items()) if isinstance(f, Factor) else (f[0], f[1].items()) for f in factors
        ]
        parsed = self.intake.check_factors(relation, raw, copies)
        if isinstance(parsed, Refused):
            raise EngineError(f"{parsed.code}: {parsed.detail}")
        maint = self.maint
        if relation not in maint.updatable:
            if not maint.loading:
                raise EngineError(f"static-relation: {self._static(relation)}")
        else:
            maint.seal()
        absorbed = self._apply_product(parsed)
        if not self._logging:
            self._forget_changes()
        return absorbed

    def _apply_product(self, delta: FactorizedDelta) -> dict[str, int]:
        maint = self.maint
        absorbed: dict[str, int] = {}
        if supports_factorized(maint, delta.relation):
            absorbed = apply_factorized(maint, delta)  # type: ignore[arg-type]
        else:
            tuples = expand(self.query, delta)
            if tuples:
                maint.apply_relation(delta.relation, tuples)
        self.factorized_updates += 1
        for name, n in absorbed.items():
            self.factorized_absorbed[name] = self.factorized_absorbed.get(name, 0) + n
        if self._check is not None:
            self._check()
        return absorbed

    def _flush(self, pending: Mapping[str, dict[Key, int]]) -> None:
        for rel, batch in pending.items():
            delta = consolidate(batch)
            if delta:
                self.maint.apply_relation(rel, delta)
                if self._check is not None:
                    self._check()

    def result(self) -> dict[str, Any]:
        """``{"value": v}`` or ``{"groups": [{"key": {...}, "value": v}, ...]}`` sorted by key, and stats."""
        out = self.render(self.root_payloads())
        out["stats"] = self.stats_exact()
        return out

    def root_payloads(self) -> dict[Key, Any]:
        """The result before rendering: each group key (``()`` without free variables) and its payload,
        the product of one entry of each root (docs/fivm/algorithm.md §2.11), zeros left out. A shard
        publishes these (services/fivm/sharding.py), so its sum renders as one engine's result."""
        ring = self.ring
        free = self.query.group_by
        roots = self.maint.roots()
        out: dict[Key, Any] = {}
        for combo in itertools.product(*(list(v.items()) for v in roots)):
            named: dict[str, Any] = {}
            payload = ring.one()
            for view, (key, p) in zip(roots, combo, strict=True):
                named.update(zip(view.keys, key, strict=True))
                payload = ring.mul(payload, p)
            if not ring.is_zero(payload):
                out[tuple(named[v] for v in free)] = payload
        return out

    def render(self, payloads: Mapping[Key, Any]) -> dict[str, Any]:
        """Group payloads in the result's form (without stats): the value of ``()`` without free
        variables, else the non-zero groups sorted by key."""
        ring = self.ring
        free = self.query.group_by
        if not free:
            return {"value": ring.to_json(payloads.get((), ring.zero()))}
        kept = sorted(((k, p) for k, p in payloads.items() if not ring.is_zero(p)), key=_group_key)
        groups = [{"key": dict(zip(free, k, strict=True)), "value": ring.to_json(p)} for k, p in kept]
        return {"groups": groups}

    def stats_exact(self) -> dict[str, Any]:
        """State-only diagnostics: entries per materialized view, the variable order, the phase."""
        maint = self.maint
        return {
            "views": {name: len(view) for name, view in sorted(maint.views.items())},
            "variable_order": maint.order.to_json(),
            "variable_order_derived": maint.order.derived,
            "updatable": sorted(maint.updatable),
            "loading": maint.loading,
        }

    def stats(self) -> dict[str, float]:
        out = {f"view_entries_{name}": float(len(v)) for name, v in self.maint.views.items()}
        out["views"] = float(len(self.maint.views))
        out["loading"] = float(self.maint.loading)
        if self.factorized_updates:
            out["factorized_updates"] = float(self.factorized_updates)
            for name, n in self.factorized_absorbed.items():
                out[f"factorized_absorbed_{name}"] = float(n)
        return out

    def snapshot(self) -> bytes:
        """Every entry, maps by name and entries by key: equal states give equal bytes (§4.2)."""
        maps: dict[str, list[tuple[bytes, bytes]]] = {}
        for name, key, value in self._entries():
            maps.setdefault(name, []).append((key, value))
        body = {
            "format": SNAPSHOT_FORMAT,
            "maps": {
                name: [[k.decode(), base64.b64encode(v).decode()] for k, v in sorted(rows)]
                for name, rows in sorted(maps.items())
            },
        }
        return orjson.dumps(body)

    def restore(self, data: bytes) -> None:
        try:
            snap = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise EngineError(f"fivm snapshot is not valid JSON: {exc}") from None
        if not isinstance(snap, dict) or snap.get("format") != SNAPSHOT_FORMAT:
            raise EngineError(f"not a {SNAPSHOT_FORMAT} snapshot")
        self.restore_entries(
            (name, k.encode(), base64.b64decode(v)) for name, rows in snap["maps"].items() for k, v in rows
        )
        self._logging = False  # whole snapshots: no change log until a checkpoint takes entries

    # --- IncrementalEngine (§4.1) ------------------------------------------------------------------------

    def pending_changes(self) -> int:
        maint = self.maint
        return (
            sum(len(keys) for keys in maint.dropped.values())
            + sum(len(view.changed) for view in maint.views.values())
            + sum(len(support.changed) for support in maint.supports.values())
        )

    def _forget_changes(self) -> None:
        """Drop the change log: nothing will read it (no checkpoint has taken the state)."""
        maint = self.maint
        maint.dropped.clear()
        for view in maint.views.values():
            view.changed.clear()
        for support in maint.supports.values():
            support.changed.clear()

    def changed_entries(self) -> list[EntryChange]:
        """Entries put or deleted since the previous call; at the first call every entry."""
        if not self._logging:
            self._forget_changes()
            return list(self.all_entries())
        maint = self.maint
        ring = self.ring
        out: list[EntryChange] = []
        for name, keys in maint.dropped.items():
            out.extend((name, st.encode_key(k), None) for k in keys)
        maint.dropped.clear()
        for name, view in maint.views.items():
            out.extend(st.view_entries(ring, name, view.changed, view))
            view.changed.clear()
        for rel, support in maint.supports.items():
            name = st.support_map(rel)
            for t in support.changed:
                m = support.data.get(t)
                out.append((name, st.encode_key(t), None if m is None else st.encode_int(m)))
            support.changed.clear()
        out.extend(self._meta_entries())
        return out

    def all_entries(self) -> Iterator[Entry]:
        """Every entry; changes are logged from now on (a checkpoint is taking the state)."""
        self._logging = True
        return self._entries()

    def _entries(self) -> Iterator[Entry]:
        maint = self.maint
        ring = self.ring
        for name, view in maint.views.items():
            # A view's entries in one pass (compiled for the float cofactor ring): the first checkpoint
            # takes every entry, more than the batches before it.
            yield from cast("list[Entry]", st.view_entries(ring, name, view.data, view))
        for rel, support in maint.supports.items():
            name = st.support_map(rel)
            for t, m in support.data.items():
                yield name, st.encode_key(t), st.encode_int(m)
        yield from self._meta_entries()

    def restore_entries(self, entries: Iterable[Entry]) -> None:
        maps: dict[str, list[tuple[bytes, bytes]]] = {}
        for name, key, value in entries:
            maps.setdefault(name, []).append((key, value))
        meta = {k: orjson.loads(v) for k, v in maps.pop(st.META, [])}
        if meta.get(b"config") != self.query.raw:
            raise EngineError(f"fivm state was written with {meta.get(b'config')!r}, not {self.query.raw}")
        phase = meta.get(b"phase")
        if phase not in ("loading", "sealed"):
            raise EngineError(f"fivm state has no valid phase entry, got {phase!r}")
        fresh = STRATEGIES[self.query.strategy](self.query)
        fresh.loading = phase == "loading"
        fresh.rebuild_derived()
        fresh.dropped.clear()
        seqs: dict[str, int] = meta.get(b"seq") or {}
        ring = fresh.ring
        for name, rows in maps.items():
            if name.startswith(st.SUPPORT_PREFIX):
                support = fresh.supports.get(name[len(st.SUPPORT_PREFIX) :])
                if support is None:
                    raise EngineError(f"fivm state has support map {name!r}, which this query does not keep")
                support.data = {st.decode_key(k): st.decode_int(v) for k, v in rows}
                continue
            view = fresh.views.get(name)
            if view is None:
                raise EngineError(f"fivm state has view {name!r}, which this query does not materialize now")
            loaded = []
            for k, v in rows:
                seq, payload = st.decode_view_value(v)
                loaded.append((st.decode_key(k), seq, ring.decode(payload)))
            view.load(loaded, seqs.get(name, max((r[1] for r in loaded), default=-1) + 1))
        for name, view in fresh.views.items():
            view.next_seq = max(view.next_seq, seqs.get(name, 0))
        fresh.rebuild_derived()
        fresh.dropped.clear()
        self.maint = fresh
        self.ring = ring
        self._logging = True

    def _meta_entries(self) -> list[Entry]:
        maint = self.maint
        return [
            (st.META, b"config", st.encode_json(self.query.raw)),
            (st.META, b"phase", st.encode_json("loading" if maint.loading else "sealed")),
            (st.META, b"seq", st.encode_json({name: v.next_seq for name, v in maint.views.items()})),
        ]


def create_engine(config: Mapping[str, Any]) -> FivmEngine:
    return FivmEngine(config)


def query_config(options: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's configuration: the query keys that are set (an unset key takes the engine's default);
    ``emit_rows`` is the listing ring's ``rows`` option."""
    config = {k: options[k] for k in KEYS if options[k] is not None}
    if options["emit_rows"]:
        if options["ring"] != "listing":
            raise ValueError(
                "emit_rows lists the rows of ring listing (for factorized payloads use strategy "
                "fact-payloads with ring listing)"
            )
        config["ring_options"] = {**(config.get("ring_options") or {}), "rows": True}
    return config


def shape_result(query: Query, result: Mapping[str, Any], spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """``FivmEngine.result()`` in the service's result form (docs/fivm/algorithm.md §7.2).

    count, sum and matrix keep ``{"value": v}`` or ``{"groups": [...]}``; a covariance result is its
    ``count``, ``variables``, ``sum`` and ``sumprod`` (with ``model`` when configured); listing and
    factorized results give the ``join_size``. ``stats`` always follows."""
    if "groups" in result:
        return dict(result)
    value = result["value"]
    out: dict[str, Any]
    if query.ring == "covariance":
        out = dict(value)
        if spec is not None:
            features = [f for f in query.features if f != spec["label"]]
            out["model"] = model.fit_spec(value, spec, features)
    elif query.ring == "listing":
        out = dict(value)
    elif query.ring == "factorized":
        rest = dict(value)
        out = {"join_size": rest.pop("count"), **rest}
    else:
        out = {"value": value}
    out["stats"] = result["stats"]
    return out


class ServiceEngine(FivmEngine):
    """``FivmEngine`` with the service's result form; state, snapshots and refusals are the engine's."""

    def __init__(self, config: Mapping[str, Any], model_spec: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self.model_spec = model_spec

    def result(self) -> dict[str, Any]:
        return shape_result(self.query, super().result(), self.model_spec)


def make_engine(options: Mapping[str, Any]) -> ServiceEngine:
    return ServiceEngine(query_config(options), options["model"])
