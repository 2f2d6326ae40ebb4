"""The paper's relational workloads (§6.1) on generated data: TPC-DS-shaped QX, QY, QZ and an LDBC-like
BI Q10, with the paper's keys and streaming order.

Each workload is ``(query options, preload events, streamed events)``. As in the paper (after SJoin's
stream generators), the small dimension tables (date_dim and household_demographics; LDBC's Tag,
TagClass, City and Country) are loaded before the stream; the other tables arrive interleaved at
random, a store_returns row only after its store_sales row. Keys are the tables' primary keys, so the
``-opt`` strategies merge the foreign-key joins (§2.8). Columns that join carry one name across
relations (the natural join); the sizes scale with ``scale`` (1.0: about 6,000 streamed rows). The value
distributions are skewed (customers, items and tags by a Zipf-like weight), not TPC-DS's or LDBC's
exact ones: the shapes and keys are the paper's, the data is ours.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from typing import Any

from ivmstream.events import UpdateEvent

Workload = tuple[dict[str, Any], list[UpdateEvent], list[UpdateEvent]]


def _zipf(n: int, s: float = 1.0) -> list[float]:
    """Cumulative Zipf-like weights over ``n`` values, for ``_draw``."""
    total, cum = 0.0, []
    for i in range(n):
        total += (i + 1) ** -s
        cum.append(total)
    return [c / total for c in cum]


def _draw(rng: random.Random, cum: Sequence[float]) -> int:
    return min(bisect.bisect_left(cum, rng.random()), len(cum) - 1)


def _ev(rel: str, cols: Sequence[str], row: Sequence[Any]) -> UpdateEvent:
    return UpdateEvent(rel, dict(zip(cols, row, strict=True)), 1)


def _sales(rng: random.Random, n: int, items: int, customers: int) -> list[tuple[int, int, int]]:
    """Distinct (item, ticket, customer) store_sales rows: a ticket holds 1-8 items of one customer."""
    icum, ccum = _zipf(items), _zipf(customers)
    rows: list[tuple[int, int, int]] = []
    ticket = 0
    while len(rows) < n:
        ticket += 1
        cust = _draw(rng, ccum)
        for item in {_draw(rng, icum) for _ in range(rng.randint(1, 8))}:
            rows.append((item, ticket, cust))
    return rows[:n]


def _interleave(rng: random.Random, *streams: list[UpdateEvent]) -> list[UpdateEvent]:
    """A uniform interleaving that keeps each stream's own order."""
    tags = [i for i, s in enumerate(streams) for _ in s]
    rng.shuffle(tags)
    its = [iter(s) for s in streams]
    return [next(its[i]) for i in tags]


def qx(scale: float, k: int, strategy: str, seed: int = 1) -> Workload:
    """store_sales ⋈ store_returns (item, ticket) ⋈ catalog_sales (returning customer = billed customer,
    many-to-many) ⋈ date_dim d1 (sold date) ⋈ date_dim d2 (catalog sold date)."""
    rng = random.Random(seed)
    dates, items, customers = 730, max(20, int(400 * scale)), max(20, int(300 * scale))
    query = {
        "relations": {
            "SS": ["item", "ticket", "ss_date"],
            "SR": ["item", "ticket", "cust"],
            "CS": ["cs_item", "cs_order", "cust", "cs_date"],
            "D1": ["ss_date", "d1_year"],
            "D2": ["cs_date", "d2_year"],
        },
        "aliases": {"D1": "date_dim", "D2": "date_dim"},
        "base_columns": {"date_dim": ["d_date_sk", "d_year"]},
        "keys": {
            "SS": ["item", "ticket"],
            "SR": ["item", "ticket"],
            "CS": ["cs_item", "cs_order"],
            "D1": ["ss_date"],
            "D2": ["cs_date"],
        },
        "k": k,
        "strategy": strategy,
    }
    preload = [_ev("date_dim", ["d_date_sk", "d_year"], (d, 2000 + d // 365)) for d in range(dates)]
    sales = _sales(rng, int(3000 * scale), items, customers)
    ss, sr = [], []
    ccum = _zipf(customers)
    for item, ticket, _ in sales:
        ss.append(_ev("SS", ["item", "ticket", "ss_date"], (item, ticket, rng.randrange(dates))))
        if rng.random() < 0.3:
            sr.append(_ev("SR", ["item", "ticket", "cust"], (item, ticket, _draw(rng, ccum))))
    cs = [
        _ev(
            "CS",
            ["cs_item", "cs_order", "cust", "cs_date"],
            (rng.randrange(items), o, _draw(rng, ccum), rng.randrange(dates)),
        )
        for o in range(int(2000 * scale))
    ]
    # a return after its sale: returns keep their order and trail the sales by a random lag
    stream = _interleave(rng, ss, cs)
    pos = {(e.row["item"], e.row["ticket"]): i for i, e in enumerate(stream) if e.relation == "SS"}
    placed = sorted(
        ((pos[(r.row["item"], r.row["ticket"])] + rng.randrange(1, 200), j) for j, r in enumerate(sr))
    )
    out: list[UpdateEvent] = []
    nxt = 0
    for i, ev in enumerate(stream):
        out.append(ev)
        while nxt < len(placed) and placed[nxt][0] <= i:
            out.append(sr[placed[nxt][1]])
            nxt += 1
    out += [sr[j] for _, j in placed[nxt:]]
    return query, preload, out


def _qy_parts(
    rng: random.Random, scale: float
) -> tuple[dict[str, list[str]], dict[str, Any], list[UpdateEvent], list[UpdateEvent], int]:
    items, customers, hds, bands = max(20, int(300 * scale)), max(20, int(400 * scale)), 720, 20
    rels = {
        "SS": ["item", "ticket", "c1"],
        "C1": ["c1", "hd1"],
        "HD1": ["hd1", "band"],
        "HD2": ["hd2", "band"],
        "C2": ["c2", "hd2"],
    }
    extra = {
        "aliases": {
            "C1": "customer",
            "C2": "customer",
            "HD1": "household_demographics",
            "HD2": "household_demographics",
        },
        "base_columns": {
            "customer": ["c_customer_sk", "c_hdemo_sk"],
            "household_demographics": ["hd_demo_sk", "hd_income_band_sk"],
        },
        "keys": {"SS": ["item", "ticket"], "C1": ["c1"], "C2": ["c2"], "HD1": ["hd1"], "HD2": ["hd2"]},
    }
    preload = [
        _ev("household_demographics", ["hd_demo_sk", "hd_income_band_sk"], (h, h % bands)) for h in range(hds)
    ]
    cust = [
        _ev("customer", ["c_customer_sk", "c_hdemo_sk"], (c, rng.randrange(hds))) for c in range(customers)
    ]
    ss = [_ev("SS", ["item", "ticket", "c1"], r) for r in _sales(rng, int(3000 * scale), items, customers)]
    return rels, extra, preload, _interleave(rng, cust, ss), items


def qy(scale: float, k: int, strategy: str, seed: int = 2) -> Workload:
    """store_sales ⋈ customer c1 ⋈ household_demographics d1 ⋈ d2 (same income band, many-to-many) ⋈
    customer c2."""
    rng = random.Random(seed)
    rels, extra, preload, stream, _ = _qy_parts(rng, scale)
    return {"relations": rels, **extra, "k": k, "strategy": strategy}, preload, stream


def qz(scale: float, k: int, strategy: str, seed: int = 3) -> Workload:
    """QY ⋈ item i1 (the sold item) ⋈ item i2 (same category, many-to-many)."""
    rng = random.Random(seed)
    rels, extra, preload, stream, items = _qy_parts(rng, scale)
    rels = {**rels, "I1": ["item", "cat"], "I2": ["i2", "cat"]}
    extra["aliases"].update(I1="item", I2="item")
    extra["base_columns"]["item"] = ["i_item_sk", "i_category_id"]
    extra["keys"].update(I1=["item"], I2=["i2"])
    item_rows = [_ev("item", ["i_item_sk", "i_category_id"], (i, rng.randrange(10))) for i in range(items)]
    query = {"relations": rels, **extra, "k": k, "strategy": strategy}
    return query, preload, _interleave(rng, stream, item_rows)


def q10(scale: float, k: int, strategy: str, seed: int = 4) -> Workload:
    """LDBC-SNB BI Q10's shape: Message ⋈ HasTag1 ⋈ Tag1, Message ⋈ HasTag2 ⋈ Tag2 ⋈ TagClass,
    Message ⋈ Person1 ⋈ City ⋈ Country, Person1 ⋈ Knows ⋈ Person2 (11 relations)."""
    rng = random.Random(seed)
    persons, tags, classes, cities, countries = max(20, int(300 * scale)), 200, 20, 50, 10
    messages = int(1500 * scale)
    rels = {
        "Message": ["m", "p1"],
        "HasTag1": ["m", "t1"],
        "Tag1": ["t1", "t1_class"],
        "HasTag2": ["m", "t2"],
        "Tag2": ["t2", "tc"],
        "TagClass": ["tc", "tc_parent"],
        "Person1": ["p1", "city"],
        "City": ["city", "country"],
        "Country": ["country", "continent"],
        "Knows": ["p1", "p2"],
        "Person2": ["p2", "p2_city"],
    }
    query = {
        "relations": rels,
        "aliases": {
            "HasTag1": "HasTag",
            "HasTag2": "HasTag",
            "Tag1": "Tag",
            "Tag2": "Tag",
            "Person1": "Person",
            "Person2": "Person",
        },
        "base_columns": {"HasTag": ["message", "tag"], "Tag": ["tag", "class"], "Person": ["person", "city"]},
        "keys": {
            "Message": ["m"],
            "Tag1": ["t1"],
            "Tag2": ["t2"],
            "TagClass": ["tc"],
            "Person1": ["p1"],
            "Person2": ["p2"],
            "City": ["city"],
            "Country": ["country"],
        },
        "k": k,
        "strategy": strategy,
    }
    preload = (
        [_ev("Tag", ["tag", "class"], (t, rng.randrange(classes))) for t in range(tags)]
        + [_ev("TagClass", ["tc", "tc_parent"], (c, c // 4)) for c in range(classes)]
        + [_ev("City", ["city", "country"], (c, c % countries)) for c in range(cities)]
        + [_ev("Country", ["country", "continent"], (c, c % 3)) for c in range(countries)]
    )
    pcum, tcum = _zipf(persons), _zipf(tags)
    people = [_ev("Person", ["person", "city"], (p, rng.randrange(cities))) for p in range(persons)]
    knows_set: set[tuple[int, int]] = set()
    while len(knows_set) < int(5 * persons):
        a, b = _draw(rng, pcum), rng.randrange(persons)
        if a != b:
            knows_set.add((a, b))
    knows = [_ev("Knows", ["p1", "p2"], e) for e in knows_set]
    msgs, has_tag = [], []
    for m in range(messages):
        msgs.append(_ev("Message", ["m", "p1"], (m, _draw(rng, pcum))))
        for t in {_draw(rng, tcum) for _ in range(rng.randint(1, 3))}:
            has_tag.append(_ev("HasTag", ["message", "tag"], (m, t)))
    rng.shuffle(knows)
    return query, preload, _interleave(rng, people, knows, msgs, has_tag)


RELATIONAL = {"QX": qx, "QY": qy, "QZ": qz, "Q10": q10}
