"""Strategy ``auto``: the plan with the least estimated cost per batch for the query, the observed batch
size and the live domain (docs/vwap/algorithm.md §6.5).

Every strategy gives the same exact answer, so the choice only moves cost. The estimate of a strategy
is ``move · units · (lg D if it walks a tree) + read · term(D)`` µs per batch: *units* are the events of
a batch, or the distinct domain values it touches for the plans that take a batch netted per level
(§3.6); *term* is the strategy's per-answer complexity from §8.2; D is the number of live domain
values (price levels of both sides; distinct volumes for PSP). The coefficients were fitted on the
finance trace (``bench/vwap.py``); only their ratios matter. ``recompute`` is never a candidate: it reads
the same nested loops as ``dbtoaster`` over tuples instead of levels and keeps no incremental state,
so its estimate can never be the lower one.

Switching rebuilds the new plan from the live book, in one pass over the live tuples and one ascending
tree build (§3.5), so a switch must pay for itself. Another plan counts as
cheaper only when its estimate is below ``NEAR`` of the running plan's (a shape on the boundary does
not rebuild back and forth); then the difference per batch is added to a credit, and the plan
switches once the credit plus what staying would cost over the next ``HORIZON`` books' worth of events
covers the estimated rebuild. A large difference therefore switches at once, a small one only after
it has been paid for by the credit, as in ski rental; a batch on which the running plan is near the
cheapest clears the credit.

The decision is a pure function of integers the engine observes, so a replay that cuts its input into
the same batches makes the same choices, and a snapshot stores the choice, the observations and the
credit (§6.2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

REBUILD_US = 1.5  # µs per live tuple to build a plan from the live book (§3.5), on the trace
SWITCH_US = 100.0  # µs a switch costs whatever the book: a new plan, and keeping tiny books from flapping
NEAR = 0.85  # another plan counts as cheaper only when estimated below this fraction of the running one
HORIZON = 2  # a new shape is expected to last while this many books' worth of events arrive


@dataclass(frozen=True)
class Model:
    """One strategy's cost per batch: ``move`` per unit (a touched level if ``netted``, else an event),
    times lg D when ``tree``; ``read`` times ``term(D)`` once per batch."""

    move: float
    netted: bool
    tree: bool
    read: float
    term: Callable[[int], float]

    def cost(self, batch: int, touched: int, domain: int) -> float:
        units = touched if self.netted else batch
        lg = math.log2(domain + 2)
        return self.move * units * (lg if self.tree else 1.0) + self.read * self.term(domain)


def _lg(d: int) -> float:
    return math.log2(d + 2)


def _sq(d: int) -> float:
    return float(d * d)


def _lin(d: int) -> float:
    return float(d)


def _sq_plus(d: int) -> float:
    """D²·√D: the DBToaster-style loops of MST, SQ1 and SQ2 run over maps (brokers by price, bound keys)
    that grow with D as well, so their measured read grows as D^2.5 on the trace."""
    return float(d) ** 2.5


# µs per unit, fitted on the finance trace (docs/vwap/algorithm.md §6.5).
MODELS: dict[str, dict[str, Model]] = {
    "vwap": {
        "rpai": Model(0.6, True, True, 0.12, _lg),
        "crosscheck": Model(0.27, True, True, 0.15, _lg),
        "dbtoaster": Model(1.0, True, False, 0.045, _sq),
    },
    "nq1": {
        "rpai": Model(1.05, True, True, 0.43, _lg),
        "dbtoaster": Model(1.0, True, False, 0.085, _sq),
    },
    "nq2": {
        "rpai": Model(1.05, True, True, 0.2, lambda d: d * _lg(d)),
        "dbtoaster": Model(1.0, True, False, 0.059, lambda d: float(d) ** 3),
    },
    "mst": {
        "rpai": Model(1.9, False, True, 1.9, _lg),
        "dbtoaster": Model(1.8, False, False, 0.00029, _sq_plus),
    },
    "psp": {
        "rpai": Model(0.52, False, True, 0.9, _lg),
        "dbtoaster": Model(1.2, False, False, 0.057, _lin),
    },
    "sq1": {
        "rpai": Model(0.72, False, True, 0.5, _lin),
        "dbtoaster": Model(1.55, False, False, 0.002, _sq_plus),
    },
    "sq2": {
        "rpai": Model(0.75, False, True, 0.7, _lin),
        "dbtoaster": Model(1.5, False, False, 0.0018, _sq_plus),
    },
}
MODELS["vwap-paper"] = MODELS["vwap"]

# Where no model applies (Ex. 2.1 and TPC-H: no order book to measure a domain on), ``auto`` runs rpai,
# whose per-update cost is never asymptotically above the baselines' there (§8.2).
FIXED = "rpai"


def candidates(query: str) -> tuple[str, ...]:
    return tuple(MODELS.get(query, {FIXED: None}))  # type: ignore[dict-item]


def estimates(query: str, batch: int, touched: int, domain: int) -> dict[str, float]:
    """Estimated µs per batch of every candidate strategy (empty where no model applies)."""
    return {s: m.cost(batch, touched, domain) for s, m in MODELS.get(query, {}).items()}


def coarse(domain: int) -> int:
    """The domain size rounded down to its 6 leading bits (within 1/32): the estimates hardly move
    between neighbours, and a coarse input lets ``decide`` take most batches' estimates from a cache."""
    shift = max(0, domain.bit_length() - 6)
    return domain >> shift << shift


def coarse_range(domain: int) -> tuple[int, int]:
    """The domain sizes [lo, hi) that ``coarse`` maps to the same value as ``domain``."""
    shift = max(0, domain.bit_length() - 6)
    lo = domain >> shift << shift
    return lo, lo + (1 << shift)


@lru_cache(maxsize=4096)
def ranked(query: str, batch: int, touched: int, domain: int) -> tuple[tuple[str, float], ...]:
    """The candidates' estimates, cheapest first (ties by name), for a coarse domain size."""
    costs = estimates(query, batch, touched, domain)
    return tuple(sorted(costs.items(), key=lambda kv: (kv[1], kv[0])))


def rebuild_cost(tuples: int) -> float:
    """Estimated µs to build a plan from the live book: every plan reads the live tuples once and builds
    its trees in one ascending pass (or, for the DBToaster-style maps, adds each tuple once)."""
    return SWITCH_US + REBUILD_US * tuples


def decide(
    query: str, running: str | None, batch: int, touched: int, domain: int, tuples: int, credit: int
) -> tuple[str, str, int]:
    """The strategy to run next, why in one word, and the credit carried to the next batch.

    ``running`` is None when nothing is built yet (the cheapest estimate wins outright); ``tuples`` is
    the number of live tuples a rebuild would read; ``credit`` the estimated µs the running
    plan has cost beyond the cheapest since it last was near the cheapest. Words: ``fixed`` (no
    model), ``cheapest``, ``kept`` (the running plan is within ``NEAR`` of the cheapest, or the
    cheaper plan's rebuild is not paid for yet) or ``switched``. Called once per batch, so it formats
    nothing; ``explain`` turns the word into a sentence."""
    if query not in MODELS:
        return FIXED, "fixed", 0
    costs = ranked(query, batch, touched, coarse(domain))
    best, low = costs[0]
    if running is None or best == running or running not in MODELS[query]:
        return best, "cheapest", 0
    here = next(c for s, c in costs if s == running)
    if low >= NEAR * here:
        return running, "kept", 0
    excess = here - low
    credit += int(excess)
    ahead = excess * HORIZON * tuples / max(batch, 1)  # what staying would cost while the shape lasts
    if credit + ahead >= rebuild_cost(tuples):
        return best, "switched", 0
    return running, "kept", credit


def explain(query: str, running: str, why: str, batch: int, touched: int, domain: int) -> str:
    """A sentence for a choice: the shape it was made at and the estimates it compared."""
    if why == "fixed":
        return f"{query} has no cost model: {running}"
    costs = estimates(query, batch, touched, domain)
    shown = ", ".join(f"{s} {c:,.0f}" for s, c in sorted(costs.items(), key=lambda kv: kv[1]))
    shape = f"batch {batch}, {touched} touched, domain {domain}"
    return f"{running} ({why}) at {shape}; estimated µs per batch: {shown}"
