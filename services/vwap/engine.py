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

from services.vwap import auto
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
        # ``auto`` (docs/algorithms/vwap.md §6.5): the strategy running now, the observed shape of the
        # batches (smoothed integers, part of the state so a restore decides as the original would) and
        # the live domain values the cost model counts.
        self.auto = strategy == "auto"
        self.running, self._why = auto.choose(query, None, 1, 1, 0) if self.auto else (strategy, "")
        self.shape: list[int] = [0, 0]  # smoothed events and distinct domain values touched per batch
        self.switches = 0
        self._domain_col = "volume" if query == "psp" else "price"
        self._domain: dict[tuple[str, Any], int] = {}
        self.plan = make_plan(query, self.running, self.params)
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
        # ``auto`` counts the domain values each batch touches; the netted levels already are that count
        # when the domain is the price, so a separate tally is kept only otherwise.
        tally: dict[tuple[str, Any], int] | None = None
        if self.auto and book and (netted is None or self._domain_col != "price"):
            tally = {}
        domain_col = self._domain_col
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
                if tally is not None and rel in reads:
                    dk = (rel, row[domain_col])
                    tally[dk] = tally.get(dk, 0) + delta
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
        valid = len(events) - len(rejections)
        self.events += valid
        self.rejected += len(rejections)
        self.live_tuples += net
        if self.auto and valid:
            self._observe(valid, tally, netted)
        return rejections

    # --- strategy auto (docs/algorithms/vwap.md §6.5) -------------------------------------------------

    @property
    def auto_reason(self) -> str:
        """Why the running plan runs, in words (the gauges of ``stats()`` carry the same as numbers)."""
        if not self.auto:
            return f"strategy {self.strategy} configured"
        batch, touched = self.shape
        return auto.explain(self.query, self.running, self._why, batch, touched, len(self._domain))

    def _observe(
        self,
        valid: int,
        tally: Mapping[tuple[str, Any], int] | None,
        netted: Mapping[str, Mapping[Any, list[Any]]] | None,
    ) -> None:
        """Fold one batch into the observed shape, then run the plan the cost model picks for it. The
        domain changes come from ``tally`` ((relation, value) -> Δcount) or, when the domain is the
        price, from the netted levels."""
        touched = valid
        domain = self._domain
        if tally is not None:
            touched = len(tally)
            for dk, dc in tally.items():
                c = domain.get(dk, 0) + dc
                if c:
                    domain[dk] = c
                else:
                    domain.pop(dk, None)  # emptied, or created and emptied within the batch
        elif netted is not None:
            touched = 0
            for rel, levels in netted.items():
                touched += len(levels)
                for p, acc in levels.items():
                    dk = (rel, p)
                    c = domain.get(dk, 0) + acc[0]
                    if c:
                        domain[dk] = c
                    else:
                        domain.pop(dk, None)
        shape = self.shape
        if shape[0] == 0:
            shape[0], shape[1] = valid, touched
        else:  # an integer moving average, so a replay of the same batches computes the same numbers
            shape[0] = (3 * shape[0] + valid + 2) // 4
            shape[1] = (3 * shape[1] + touched + 2) // 4
        self._decide()

    def _decide(self) -> None:
        batch, touched = self.shape
        nxt, self._why = auto.choose(self.query, self.running, batch, touched, len(self._domain))
        if nxt != self.running:
            self.running = nxt
            self.plan = self._build_plan(nxt, self.bag, None)  # rebuilt from the live book: exact
            self.switches += 1

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
        if self.auto:
            # The choice and its reason: one gauge per candidate that is 1 for the running plan, the
            # estimates it was chosen on (µs per batch), and the shape they were computed for.
            costs = auto.estimates(self.query, self.shape[0], self.shape[1], len(self._domain))
            for name in auto.candidates(self.query):
                out[f"auto_running_{name}"] = float(name == self.running)
                if name in costs:
                    out[f"auto_estimate_{name}_us"] = costs[name]
            out["auto_batch_events"] = float(self.shape[0])
            out["auto_batch_touched"] = float(self.shape[1])
            out["auto_domain"] = float(len(self._domain))
            out["auto_switches"] = float(self.switches)  # since this process started
        return out

    def snapshot(self) -> bytes:
        levels = None
        if self.info.book:
            levels = {rel: snap.book_levels(self.bag[rel], self._columns[rel]) for rel in ("bids", "asks")}
        counters = {"events": self.events}
        choice = self._auto_state() if self.auto else None
        return snap.encode(self.query, self.strategy, self.bag, levels, counters, choice)

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
        self._install(bag, levels, int(state["counters"].get("events", 0)), state["auto"])

    def _auto_state(self) -> list[Any]:
        return [self.running, *self.shape]

    def _build_plan(
        self,
        strategy: str,
        bag: Mapping[str, Mapping[tuple[Any, ...], int]],
        levels: Mapping[str, list[snap.Level]] | None,
    ) -> Any:
        """A plan of ``strategy`` holding ``bag``: from the price levels in one ascending pass where the
        plan can (docs/algorithms/vwap.md §3.5), else by replaying the bag's tuples."""
        plan = make_plan(self.query, strategy, self.params)
        with exact_context():
            if self.info.book and hasattr(plan, "load_levels"):
                if levels is None:
                    levels = {rel: snap.book_levels(bag[rel], self._columns[rel]) for rel in ("bids", "asks")}
                plan.load_levels(levels)
            else:
                for rel in self.info.reads:
                    cols = self._columns[rel]
                    for vals, m in bag[rel].items():
                        plan.update(rel, dict(zip(cols, vals, strict=True)), m)
        return plan

    def _install(
        self,
        bag: dict[str, dict[tuple[Any, ...], int]],
        levels: Mapping[str, list[snap.Level]] | None,
        events: int,
        choice: Sequence[Any] | None = None,
    ) -> None:
        """Make ``bag`` the state: the plan is derived from it (docs/algorithms/vwap.md §6.2); under
        ``auto`` the stored choice and shape come back as they were, so decisions continue unchanged."""
        if self.auto:
            self._domain = self._domain_of(bag)
            if choice is None:  # a state written without a choice (a bootstrap): decide from the book
                self.shape = [0, 0]
                self.running, self._why = auto.choose(self.query, None, 1, 1, len(self._domain))
            else:
                running, batch, touched = choice
                if running not in auto.candidates(self.query):
                    raise EngineError(f"stored auto choice {running!r} is not a candidate for {self.query}")
                self.running, self.shape = running, [int(batch), int(touched)]
                self._why = "restored"
        self.plan = self._build_plan(self.running, bag, levels)
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
        self._install(bag, None, int(scalars.get(b"events", 0)), scalars.get(b"auto"))

    def _scalar_entries(self) -> list[Entry]:
        out = [
            ("s", b"events", orjson.dumps(self.events)),
            ("s", b"query", orjson.dumps([self.query, self.strategy])),
        ]
        if self.auto:
            out.append(("s", b"auto", orjson.dumps(self._auto_state())))
        return out

    def _domain_of(self, bag: Mapping[str, Mapping[tuple[Any, ...], int]]) -> dict[tuple[str, Any], int]:
        """Live domain values of the relations the query reads, with their tuple counts."""
        out: dict[tuple[str, Any], int] = {}
        if not self.info.book:
            return out
        for rel in self.info.reads:
            i = self._columns[rel].index(self._domain_col)
            for vals, m in bag[rel].items():
                dk = (rel, vals[i])
                out[dk] = out.get(dk, 0) + m
        return out


def _bag_key(rel: str, vals: tuple[Any, ...]) -> bytes:
    return orjson.dumps([rel, *snap.encode_row(vals)])


def create_engine(query: str, strategy: str = "rpai", params: Mapping[str, Any] | None = None) -> VwapEngine:
    return VwapEngine(query, strategy, params)
