"""The finance baselines of the vwap service against oracles independent of both (docs/vwap/algorithm.md
§7.1, §7.3): hand-worked examples and edge cases (empty and single-tuple relations, updates to relations
a query does not read, exact decimal results) for ``recompute`` and ``dbtoaster``, and DuckDB running the
SQL of §1.2 on random bags for ``recompute`` (the literal SQL, §5.1), the oracle of every strategy."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.vwap.exact import to_json
from ivmstream.services.vwap.plans import finance_dbtoaster, finance_recompute
from ivmstream.services.vwap.plans.finance_recompute import DEFAULTS
from tests.unit.vwap.finance_helpers import (
    BOOK_COLS,
    CONFIG_IDS,
    CONFIGS,
    RESULT_KEY,
    A,
    B,
    Event,
    balancing,
    bid,
    ins,
    r,
    r_tuple,
    run,
)

# ---------------------------------------------------------------------------------------------------
# Hand-worked examples: the expected values are computed by hand in the comments (not by the code).


HAND: list[tuple[str, str, dict[str, Any], list[Event], Any]] = [
    # VWAP, DBToaster form, f = 1/4. W(10)=5, W(20)=W(30)=W(40)=1, T=8, f·T=2.
    # S>(40)=0 < 2 yes; S>(30)=1 yes; S>(20)=2 (threshold equality, excluded); S>(10)=3 no.
    # Result 40·1 + 30·1 = 70.
    ("vwap-4-levels", "vwap", {}, [ins(B, 10, 5), ins(B, 20, 1), ins(B, 30, 1), ins(B, 40, 1)], 70),
    # Paper form, f = 3/4, same book: 0.75·8 = 6 < S<=(p): S<=(10)=5 no, S<=(20)=6 (equality) no,
    # S<=(30)=7 yes, S<=(40)=8 yes. Result 70 (the forms agree).
    (
        "vwap-paper-4-levels",
        "vwap-paper",
        {},
        [ins(B, 10, 5), ins(B, 20, 1), ins(B, 30, 1), ins(B, 40, 1)],
        70,
    ),
    # Three copies of (10, vol 1), one (20, vol 2), then one copy of (10, 1) deleted: W(10)=2, W(20)=2,
    # T=4, f·T=1. S>(10)=2 no; S>(20)=0 yes -> 20·2 = 40.
    ("vwap-multiplicity", "vwap", {}, [ins(B, 10, 1, mult=3), ins(B, 20, 2), ins(B, 10, 1, mult=-1)], 40),
    # Paper form of the same: 0.75·4 = 3 < S<=: S<=(10)=2 no, S<=(20)=4 yes -> 40.
    (
        "vwap-paper-multiplicity",
        "vwap-paper",
        {},
        [ins(B, 10, 1, mult=3), ins(B, 20, 2), ins(B, 10, 1, mult=-1)],
        40,
    ),
    # Single tuple: S>(7)=0 < 3/4 and S<=(7)=3 > 9/4: both forms include it -> 7·3 = 21.
    ("vwap-single", "vwap", {}, [ins(B, 7, 3)], 21),
    ("vwap-paper-single", "vwap-paper", {}, [ins(B, 7, 3)], 21),
    # Ex 2.1, f = 1/2: R = (1,2), (2,1), (3,1); Σb = 4, half 2; Σb per a: 1->2, 2->1, 3->1.
    # Only a=1 matches -> 1·2 = 2.
    ("ex21-one-group", "ex21", {}, [r(1, 2), r(2, 1), r(3, 1)], 2),
    # Another copy of (2,1): Σb = 5, half 2.5, never an integer group sum -> 0.
    ("ex21-odd-total", "ex21", {}, [r(1, 2), r(2, 1), r(3, 1), r(2, 1)], 0),
    # (1,1) twice and (2,2): Σb = 4, half 2; group 1: 1+1 = 2 yes -> 1·1·2 = 2; group 2: 2 yes -> 4. Total 6.
    ("ex21-two-groups", "ex21", {}, [r(1, 1, mult=2), r(2, 2)], 6),
    # MST, f = 1/4. Bids (broker 1, p10, v2), (broker 2, p20, v2): T_b = 4, f·T_b = 1; S>(10)=2 no,
    # S>(20)=0 yes. Asks (p30, v1), (p40, v3): T_a = 4, 1; S>(30)=3 no, S>(40)=0 yes.
    # The only qualifying pair: broker 2: 40·3 - 20·2 = 80. Broker 1 has no group.
    (
        "mst-basic",
        "mst",
        {},
        [ins(B, 10, 2, broker=1), ins(B, 20, 2, broker=2), ins(A, 30, 1), ins(A, 40, 3)],
        {"2": 80},
    ),
    # Bids (broker 3, p20, v1) x2 and (broker 5, p20, v1): S>(20)=0 < 3/4, all qualify. Ask (p7, v1)
    # qualifies (0 < 1/4). Each bid copy: 7·1 - 20·1 = -13 -> broker 3: -26, broker 5: -13.
    (
        "mst-multiplicity",
        "mst",
        {},
        [ins(B, 20, 1, broker=3, mult=2), ins(B, 20, 1, broker=5), ins(A, 7, 1)],
        {"3": -26, "5": -13},
    ),
    # A group whose sum is 0 is still a group: 10·1 - 5·2 = 0 -> {"4": 0}.
    ("mst-zero-sum-group", "mst", {}, [ins(B, 5, 2, broker=4), ins(A, 10, 1)], {"4": 0}),
    # Bids but no asks: no (bid, ask) pair, so no group at all.
    ("mst-no-asks", "mst", {}, [ins(B, 5, 2, broker=4)], {}),
    # Threshold equality: bids (broker 1, p10, v3), (broker 2, p20, v1): T_b = 4, f·T_b = 1; S>(10) = 1
    # is not < 1, so broker 1 drops out; S>(20) = 0 qualifies. Ask (p30, v1) qualifies:
    # broker 2: 30 - 20 = 10.
    (
        "mst-threshold",
        "mst",
        {},
        [ins(B, 10, 3, broker=1), ins(B, 20, 1, broker=2), ins(A, 30, 1)],
        {"2": 10},
    ),
    # f = 0: 0 > S>(p) never holds, so nothing qualifies on either side -> no groups.
    ("mst-f0", "mst", {"fraction": Fraction(0)}, [ins(B, 5, 2), ins(A, 10, 1)], {}),
    # PSP, f = 1/4: bids (p10, v1), (p12, v3): T_b = 4, volume > 1 -> only (12, 3). Asks (p15, v2),
    # (p20, v2): T_a = 4, both volumes 2 > 1. Result (15 - 12) + (20 - 12) = 11.
    (
        "psp-quarter",
        "psp",
        {"fraction": Fraction(1, 4)},
        [ins(B, 10, 1), ins(B, 12, 3), ins(A, 15, 2), ins(A, 20, 2)],
        11,
    ),
    # Default f = 1/10000: every tuple qualifies: (15-10) + (20-10) + (15-12) + (20-12) = 26.
    ("psp-default", "psp", {}, [ins(B, 10, 1), ins(B, 12, 3), ins(A, 15, 2), ins(A, 20, 2)], 26),
    # Threshold equality, f = 1/4: bids (p10, v1), (p11, v3): T_b = 4; v=1 is not > 1 (excluded), v=3 is.
    # Ask (p20, v1): T_a = 1, 1 > 1/4. Result 20 - 11 = 9.
    ("psp-threshold", "psp", {"fraction": Fraction(1, 4)}, [ins(B, 10, 1), ins(B, 11, 3), ins(A, 20, 1)], 9),
    # Two copies of a bid (p10, v5) and an ask (p13, v1) x3, default f: 2·3 pairs of (13 - 10) = 18.
    ("psp-multiplicity", "psp", {}, [ins(B, 10, 5, mult=2), ins(A, 13, 1, mult=3)], 18),
    # SQ1a, f = 3/4: bids (broker 0, p10, v4), (broker 0, p20, v4), (broker 1, p5, v1). Broker volume:
    # 0 -> 8 (lhs 6), 1 -> 1 (lhs 3/4). S<=(5)=1, S<=(10)=5, S<=(20)=9.
    # (0,10): 6 < 5 no; (0,20): 6 < 9 yes -> 80; (1,5): 3/4 < 1 yes -> 5. Total 85.
    (
        "sq1a",
        "sq1",
        {"variant": "a"},
        [ins(B, 10, 4, broker=0), ins(B, 20, 4, broker=0), ins(B, 5, 1, broker=1)],
        85,
    ),
    # SQ1b, same bids: lhs = 3/4 · Σ_{price >= p}: p5: 27/4 < 1 no; p10: 6 < 5 no; p20: 3 < 9 yes -> 80.
    (
        "sq1b",
        "sq1",
        {"variant": "b"},
        [ins(B, 10, 4, broker=0), ins(B, 20, 4, broker=0), ins(B, 5, 1, broker=1)],
        80,
    ),
    # SQ1a threshold equality: (b0, p5, v2), (b0, p10, v2), (b1, p1, v1): broker 0 lhs 3, broker 1 lhs 3/4;
    # S<=(1)=1, S<=(5)=3, S<=(10)=5. (0,5): 3 < 3 no (equality); (0,10): yes -> 20; (1,1): 3/4 < 1 -> 1.
    # Total 21.
    (
        "sq1a-threshold",
        "sq1",
        {},
        [ins(B, 5, 2, broker=0), ins(B, 10, 2, broker=0), ins(B, 1, 1, broker=1)],
        21,
    ),
    # SQ2, f = 3/4: bids (p10,v1), (p4,v1), (p2,v2), (p12,v1) with price+volume 11, 5, 4, 13; T = 5, lhs 15/4.
    # q=12: 11, 5, 4 <= 12 -> 1+1+2 = 4 > 15/4 yes -> 12. q=10: 5, 4 -> 3 no. q=4: 2 no. q=2: 0 no. Total 12.
    ("sq2", "sq2", {}, [ins(B, 10, 1), ins(B, 4, 1), ins(B, 2, 2), ins(B, 12, 1)], 12),
    # SQ2 threshold equality: (p1,v3) [4], (p2,v3) [5], (p10,v1) [11], (p12,v1) [13]; T = 8, lhs 6.
    # q=10: 4, 5 -> 6, not > 6 (equality); q=12: 4, 5, 11 -> 7 yes -> 12; q=1, q=2: 0 no. Total 12.
    ("sq2-threshold", "sq2", {}, [ins(B, 1, 3), ins(B, 2, 3), ins(B, 10, 1), ins(B, 12, 1)], 12),
    # NQ1, f = 3/4: bids (p1,v1), (p2,v1), (p3,v2): T = 4, 3; S<=: 1, 2, 4. Inner: 3 < S<=(p1) only for
    # p3 -> V = 2. Outer: 3/2 < S<=(q): q=2 (2) yes -> 2, q=3 (4) yes -> 6, q=1 no. Total 8.
    ("nq1", "nq1", {}, [ins(B, 1, 1), ins(B, 2, 1), ins(B, 3, 2)], 8),
    # NQ1 inner equality: (p1,v1), (p2,v2), (p3,v1): T=4, 3; S<=: 1, 3, 4; p2: 3 < 3 no, p3 yes -> V = 1.
    # Outer: 3/4 < S<=(q) for all q -> 1·1 + 2·2 + 3·1 = 8.
    ("nq1-inner-threshold", "nq1", {}, [ins(B, 1, 1), ins(B, 2, 2), ins(B, 3, 1)], 8),
    # NQ1 outer equality: (p1,v1), (p2,v2), (p3,v4): T=7, 21/4; S<=: 1, 3, 7 -> only p3 -> V = 4, lhs 3.
    # q=1: 1 no; q=2: 3 < 3 no (equality); q=3: yes -> 3·4 = 12.
    ("nq1-outer-threshold", "nq1", {}, [ins(B, 1, 1), ins(B, 2, 2), ins(B, 3, 4)], 12),
    # NQ2, f = 3/4, bids (p1,v1), (p2,v1), (p3,v2): T=4, 3. M(q) = Σ vol of b1 with 3 < S<=(min(b1.price, q)).
    # q=1: all S = 1 -> M = 0, 0 < 1 -> 1. q=2: S = 1, 2, 2 -> M = 0, 0 < 2 -> 2. q=3: as NQ1, M = 2,
    # 3/2 < 4 -> 6. Total 9 (NQ1 gives 8 on the same bids).
    ("nq2", "nq2", {}, [ins(B, 1, 1), ins(B, 2, 1), ins(B, 3, 2)], 9),
    # NQ2 inner equality: (p1,v1), (p2,v2), (p3,v1): T=4, 3. q=1: S=1,1,1 -> M=0 -> yes, 1. q=2: S = 1, 3, 3:
    # 3 < 3 no -> M = 0 -> yes, 4. q=3: S = 1, 3, 4 -> M = 1 -> 3/4 < 4 yes, 3. Total 8.
    ("nq2-inner-threshold", "nq2", {}, [ins(B, 1, 1), ins(B, 2, 2), ins(B, 3, 1)], 8),
]


@pytest.mark.parametrize("strategy", [finance_recompute, finance_dbtoaster], ids=["recompute", "dbtoaster"])
@pytest.mark.parametrize(("name", "query", "params", "events", "expected"), HAND, ids=[h[0] for h in HAND])
def test_hand_worked(strategy, name, query, params, events, expected):
    assert run(strategy.make_plan(query, params), events) == {RESULT_KEY[query]: expected}


@pytest.mark.parametrize("strategy", [finance_recompute, finance_dbtoaster], ids=["recompute", "dbtoaster"])
def test_decimal_results_are_exact_strings(strategy):
    # Bids (10.25, vol 2) and (0.1, vol 3): T = 5. DBToaster form: 5/4 > S>(10.25) = 0 yes, S>(0.1) = 2 no.
    # Paper form: 15/4 < S<=(0.1) = 3 no, S<=(10.25) = 5 yes. Both: 10.25·2 = 20.5, as the string "20.5".
    events = [ins(B, Decimal("10.25"), Decimal("2")), ins(B, Decimal("0.1"), Decimal("3"))]
    for query in ("vwap", "vwap-paper"):
        assert run(strategy.make_plan(query, {}), events) == {"vwap": "20.5"}
    # PSP, f = 1/10000, plus one ask (10.3, vol 1): every tuple qualifies, so the result is
    # (10.3 - 10.25) + (10.3 - 0.1) = 0.05 + 10.2 = 10.25.
    asks = [ins(A, Decimal("10.3"), Decimal("1"))]
    assert run(strategy.make_plan("psp", {}), events + asks) == {"psp": "10.25"}


# ---------------------------------------------------------------------------------------------------
# Edge cases (docs/vwap/algorithm.md §7.3)


@pytest.mark.parametrize("strategy", [finance_recompute, finance_dbtoaster], ids=["recompute", "dbtoaster"])
@pytest.mark.parametrize(("query", "params"), CONFIGS, ids=CONFIG_IDS)
def test_empty_relations_give_zero(strategy, query, params):
    empty = {} if query == "mst" else 0
    plan = strategy.make_plan(query, params)
    assert run(plan, []) == {RESULT_KEY[query]: empty}
    # Fill and empty again (deletes of every copy): back to the empty result.
    events = [ins(B, 5, 2, broker=1, mult=2), ins(A, 6, 3), ins(B, 9, 1), r(1, 2), r(2, 2, mult=3)]
    assert run(plan, events + [(rel, row, -m) for rel, row, m in reversed(events)]) == {
        RESULT_KEY[query]: empty
    }
    assert isinstance(plan.stats(), dict)


@pytest.mark.parametrize("strategy", [finance_recompute, finance_dbtoaster], ids=["recompute", "dbtoaster"])
def test_single_tuple(strategy):
    row = ins(B, 7, 3, broker=4)
    ask = ins(A, 9, 2)
    # The VWAP family includes a lone tuple: S<=(7) = 3 > f·3 and S>(7) = 0 < f·3 for f < 1 (SQ1a: 9/4 < 3;
    # NQ1/NQ2: the middle sum is 3 since 9/4 < 3, and again 9/4 < 3) -> 7·3 = 21.
    for q in ("vwap", "vwap-paper", "sq1", "nq1", "nq2"):
        assert run(strategy.make_plan(q, {}), [row]) == {RESULT_KEY[q]: 21}
    # SQ2 excludes it: its own price + volume = 10 > 7, so the right-hand sum is empty (0 < 9/4 fails).
    assert run(strategy.make_plan("sq2", {}), [row]) == {"sq2": 0}
    # SQ1b: f·Σ_{p >= 7} = 9/4 < 3 -> 21.
    assert run(strategy.make_plan("sq1", {"variant": "b"}), [row]) == {"sq1": 21}
    # One bid and one ask: MST 9·2 - 7·3 = -3 for broker 4; PSP 9 - 7 = 2. Ex 2.1: 1/2·b = b only if b = 0.
    assert run(strategy.make_plan("mst", {}), [row, ask]) == {"mst": {"4": -3}}
    assert run(strategy.make_plan("psp", {}), [row, ask]) == {"psp": 2}
    assert run(strategy.make_plan("ex21", {}), [r(3, 4)]) == {"ex21": 0}


@pytest.mark.parametrize("strategy", [finance_recompute, finance_dbtoaster], ids=["recompute", "dbtoaster"])
def test_updates_to_unread_relations_are_ignored(strategy):
    vwap = strategy.make_plan("vwap", {})
    ex = strategy.make_plan("ex21", {})
    run(vwap, [ins(A, 10, 5), r(1, 2), ins(B, 3, 1)])
    run(ex, [ins(A, 10, 5), ins(B, 3, 1), r(0, 0)])
    assert vwap.result() == {"vwap": 3}
    assert ex.result() == {"ex21": 0}


def test_factory_contract():
    assert finance_dbtoaster.QUERIES == finance_recompute.QUERIES == tuple(DEFAULTS)
    assert DEFAULTS["vwap"] == {"fraction": Fraction(1, 4)}
    assert DEFAULTS["vwap-paper"] == {"fraction": Fraction(3, 4)}
    assert DEFAULTS["ex21"] == {"fraction": Fraction(1, 2)}
    assert DEFAULTS["psp"] == {"fraction": Fraction(1, 10000)}
    assert DEFAULTS["sq1"] == {"fraction": Fraction(3, 4), "variant": "a"}
    for module in (finance_recompute, finance_dbtoaster):
        with pytest.raises(ValueError, match="unknown"):
            module.make_plan("q17", {})
        with pytest.raises(ValueError, match="variant"):
            module.make_plan("sq1", {"variant": "c"})
        with pytest.raises(ValueError, match="no parameter"):
            module.make_plan("vwap", {"variant": "a"})
        # Config strings are parsed exactly: "0.25" is 1/4, not a float.
        assert run(module.make_plan("vwap", {"fraction": "0.25"}), HAND[0][3]) == {"vwap": 70}
    plan = finance_dbtoaster.make_plan("vwap", {})
    run(plan, HAND[0][3])
    s = plan.stats()
    # Last update: 3 map entries; its re-evaluation: 4 outer keys x (1 + 4 inner keys) = 20.
    assert s["work_last"] == 23 and s["map_entries"] == 8 and s["evaluations"] == 1


# ---------------------------------------------------------------------------------------------------
# DuckDB as the independent SQL oracle of ``recompute``: the SQL of docs/vwap/algorithm.md §1.2 with
# COALESCE(SUM(..), 0) for
# empty sums, on random bags (multiplicities expanded into repeated rows).


# The SQL of docs/vwap/algorithm.md §1.2 verbatim except for COALESCE(SUM(..), 0); {f} is the
# fraction as a decimal literal.
DUCKDB_SQL = {
    "vwap": """
        SELECT COALESCE(SUM(b1.price * b1.volume), 0) AS vwap FROM bids b1
        WHERE {f} * (SELECT COALESCE(SUM(b3.volume), 0) FROM bids b3)
            > (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price > b1.price)""",
    "vwap-paper": """
        SELECT COALESCE(SUM(b.price * b.volume), 0) FROM bids b
        WHERE {f} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1)
            < (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price)""",
    "ex21": """
        SELECT COALESCE(SUM(r.a * r.b), 0) FROM R r
        WHERE {f} * (SELECT COALESCE(SUM(r1.b), 0) FROM R r1)
            = (SELECT COALESCE(SUM(r2.b), 0) FROM R r2 WHERE r2.a = r.a)""",
    "mst": """
        SELECT b.broker_id, SUM((a.price * a.volume) + (-1 * b.price * b.volume)) AS mst
        FROM bids b, asks a
        WHERE {f} * (SELECT COALESCE(SUM(a1.volume), 0) FROM asks a1)
                > (SELECT COALESCE(SUM(a2.volume), 0) FROM asks a2 WHERE a2.price > a.price)
          AND {f} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1)
                > (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price > b.price)
        GROUP BY b.broker_id""",
    "psp": """
        SELECT COALESCE(SUM(a.price + (-1 * b.price)), 0) AS psp FROM bids b, asks a
        WHERE (b.volume > {f} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1))
          AND (a.volume > {f} * (SELECT COALESCE(SUM(a1.volume), 0) FROM asks a1))""",
    "sq1a": """
        SELECT COALESCE(SUM(b.price * b.volume), 0) FROM bids b
        WHERE {f} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1 WHERE b1.broker_id = b.broker_id)
            < (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price)""",
    "sq1b": """
        SELECT COALESCE(SUM(b.price * b.volume), 0) FROM bids b
        WHERE {f} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1 WHERE b1.price >= b.price)
            < (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price)""",
    "sq2": """
        SELECT COALESCE(SUM(b.price * b.volume), 0) FROM bids b
        WHERE {f} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1)
            < (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price + b2.volume <= b.price)""",
    "nq1": """
        SELECT COALESCE(SUM(b.price * b.volume), 0) FROM bids b
        WHERE {f} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1
                     WHERE {f} * (SELECT COALESCE(SUM(b3.volume), 0) FROM bids b3)
                         < (SELECT COALESCE(SUM(b4.volume), 0) FROM bids b4 WHERE b4.price <= b1.price))
            < (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price)""",
    "nq2": """
        SELECT COALESCE(SUM(b.price * b.volume), 0) FROM bids b
        WHERE {f} * (SELECT COALESCE(SUM(b1.volume), 0) FROM bids b1
                     WHERE {f} * (SELECT COALESCE(SUM(b3.volume), 0) FROM bids b3)
                         < (SELECT COALESCE(SUM(b4.volume), 0) FROM bids b4
                            WHERE b4.price <= b1.price AND b4.price <= b.price))
            < (SELECT COALESCE(SUM(b2.volume), 0) FROM bids b2 WHERE b2.price <= b.price)""",
}


def duckdb_sql(query: str, params: dict[str, Any]) -> str:
    resolved = finance_recompute.resolve_params(query, params)
    f = to_json(resolved["fraction"])  # a terminating decimal string such as "0.25", exact in DuckDB
    assert isinstance(f, str | int), f
    return DUCKDB_SQL[query + resolved["variant"] if query == "sq1" else query].format(f=f)


BAG_ROW = st.tuples(
    st.sampled_from(("bids", "bids", "asks", "R")),
    st.integers(1, 12),
    st.integers(1, 5),
    st.integers(0, 9),
    st.integers(1, 3),
)


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    yield con
    con.close()


@settings(max_examples=30, derandomize=True)
@given(
    rows=st.lists(BAG_ROW, min_size=8, max_size=30),
    fraction=st.sampled_from([None, Fraction(1, 2), Fraction(1, 10)]),
    balance=st.booleans(),
)
def test_recompute_matches_duckdb(duck, rows, fraction, balance):
    events: list[Event] = []
    r_bag: dict[tuple, int] = {}
    for rel, price, volume, broker, mult in rows:
        if rel == "R":
            a_b = r_tuple(price, volume)
            r_bag[a_b] = r_bag.get(a_b, 0) + mult
            events.append(r(*a_b, mult=mult))
        else:
            events.append((rel, bid(price, volume, broker=broker, oid=broker), mult))
    extra = next(filter(None, (balancing(r_bag, a) for a in (1, 2, 3))), None) if balance else None
    if extra:  # that group now holds exactly half of Σ b, so Ex 2.1's equality holds for it
        events.append(r(*extra))
    for rel, cols in (("bids", BOOK_COLS), ("asks", BOOK_COLS), ("R", ("a", "b"))):
        duck.execute(f"CREATE OR REPLACE TABLE {rel} ({', '.join(c + ' BIGINT' for c in cols)})")
        values = [
            "(" + ", ".join(str(row[c]) for c in cols) + ")"
            for rl, row, m in events
            if rl == rel
            for _ in range(m)
        ]
        if values:
            duck.execute(f"INSERT INTO {rel} VALUES {', '.join(values)}")
    for query, params in CONFIGS:
        if fraction is not None:  # other terminating constants, so the SQL literal stays exact
            params = {**params, "fraction": fraction}
        got = run(finance_recompute.make_plan(query, params), events)
        rows_ = duck.execute(duckdb_sql(query, params)).fetchall()
        if query == "mst":
            want = {str(g): int(v) for g, v in sorted(rows_, key=lambda gv: str(gv[0]))}
        else:
            want = int(rows_[0][0])
        assert got == {RESULT_KEY[query]: want}, (query, params)


def test_recompute_refuses_deleting_absent_copies():
    plan = finance_recompute.make_plan("vwap", {})
    run(plan, [ins(B, 5, 1, mult=2)])
    with pytest.raises(ValueError, match="delete"):
        plan.update("bids", bid(5, 1), -3)
