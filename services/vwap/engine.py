"""The vwap engine: a validating bag ledger in front of one query plan (RPAI or a baseline).

The ledger is what makes every strategy see the same, valid stream: deletes of tuples that are not
live and order-book tuples with non-positive volume (they break the monotonicity the RPAI shifts rely
on, docs/vwap/algorithm.md §9.5) are refused with a reason and change nothing. The plan is derived
state: a snapshot is the ledger (plus per-price levels of the book sides), and a restore rebuilds the
plan from it (§6.1, §6.2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import orjson

from ivmstream.sdk import (
    EngineError,
    Entry,
    EntryChange,
    EventColumns,
    Rejection,
    RelationColumns,
    UpdateEvent,
)
from ivmstream.services.vwap import auto, columnar, kernels
from ivmstream.services.vwap import snapshot as snap
from ivmstream.services.vwap.catalog import QUERIES, QueryInfo
from ivmstream.services.vwap.exact import exact_context
from ivmstream.services.vwap.options import params_of
from ivmstream.services.vwap.plans import make_plan
from ivmstream.services.vwap.trees.rpai import black_height


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
        self._read_order = tuple(info.reads)
        self.brokers: int | None = self.params.get("brokers") if query == "mst" else None
        self.bag: dict[str, dict[tuple[Any, ...], int]] = {name: {} for name in self.relations}
        # ``auto`` (docs/vwap/algorithm.md §6.5): the strategy running now, the observed shape of the
        # batches (smoothed integers) and the credit towards a switch, all part of the state so a restore
        # decides as the original would. The live domain is counted by the running plan (``domain()``).
        self.auto = strategy == "auto"
        self.running, self._why = strategy, ""
        if self.auto:
            self.running, self._why, _ = auto.decide(query, None, 1, 1, 0, 0, 0)
        self.shape: list[int] = [0, 0]  # smoothed events and distinct domain values touched per batch
        self.credit = 0  # estimated µs the running plan cost beyond the cheapest (auto.decide)
        self._settled = (0, 0)  # the coarse domain range of a decision that left no credit (_observe)
        self.switches = 0
        self._domain_col = "volume" if query == "psp" else "price"
        self._modelled = self.auto and query in auto.MODELS
        self.plan = make_plan(query, self.running, self.params)
        self._domain = _domain_counter(self.plan)
        self.events = 0
        self.rejected = 0
        self.live_tuples = 0  # the bag's total multiplicity, kept so stats() need not sum the bag
        self._changed: kernels.Touched = {}  # per relation, the bag tuples touched since a checkpoint
        self._rejections: list[Rejection] = []  # the refusals of the batch being applied
        self._logging = False  # whether ``_changed`` is kept past a batch: once a checkpoint took the state

    # --- Engine protocol -------------------------------------------------------------------------------

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        rejections: list[Rejection] = []
        self._rejections = rejections
        book = self.info.book
        # Under ``auto``, a batch that starts on an empty book goes to the ledger alone, and the plan the
        # cost model picks for the book it leaves is then built from that book (docs/vwap/algorithm.md
        # §6.5): the first batch is not paid for twice, once in a plan chosen blind and once in a rebuild.
        deferred = self._modelled and not self.live_tuples
        held: list[tuple[str, Any, int]] = []  # a deferred batch's valid updates, for plans built by replay
        # Plans with ``apply_levels`` take the batch netted per price level (docs/vwap/algorithm.md §3.6):
        # the ledger still checks every event in order, the plan moves once per level touched. A deferred
        # batch of a price-domain query is netted too: from an empty book its levels are the book's.
        netted: dict[str, dict[Any, list[Any]]] | None = None
        if deferred:
            update = None if self._domain_col == "price" else _held_update(held)
        else:
            update = self.plan.update
        if book and (update is None or (not deferred and hasattr(self.plan, "apply_levels"))):
            netted = {rel: {} for rel in self._read_order}
        with exact_context():
            # Touched tuples are only logged once a checkpoint took the state (``_logging``); before that
            # the log would be cleared at the end of the batch.
            changed = self._changed if self._logging else None
            net = kernels.ledger_pass(
                events,
                self.bag,
                self._columns,
                self._reads,
                netted,
                update,
                changed,
                book,
                self.brokers if book else None,
                self._reject,
            )
            if netted is not None and not deferred:
                self._move_plan(netted)
        self._finish(len(events), net, deferred, netted, held)
        return rejections

    def apply_columns(self, batch: EventColumns) -> list[Rejection]:
        """``apply`` of a batch given as columns (``ColumnarEngine``): each relation's rows go through
        the ledger loop read from the columns (``kernels.ledger_columns``), with no event or row dict
        per row. The ledger changes, change log, netted levels and refusals equal ``apply``'s: relations
        touch disjoint ledgers and levels, and a relation's rows keep their batch order. A batch the plan
        must see row by row (no netting) goes to ``apply`` as events."""
        book = self.info.book
        deferred = self._modelled and not self.live_tuples
        if not book or not (
            (deferred and self._domain_col == "price")
            or (not deferred and hasattr(self.plan, "apply_levels"))
        ):
            return self.apply(columnar.events_of(batch))
        rejections: list[Rejection] = []
        self._rejections = rejections
        netted: dict[str, dict[Any, list[Any]]] = {rel: {} for rel in self._read_order}
        changed = self._changed if self._logging else None
        fresh = [] if changed is None else [rel for rel in batch.relations if rel not in changed]
        net = 0
        with exact_context():
            for rel, part in batch.relations.items():
                names = self._columns.get(rel)
                lists = [] if names is None else [part.columns[c] for c in names]
                reject = self._column_rejecter(rel, part)
                net += kernels.ledger_columns(
                    rel,
                    part.deltas,
                    lists,
                    self.bag,
                    self._columns,
                    self._reads,
                    netted,
                    changed,
                    book,
                    self.brokers,
                    reject,
                )
            if len(batch.relations) > 1:
                rejections.sort()  # in batch order, as ``apply`` returns them
                if changed is not None and len(fresh) > 1:
                    columnar.log_in_batch_order(changed, fresh, batch, rejections)
            if not deferred:
                self._move_plan(netted)
        self._finish(batch.size, net, deferred, netted, [])
        return rejections

    def _column_rejecter(self, rel: str, part: RelationColumns) -> kernels.RowReject:
        """``ledger_columns``' ``reject`` for relation ``rel``'s rows: the refusal of row i, named by its
        position in the batch, its reason from the row as ``apply`` sees it."""
        positions, deltas, columns = part.positions, part.deltas, part.columns

        def reject(i: int, _event: Any, have: Any) -> None:
            row = {name: values[i] for name, values in columns.items()}
            self._reject(positions[i], UpdateEvent(rel, row, deltas[i], None), have)

        return reject

    def _move_plan(self, netted: Mapping[str, dict[Any, list[Any]]]) -> None:
        """The plan moved once per netted price level of the batch."""
        for rel, changes in netted.items():
            if changes:
                self.plan.apply_levels(rel, changes)

    def _finish(
        self,
        size: int,
        net: int,
        deferred: bool,
        netted: dict[str, dict[Any, list[Any]]] | None,
        held: Sequence[tuple[str, Any, int]],
    ) -> None:
        """After the ledger loop of a batch of ``size`` events: the counters, ``auto``'s observation (or
        the first plan of a deferred batch) and the change log's reset."""
        rejections = self._rejections
        valid = size - len(rejections)
        self.events += valid
        self.rejected += len(rejections)
        self.live_tuples += net
        if self._modelled and valid:
            if deferred and netted is not None:
                self._start_from_levels(valid, netted)
            elif deferred:
                self._start_from_book(valid, held)
            else:
                touched = valid
                if netted is not None:
                    touched = 0
                    for levels in netted.values():
                        touched += len(levels)
                self._observe(valid, touched)
        if not self._logging:
            self._changed.clear()

    def _reject(self, i: int, ev: UpdateEvent, have: Any) -> None:
        """The ledger loop's ``reject``: the refusal of event i of the batch, with its reason (``have``: the
        live copies of a tuple deleted more often than it is live)."""
        rel, row = ev.relation, ev.row
        rejections = self._rejections
        if have is not None:
            detail = f"delete of {-ev.delta} {rel} tuple(s) {dict(row)} but {have} live"
            rejections.append(Rejection(i, "absent-tuple", detail))
        elif rel not in self.bag:
            rejections.append(Rejection(i, "unknown-relation", f"query {self.query} has no {rel!r}"))
        else:
            reason = self._check_book_row(row)
            if reason is None:
                raise EngineError(f"the ledger refused a valid {rel} row {dict(row)}")
            rejections.append(Rejection(i, reason[0], reason[1]))

    # --- strategy auto (docs/vwap/algorithm.md §6.5) -------------------------------------------------

    @property
    def auto_reason(self) -> str:
        """Why the running plan runs, in words (the gauges of ``stats()`` carry the same as numbers)."""
        if not self.auto:
            return f"strategy {self.strategy} configured"
        batch, touched = self.shape
        return auto.explain(self.query, self.running, self._why, batch, touched, self._domain())

    def _smooth(self, valid: int, touched: int) -> bool:
        """Move the observed shape a quarter of the way to this batch's, rounded towards it (so a steady
        batch size is reached exactly); integers, so a replay computes the same numbers. Whether it
        moved."""
        shape = self.shape
        if shape[0] == 0:
            shape[0], shape[1] = valid, touched
            return True
        old = (shape[0], shape[1])
        shape[0] = _towards(shape[0], valid)
        shape[1] = _towards(shape[1], touched)
        return old != (shape[0], shape[1])

    def _observe(self, valid: int, touched: int) -> None:
        """Fold one batch into the observed shape, then run the plan the cost model picks for it.

        When the last decision left no credit, the batch has the shape already observed (so the shape
        does not move) and the domain stayed in the coarse range it was decided on, the decision would
        come out the same: it is skipped, which keeps the cost of ``auto`` over the plan it runs small at
        one event per batch."""
        shape = self.shape
        if valid == shape[0] and touched == shape[1]:
            lo, hi = self._settled
            domain = self._domain()
            if lo <= domain < hi:
                return
        else:
            self._smooth(valid, touched)
            domain = self._domain()
        self._decide(domain, self.live_tuples)

    def _decide(self, domain: int, tuples: int) -> None:
        batch, touched = self.shape
        nxt, self._why, self.credit = auto.decide(
            self.query, self.running, batch, touched, domain, tuples, self.credit
        )
        if nxt != self.running:
            self.running = nxt
            self.plan = self._build_plan(nxt, self.bag, None)  # rebuilt from the live book: exact
            self._domain = _domain_counter(self.plan)
            self.switches += 1
        self._settled = auto.coarse_range(domain) if self.credit == 0 else (0, 0)

    def _start_from_book(self, valid: int, held: Sequence[tuple[str, Any, int]]) -> None:
        """After a batch that started on an empty book and went to the ledger alone: the plan the model
        picks for the book it left, built from that book, or, for a plan with no bulk build, fed the
        batch's valid updates (in order, from an empty book they give the same state, without the
        per-tuple rows a replay of the bag would make)."""
        domain = self._count_domain(self.bag)
        self._smooth(valid, domain)  # every level of the batch is new
        batch, touched = self.shape
        self.running, self._why, self.credit = auto.decide(self.query, None, batch, touched, domain, 0, 0)
        plan = make_plan(self.query, self.running, self.params)
        if hasattr(plan, "load_levels") or hasattr(plan, "load_bag"):
            plan = self._build_plan(self.running, self.bag, None)
        else:
            with exact_context():
                for rel, row, delta in held:
                    plan.update(rel, row, delta)
        self.plan = plan
        self._domain = _domain_counter(plan)
        self._settled = auto.coarse_range(domain)

    def _start_from_levels(self, valid: int, netted: Mapping[str, Mapping[Any, list[Any]]]) -> None:
        """``_start_from_book`` for a batch netted per price level from an empty book: the levels left
        with live tuples are the book's levels (count, W, and PV = price·W), so the plan is built from them
        or fed them, without a pass over the book's tuples (a plan with ``load_netted`` takes them as they
        are and sorts them itself)."""
        domain = sum(1 for changes in netted.values() for acc in changes.values() if acc[0])
        self._smooth(valid, domain)  # every level of the batch is new
        batch, touched = self.shape
        self.running, self._why, self.credit = auto.decide(self.query, None, batch, touched, domain, 0, 0)
        plan = make_plan(self.query, self.running, self.params)
        with exact_context():
            if hasattr(plan, "load_netted") and plan.load_netted(netted):
                self._install_started(plan, domain)
                return
            live = {
                rel: sorted((p, acc) for p, acc in changes.items() if acc[0])
                for rel, changes in netted.items()
            }
            if hasattr(plan, "load_levels"):
                levels = {rel: [(p, dw, dc, p * dw) for p, (dc, dw) in lv] for rel, lv in live.items()}
                for rel in ("bids", "asks"):
                    if rel not in levels:
                        levels[rel] = snap.book_levels(self.bag[rel], self._columns[rel])
                plan.load_levels(levels)
            elif hasattr(plan, "apply_levels"):
                for rel, lv in live.items():
                    if lv:
                        plan.apply_levels(rel, dict(lv))
            else:
                plan = self._build_plan(self.running, self.bag, None)
        self._install_started(plan, domain)

    def _install_started(self, plan: Any, domain: int) -> None:
        """Run ``plan``, built for the first batch, on a domain of ``domain`` values."""
        self.plan = plan
        self._domain = _domain_counter(plan)
        self._settled = auto.coarse_range(domain)

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
            domain = self._domain()
            costs = auto.estimates(self.query, self.shape[0], self.shape[1], domain)
            for name in auto.candidates(self.query):
                out[f"auto_running_{name}"] = float(name == self.running)
                if name in costs:
                    out[f"auto_estimate_{name}_us"] = costs[name]
            out["auto_batch_events"] = float(self.shape[0])
            out["auto_batch_touched"] = float(self.shape[1])
            out["auto_domain"] = float(domain)
            out["auto_credit_us"] = float(self.credit)
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
        self._logging = False  # whole snapshots: no change log until a checkpoint takes entries

    def _auto_state(self) -> list[Any]:
        return [self.running, *self.shape, self.credit]

    def _build_plan(
        self,
        strategy: str,
        bag: Mapping[str, Mapping[tuple[Any, ...], int]],
        levels: Mapping[str, list[snap.Level]] | None,
    ) -> Any:
        """A plan of ``strategy`` holding ``bag``: from the price levels in one ascending pass where the
        plan can (docs/vwap/algorithm.md §3.5), else from the live tuples in one pass where it can, else
        by replaying the bag's tuples."""
        plan = make_plan(self.query, strategy, self.params)
        with exact_context():
            if self.info.book and hasattr(plan, "load_levels"):
                if levels is None:
                    levels = {rel: snap.book_levels(bag[rel], self._columns[rel]) for rel in ("bids", "asks")}
                plan.load_levels(levels)
            elif self.info.book and hasattr(plan, "load_bag"):
                plan.load_bag({rel: bag[rel] for rel in self.info.reads}, self._columns)
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
        """Make ``bag`` the state: the plan is derived from it (docs/vwap/algorithm.md §6.2); under
        ``auto`` the stored choice and shape come back as they were, so decisions continue unchanged."""
        if self.auto:
            self.credit = 0
            self._settled = (0, 0)
            if choice is None:  # a state written without a choice (a bootstrap): decide from the book
                self.shape = [0, 0]
                domain = self._count_domain(bag)
                self.running, self._why, _ = auto.decide(self.query, None, 1, 1, domain, 0, 0)
            else:
                if len(choice) != 4:
                    raise EngineError(
                        f"stored auto choice {list(choice)!r} is not [strategy, events, touched, credit]"
                    )
                running, batch, touched, credit = choice
                if running not in auto.candidates(self.query):
                    raise EngineError(f"stored auto choice {running!r} is not a candidate for {self.query}")
                self.running, self.shape, self.credit = running, [int(batch), int(touched)], int(credit)
                self._why = "restored"
        self.plan = self._build_plan(self.running, bag, levels)
        self._domain = _domain_counter(self.plan)
        self.bag = bag
        self.live_tuples = sum(sum(b.values()) for b in bag.values())
        self.events = events
        self.rejected = 0
        self._changed.clear()

    # --- incremental state (ivmstream.engine.IncrementalEngine, docs/vwap/algorithm.md §6.2) ----------
    # Map "b": one entry per live bag tuple, key [relation, col1, ..., colN] (exact JSON), value its
    # multiplicity. Map "s": the event counter and the query/strategy the entries belong to. The plan's
    # trees are a function of the bag and are rebuilt on restore, as from a snapshot.

    def pending_changes(self) -> int:
        return sum(len(touched) for touched in self._changed.values())

    def changed_entries(self) -> list[EntryChange]:
        """The bag tuples touched since the previous call; at the first call every entry."""
        if not self._logging:
            self._changed.clear()
            return list(self.all_entries())
        out: list[EntryChange] = []
        bag = self.bag
        for rel, touched in self._changed.items():
            out += kernels.bag_entries(bag[rel], rel, touched)
        self._changed.clear()
        out.extend(self._scalar_entries())
        return out

    def all_entries(self) -> Iterator[Entry]:
        """Every entry; touched tuples are recorded from now on (a checkpoint is taking the state)."""
        self._logging = True
        return self._entries()

    def _entries(self) -> Iterator[Entry]:
        for rel in sorted(self.bag):
            # every tuple of the ledger is live, so no value is None
            yield from cast(list[Entry], kernels.bag_entries(self.bag[rel], rel, None))
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
        self._logging = True

    def _scalar_entries(self) -> list[Entry]:
        out = [
            ("s", b"events", orjson.dumps(self.events)),
            ("s", b"query", orjson.dumps([self.query, self.strategy])),
        ]
        if self.auto:
            out.append(("s", b"auto", orjson.dumps(self._auto_state())))
        return out

    def _count_domain(self, bag: Mapping[str, Mapping[tuple[Any, ...], int]]) -> int:
        """Live domain values of the relations the query reads (no plan needed)."""
        if not self.info.book:
            return 0
        count = 0
        for rel in self.info.reads:
            i = self._columns[rel].index(self._domain_col)
            count += len({vals[i] for vals in bag[rel]})
        return count


def _held_update(held: list[tuple[str, Any, int]]) -> Callable[[str, Any, int], None]:
    """An ``update`` that keeps the updates for later."""

    def hold(rel: str, row: Any, delta: int) -> None:
        held.append((rel, row, delta))

    return hold


def _domain_counter(plan: Any) -> Callable[[], int]:
    """The plan's count of live domain values (docs/vwap/algorithm.md §6.5), or 0 where it keeps none."""
    return getattr(plan, "domain", _no_domain)


def _no_domain() -> int:
    return 0


def _towards(old: int, seen: int) -> int:
    """old + (seen - old) / 4, rounded away from old: it reaches a steady ``seen`` exactly."""
    d = seen - old
    return old + (d + 3) // 4 if d > 0 else old - (3 - d) // 4


def create_engine(query: str, strategy: str = "rpai", params: Mapping[str, Any] | None = None) -> VwapEngine:
    return VwapEngine(query, strategy, params)


def make_engine(options: Mapping[str, Any]) -> VwapEngine:
    """The service's engine factory: an empty engine for complete, validated options."""
    return VwapEngine(options["query"], options["strategy"], params_of(options))
