"""Strategy ``auto``: the plan with the least estimated cost per batch for the query, the observed batch
size and the live domain (docs/algorithms/vwap.md §6.5).

Every strategy gives the same exact answer, so the choice only moves cost. The estimate of a strategy
is ``move · units · (lg D if it walks a tree) + read · term(D)`` µs per batch: *units* are the events of
a batch, or the distinct domain values it touches for the plans that take a batch netted per level
(§3.6); *term* is the strategy's per-answer complexity from §8.2; D is the number of live domain
values (price levels of both sides; distinct volumes for PSP). The coefficients were fitted on the
finance trace (``bench/vwap.py``); only their ratios matter. ``recompute`` is never a candidate: it reads
the same nested loops as ``dbtoaster`` over tuples instead of levels and keeps no incremental state,
so its estimate can never be the lower one.

The decision is a pure function of integers the engine observes, so a replay that cuts its input into
the same batches makes the same choices, and a snapshot stores the choice and the observations
(§6.2). A switch needs the other plan to be estimated at most ``SWITCH_RATIO`` of the running one's
cost, so a shape on the boundary does not rebuild the plan back and forth.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

SWITCH_RATIO = 0.7  # switch only to a plan estimated at most this fraction of the running plan's cost


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


# µs per unit, fitted on the finance trace (docs/algorithms/vwap.md §6.5).
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
        "rpai": Model(1.7, False, True, 1.5, _lg),
        "dbtoaster": Model(1.5, False, False, 0.02, _sq),
    },
    "psp": {
        "rpai": Model(0.45, False, True, 0.6, _lg),
        "dbtoaster": Model(0.75, False, False, 0.105, _lin),
    },
    "sq1": {
        "rpai": Model(0.95, False, True, 0.67, _lin),
        "dbtoaster": Model(1.0, False, False, 0.08, _sq),
    },
    "sq2": {
        "rpai": Model(1.25, False, True, 1.1, _lin),
        "dbtoaster": Model(1.0, False, False, 0.09, _sq),
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
    """The domain size rounded down to its 4 leading bits (within 1/8): the estimates hardly move
    between neighbours, and a coarse input lets ``choose`` answer most batches from its cache."""
    shift = max(0, domain.bit_length() - 4)
    return domain >> shift << shift


def choose(query: str, running: str | None, batch: int, touched: int, domain: int) -> tuple[str, str]:
    """The strategy to run next given the running one (None: nothing built yet), and why in one word:
    ``fixed`` (no model), ``cheapest``, ``switched`` or ``kept`` (by the hysteresis). Called once per
    batch, so it formats nothing and is a pure function of coarse inputs, cached; ``explain`` turns the
    word into a sentence."""
    return _choose(query, running, batch, touched, coarse(domain))


@lru_cache(maxsize=4096)
def _choose(query: str, running: str | None, batch: int, touched: int, domain: int) -> tuple[str, str]:
    models = MODELS.get(query)
    if models is None:
        return FIXED, "fixed"
    best = ""
    low = running_cost = float("inf")
    for name, model in models.items():
        c = model.cost(batch, touched, domain)
        if c < low:
            best, low = name, c
        if name == running:
            running_cost = c
    if running is None or running not in models:
        return best, "cheapest"
    if best != running and low <= SWITCH_RATIO * running_cost:
        return best, "switched"
    return running, "kept"


def explain(query: str, running: str, why: str, batch: int, touched: int, domain: int) -> str:
    """A sentence for a choice: the shape it was made at and the estimates it compared."""
    if why == "fixed":
        return f"{query} has no cost model: {running}"
    costs = estimates(query, batch, touched, domain)
    shown = ", ".join(f"{s} {c:,.0f}" for s, c in sorted(costs.items(), key=lambda kv: kv[1]))
    shape = f"batch {batch}, {touched} touched, domain {domain}"
    return f"{running} ({why}) at {shape}; estimated µs per batch: {shown}"
