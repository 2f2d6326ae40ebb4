"""The vwap engine: a validating bag ledger in front of one query plan (RPAI or a baseline).

The ledger is what makes every strategy see the same, valid stream: deletes of tuples that are not
live and order-book tuples with non-positive volume (they break the monotonicity the RPAI shifts rely
on, docs/algorithms/vwap.md §9.5) are refused with a reason and change nothing. The plan is derived
state: a snapshot is the ledger (plus per-price levels of the book sides), and a restore rebuilds the
plan from it (§6.1, §6.2).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from services.vwap import snapshot as snap
from services.vwap.catalog import QUERIES, QueryInfo
from services.vwap.exact import exact_context
from services.vwap.plans import make_plan
from services.vwap.trees.rpai import black_height
from shared.engine import EngineError, Entry, EntryChange, Rejection
from shared.events import UpdateEvent


class VwapEngine:
    def __init__(self, query: str, strategy: str = "rpai", params: Mapping[str, Any] | None = None) -> None:
        if query not in QUERIES:
            raise EngineError(f"unknown query {query!r} (known: {', '.join(QUERIES)})")
        info: QueryInfo = QUERIES[query]
        if strategy not in info.strategies:
            raise EngineError(
                f"query {query} runs on strategies {', '.join(info.strategies)}, not {strategy!r}"
            )
        self.info = info
        self.query = query
        self.strategy = strategy
        self.params = dict(info.defaults) | dict(params or {})
        self.relations = {r.name: r for r in info.relations}
        self._columns = {r.name: r.column_names for r in info.relations}
        self._reads = frozenset(info.reads)
        self.brokers: int | None = self.params.get("brokers") if query == "mst" else None
        self.bag: dict[str, dict[tuple[Any, ...], int]] = {name: {} for name in self.relations}
        self.plan = make_plan(query, strategy, self.params)
        self.events = 0
        self.rejected = 0
        self.live_tuples = 0  # the bag's total multiplicity, kept so stats() need not sum the bag
        self._changed: set[tuple[str, tuple[Any, ...]]] = set()  # bag tuples touched since a checkpoint

    # --- Engine protocol -------------------------------------------------------------------------------

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        rejections: list[Rejection] = []
        bag = self.bag
        columns = self._columns
        reads = self._reads
        update = self.plan.update
        book = self.info.book
        changed = self._changed.add
        net = 0
        # Plans with ``apply_levels`` take the batch netted per price level (docs/algorithms/vwap.md §3.6):
        # the ledger still checks every event in order, the plan moves once per level touched.
        netted: dict[str, dict[Any, list[Any]]] | None = None
        if book and hasattr(self.plan, "apply_levels"):
            netted = {rel: {} for rel in reads}
        with exact_context():
            for i, ev in enumerate(events):
                rel = ev.relation
                ledger = bag.get(rel)
                if ledger is None:
                    rejections.append(Rejection(i, "unknown-relation", f"query {self.query} has no {rel!r}"))
                    continue
                row = ev.row
                delta = ev.delta
                if book:
                    reason = self._check_book_row(row)
                    if reason is not None:
                        rejections.append(Rejection(i, reason[0], reason[1]))
                        continue
                vals = tuple([row[c] for c in columns[rel]])
                have = ledger.get(vals, 0)
                new = have + delta
                if new < 0:
                    rejections.append(
                        Rejection(
                            i,
                            "absent-tuple",
                            f"delete of {-delta} {rel} tuple(s) {dict(row)} but {have} live",
                        )
                    )
                    continue
                if new:
                    ledger[vals] = new
                else:
                    del ledger[vals]
                changed((rel, vals))
                net += delta
                if rel in reads:
                    if netted is None:
                        update(rel, row, delta)
                    else:
                        levels = netted[rel]
                        price = row["price"]
                        acc = levels.get(price)
                        if acc is None:
                            levels[price] = [delta, delta * row["volume"]]
                        else:
                            acc[0] += delta
                            acc[1] += delta * row["volume"]
            if netted is not None:
                for rel, changes in netted.items():
                    if changes:
                        self.plan.apply_levels(rel, changes)
        self.events += len(events) - len(rejections)
        self.rejected += len(rejections)
        self.live_tuples += net
        return rejections

    def _check_book_row(self, row: Mapping[str, Any]) -> tuple[str, str] | None:
        vol = row["volume"]
        if not vol > 0:
            return "non-positive-volume", f"volume must be > 0 (order-book volumes are positive), got {vol}"
        if self.brokers is not None:
            g = row["broker_id"]
            if not 0 <= g < self.brokers:
                return "broker-out-of-range", f"broker_id {g} outside [0, {self.brokers}) (option brokers)"
        return None

    def result(self) -> Any:
        with exact_context():
            out = dict(self.plan.result())
        # Only state goes into a result: refusals and the plan's work counters depend on how the input
        # was cut into batches and restarts, so they are gauges (``stats()``), not part of the view.
        out["stats"] = {"events": self.events}
        return out

    def stats(self) -> dict[str, float]:
        """Gauges, refreshed often by the runtime, so nothing walks a whole tree: ``tree_height`` is the
        largest *black* height of the plan's trees, one spine each, O(log n) (an LLRB tree's height h
        satisfies bh <= h <= 2·bh)."""
        out = {f"plan_{k}": float(v) for k, v in self.plan.stats().items()}
        trees = getattr(self.plan, "trees", None)
        if trees is not None:
            ts = trees()
            out["tree_height"] = float(max((black_height(t) for t in ts), default=0))
            out["tree_nodes"] = float(sum(len(t) for t in ts))
        out["live_tuples"] = float(self.live_tuples)
        out["rejected"] = float(self.rejected)  # since this process started
        return out

    def snapshot(self) -> bytes:
        levels = None
        if self.info.book:
            levels = {rel: snap.book_levels(self.bag[rel], self._columns[rel]) for rel in ("bids", "asks")}
        counters = {"events": self.events}
        return snap.encode(self.query, self.strategy, self.bag, levels, counters)

    def restore(self, data: bytes) -> None:
        try:
            state = snap.decode(data, self.relations)
        except (ValueError, KeyError, TypeError) as exc:
            raise EngineError(f"cannot restore vwap snapshot: {exc}") from None
        if state["query"] != self.query:
            raise EngineError(f"snapshot is of query {state['query']!r}, this engine runs {self.query!r}")
        bag = {name: state["bag"].get(name, {}) for name in self.relations}
        levels = None
        if self.info.book:
            levels = {rel: snap.book_levels(bag[rel], self._columns[rel]) for rel in ("bids", "asks")}
            if state["levels"] is not None:
                for rel in ("bids", "asks"):
                    theirs = state["levels"].get(rel, [])
                    if levels[rel] != theirs:
                        raise EngineError(
                            f"snapshot's {rel} price levels disagree with its tuples ({len(theirs)} levels "
                            f"given, {len(levels[rel])} derived): refusing a corrupt snapshot"
                        )
        self._install(bag, levels, int(state["counters"].get("events", 0)))

    def _install(
        self,
        bag: dict[str, dict[tuple[Any, ...], int]],
        levels: Mapping[str, list[snap.Level]] | None,
        events: int,
    ) -> None:
        """Make ``bag`` the state: the plan is derived from it (docs/algorithms/vwap.md §6.2)."""
        if levels is None and self.info.book:
            levels = {rel: snap.book_levels(bag[rel], self._columns[rel]) for rel in ("bids", "asks")}
        plan = make_plan(self.query, self.strategy, self.params)
        with exact_context():
            if levels is not None and hasattr(plan, "load_levels"):
                plan.load_levels(levels)  # the trees in one ascending pass over the price levels
            else:
                for rel in self.info.reads:
                    cols = self._columns[rel]
                    for vals, m in bag[rel].items():
                        plan.update(rel, dict(zip(cols, vals, strict=True)), m)
        self.plan = plan
        self.bag = bag
        self.live_tuples = sum(sum(b.values()) for b in bag.values())
        self.events = events
        self.rejected = 0
        self._changed.clear()

    # --- incremental state (shared.engine.IncrementalEngine, docs/algorithms/vwap.md §6.2) ----------
    # Map "b": one entry per live bag tuple, key [relation, col1, ..., colN] (exact JSON), value its
    # multiplicity. Map "s": the event counter and the query/strategy the entries belong to. The plan's
    # trees are a function of the bag and are rebuilt on restore, as from a snapshot.

    def changed_entries(self) -> list[EntryChange]:
        out: list[EntryChange] = []
        bag = self.bag
        for rel, vals in self._changed:
            m = bag[rel].get(vals)
            out.append(("b", _bag_key(rel, vals), orjson.dumps(m) if m else None))
        self._changed.clear()
        out.extend(self._scalar_entries())
        return out

    def all_entries(self) -> Iterator[Entry]:
        for rel in sorted(self.bag):
            for vals, m in self.bag[rel].items():
                yield "b", _bag_key(rel, vals), orjson.dumps(m)
        yield from self._scalar_entries()

    def restore_entries(self, entries: Iterable[Entry]) -> None:
        bag: dict[str, dict[tuple[Any, ...], int]] = {name: {} for name in self.relations}
        types = {name: snap.column_types(r) for name, r in self.relations.items()}
        scalars: dict[bytes, Any] = {}
        for map_name, key, value in entries:
            if map_name == "b":
                rel, *vals = orjson.loads(key)
                if rel not in bag:
                    raise EngineError(f"state entry of relation {rel!r}, not one of query {self.query}")
                m = orjson.loads(value)
                if type(m) is not int or m <= 0:
                    raise EngineError(f"corrupt vwap state: {rel} tuple {vals} has multiplicity {m!r}")
                bag[rel][snap.decode_row(vals, types[rel])] = m
            elif map_name == "s":
                scalars[key] = orjson.loads(value)
            else:
                raise EngineError(f"unknown vwap state map {map_name!r}")
        owner = scalars.get(b"query")
        if owner != [self.query, self.strategy]:
            raise EngineError(f"state entries were written by {owner!r}, not {[self.query, self.strategy]}")
        self._install(bag, None, int(scalars.get(b"events", 0)))

    def _scalar_entries(self) -> list[Entry]:
        return [
            ("s", b"events", orjson.dumps(self.events)),
            ("s", b"query", orjson.dumps([self.query, self.strategy])),
        ]


def _bag_key(rel: str, vals: tuple[Any, ...]) -> bytes:
    return orjson.dumps([rel, *snap.encode_row(vals)])


def create_engine(query: str, strategy: str = "rpai", params: Mapping[str, Any] | None = None) -> VwapEngine:
    return VwapEngine(query, strategy, params)
