"""Fixed cases: the worked examples of docs/sketches/algorithm.md and the edge cases of §2.10.

Expected sketches are derived by hand from the definitions (which tuples are provenance, which fragment
holds each), never from the engine's output.
"""

from __future__ import annotations

from typing import Any

import pytest

from ivmstream.events import UpdateEvent
from ivmstream.services.sketches import plan as P
from ivmstream.services.sketches.compiler import compile_query
from ivmstream.services.sketches.engine import SketchEngine
from tests.unit.sketches.sketches_oracle import engine, event

SALES = {"sales": {"id": "int", "brand": "str", "product": "str", "price": "int", "numsold": "int"}}
SALES_ROWS = [
    (1, "Lenovo", "T14s", 349, 1),
    (2, "Lenovo", "T14s", 449, 2),
    (3, "Apple", "Air", 1199, 1),
    (4, "Apple", "Pro14", 2100, 1),
    (5, "Apple", "Pro16", 2250, 1),
    (6, "Dell", "XPS", 1345, 1),
    (7, "HP", "G9", 999, 4),
    (8, "HP", "G8", 899, 1),
]
Q_TOP = "SELECT brand, SUM(price*numSold) AS total FROM sales GROUP BY brand HAVING SUM(price*numSold) > 5000"


def sales_engine(strategy: str = "imp") -> SketchEngine:
    return SketchEngine(
        {
            "query": Q_TOP,
            "relations": SALES,
            "partition": {"sales": {"column": "price", "boundaries": [601, 1001, 1501]}},
            "strategy": strategy,
            "selection_pushdown": True,
            "bloom": False,
            "allow_unsafe": False,
            "monotone_aggregates": True,
            "top_m": 0,
            "join": "mat",
            "instances": [],
        }
    )


def sale(row: tuple[Any, ...], delta: int = 1) -> UpdateEvent:
    return UpdateEvent("sales", dict(zip(SALES["sales"], row, strict=True)), delta)


@pytest.mark.parametrize("strategy", ["imp", "full"])
def test_running_example_sketch_and_insert(strategy: str) -> None:
    """Only Apple (prices 1199, 2100, 2250: fragments [1001,1501) and [1501,inf)) passes; inserting an HP
    laptop at 1299 makes HP (fragments [601,1001) and the new one) pass, which adds fragment 1."""
    e = sales_engine(strategy)
    e.apply([sale(r) for r in SALES_ROWS])
    assert e.result()["sketch"] == {"sales": [2, 3]}
    assert e.result()["answer"] == [["Apple", 1199 + 2100 + 2250]]
    e.apply([sale((9, "HP", "G10", 1299, 1))])
    result = e.result()
    assert result["sketch"] == {"sales": [1, 2, 3]}
    assert result["answer"] == [["Apple", 5549], ["HP", 999 * 4 + 899 + 1299]]
    assert result["rows_scanned"] == 7 and result["rows_total"] == 9  # the two Lenovo rows are skipped


def test_s4_refuses_a_negative_sum_input() -> None:
    e = sales_engine()
    refused = e.apply([sale((1, "X", "p", -5, 1)), sale((2, "X", "p", 5, 1))])
    assert [r.code for r in refused] == ["negative-input"] and refused[0].index == 0


def test_cross_product_delta_with_both_sides_changing() -> None:
    """R = {1, 7}, S = {1, 8}; delete R 1 and S 8, insert R 10 and S 10 in one batch: the net output is
    -(1,1) -(1,8) -(7,8) +(7,10) +(10,1) +(10,10), each with the union of the two fragments."""
    join = P.Join(P.Scan("r", None), P.Scan("s", None), lambda r: (), lambda r: (), None, bloom=False)
    join.push("r", {(1,): 1, (7,): 1})
    join.push("s", {(1,): 1, (8,): 1})
    out: dict[Any, int] = {}
    for table, delta in (("r", {(1,): -1, (10,): 1}), ("s", {(8,): -1, (10,): 1})):
        for k, n in join.push(table, delta).items():
            out[k] = out.get(k, 0) + n
    net = {k[0]: n for k, n in out.items() if n}
    assert net == {(1, 1): -1, (1, 8): -1, (7, 8): -1, (7, 10): 1, (10, 1): 1, (10, 10): 1}


def test_merge_counts_result_tuples_per_fragment() -> None:
    """C[r1] = 1, C[r2] = 3; deleting the tuple with sketch {r1, r2} drops r1 only."""
    m = P.Merge()
    m.apply({(("t2",), 0b10): 2, (("t3",), 0b11): 1})
    assert m.sketch == 0b11 and m.counts == {0: 1, 1: 3}
    added, removed = m.apply({(("t3",), 0b11): -1})
    assert (added, removed, m.sketch, m.counts) == (0, 0b01, 0b10, {1: 2})


GROUPS = "SELECT a, SUM(b) AS s FROM r GROUP BY a HAVING SUM(b) > 5"
BY_A = {"r": {"column": "a", "boundaries": [3, 6]}}  # fragments (-inf,3) [3,6) [6,inf)


def test_having_crossings_in_both_directions_and_zero_entries() -> None:
    e = engine(GROUPS, BY_A)
    e.apply([event("r", (4, 6, 0), 1)])
    assert e.result()["sketch"] == {"r": [1]}
    e.apply([event("r", (4, 6, 0), -1), event("r", (4, 5, 0), 1)])  # group drops to 5: leaves HAVING
    assert e.result()["sketch"] == {"r": []} and e.merge.counts == {}
    e.apply([event("r", (4, 5, 0), -1)])  # the group is deleted: no state left
    assert e.result()["stats"]["groups"] == 0


def test_group_deleted_and_recreated_in_one_batch_and_insert_delete_netting() -> None:
    e = engine(GROUPS, BY_A)
    e.apply([event("r", (7, 9, 0), 1)])
    e.apply(
        [
            event("r", (7, 9, 0), -1),
            event("r", (7, 9, 0), 1),
            event("r", (1, 9, 1), 1),
            event("r", (1, 9, 1), -1),
        ]
    )
    assert e.result()["sketch"] == {"r": [2]}
    assert e.result()["answer"] == [[7, 9]]


def test_delete_of_an_absent_tuple_is_refused_and_changes_nothing() -> None:
    e = engine(GROUPS, BY_A)
    e.apply([event("r", (7, 9, 0), 2)])
    before = e.snapshot()
    refused = e.apply([event("r", (7, 9, 0), -3), event("r", (8, 1, 1), -1)])
    assert [r.code for r in refused] == ["absent-tuple", "absent-tuple"]
    assert e.snapshot() == before


def test_duplicates_delete_one_copy() -> None:
    e = engine(GROUPS, BY_A)
    e.apply([event("r", (7, 3, 0), 2)])  # sum 6 passes
    e.apply([event("r", (7, 3, 0), -1)])  # sum 3 fails
    assert e.result()["sketch"] == {"r": []}


def test_update_moving_a_tuple_between_fragments() -> None:
    """An update is delete + insert; the group key is the partition column, so the group moves."""
    e = engine(GROUPS, BY_A)
    e.apply([event("r", (1, 9, 0), 1)])
    assert e.result()["sketch"] == {"r": [0]}
    e.apply([event("r", (1, 9, 0), -1), event("r", (6, 9, 0), 1)])
    assert e.result()["sketch"] == {"r": [2]}


def test_value_changes_but_sketch_does_not_and_sketch_changes_but_value_does_not() -> None:
    """A tuple with b = 0 joins a passing group from another fragment: SUM is unchanged, its sketch grows."""
    q = "SELECT b, SUM(a) FROM r GROUP BY b HAVING SUM(a) > 5"
    e = engine(q, {"r": {"column": "a", "boundaries": [3, 6]}}, allow_unsafe=True)
    e.apply([event("r", (7, 1, 0), 1)])
    assert e.result()["sketch"] == {"r": [2]}
    e.apply([event("r", (0, 1, 0), 1)])  # a = 0 adds nothing to SUM(a) but is in the group
    assert e.result()["sketch"] == {"r": [0, 2]}


def test_unsafe_sketch_is_maintained_but_never_skips() -> None:
    q = "SELECT b, SUM(a) FROM r GROUP BY b HAVING SUM(a) > 5"
    e = engine(q, {"r": {"column": "a", "boundaries": [3, 6]}}, allow_unsafe=True)
    e.apply([event("r", (7, 1, 0), 1), event("r", (1, 2, 0), 1)])
    result = e.result()
    assert result["sketch"] == {"r": [2]} and result["stats"]["safety"] is None
    assert result["rows_scanned"] == result["rows_total"] == 2


def test_null_partition_values_and_values_beyond_the_boundaries() -> None:
    e = engine("SELECT a, c FROM r WHERE b = 1", {"r": {"column": "c", "boundaries": [3, 6]}})
    e.apply([event("r", (1, 1, None), 1), event("r", (2, 1, 1000), 1), event("r", (3, 2, 4), 1)])
    result = e.result()
    assert result["sketch"] == {"r": [0, 2]}  # NULL sorts into fragment 0; 1000 into the open last one
    assert result["answer"] == [[1, None], [2, 1000]]


def test_scalar_aggregate_over_empty_input_has_one_row_and_an_empty_sketch() -> None:
    e = engine(
        "SELECT COUNT(*), SUM(b), AVG(b), MIN(b), COUNT(c) FROM r", {"r": {"column": "a", "boundaries": [5]}}
    )
    e.apply([])
    assert e.result()["answer"] == [[0, None, None, None, 0]] and e.result()["sketch"] == {"r": []}
    e.apply([event("r", (1, 4, None), 1), event("r", (7, 2, None), 1)])
    assert e.result()["answer"] == [[2, 6, 3.0, 2, 0]] and e.result()["sketch"] == {"r": [0, 1]}
    e.apply([event("r", (1, 4, None), -1), event("r", (7, 2, None), -1)])
    assert e.result()["answer"] == [[0, None, None, None, 0]] and e.result()["sketch"] == {"r": []}


def test_min_deleted_while_a_duplicate_remains() -> None:
    e = engine("SELECT a, MIN(b) FROM r GROUP BY a", {"r": {"column": "a", "boundaries": [5]}})
    e.apply([event("r", (1, 2, 0), 1), event("r", (1, 2, 1), 1), event("r", (1, 5, 0), 1)])
    e.apply([event("r", (1, 2, 0), -1)])
    assert e.result()["answer"] == [[1, 2]]
    e.apply([event("r", (1, 2, 1), -1)])
    assert e.result()["answer"] == [[1, 5]]


def test_topk_with_fewer_inputs_ties_and_a_straddling_multiplicity() -> None:
    """k = 3 over b DESC: b = 9 twice (one row, multiplicity 2) then b = 5 with multiplicity 3 straddles
    position 3; ties on b are broken by the whole row ascending."""
    q = "SELECT a, b FROM r ORDER BY b DESC LIMIT 3"
    e = engine(q, {"r": {"column": "a", "boundaries": [3, 6]}})
    e.apply([event("r", (7, 9, 0), 2)])
    assert e.result()["answer"] == [[7, 9], [7, 9]]
    e.apply([event("r", (4, 5, 0), 3), event("r", (1, 5, 0), 1)])
    assert e.result()["answer"] == [[7, 9], [7, 9], [1, 5]]  # (1,5,0) < (4,5,0) in the row order
    assert e.result()["sketch"] == {"r": [0, 2]}
    e.apply([event("r", (1, 5, 0), -1)])
    assert e.result()["answer"] == [[7, 9], [7, 9], [4, 5]] and e.result()["sketch"] == {"r": [1, 2]}


def test_single_fragment_and_more_fragments_than_values() -> None:
    one = engine(GROUPS, {"r": {"column": "a", "boundaries": []}})
    one.apply([event("r", (1, 9, 0), 1)])
    assert one.result()["sketch"] == {"r": [0]} and one.result()["fragments"] == {"r": 1}
    many = engine(GROUPS, {"r": {"column": "a", "ranges": 100, "domain": [0, 10]}})
    many.apply([event("r", (1, 9, 0), 1), event("r", (2, 1, 0), 1)])
    assert many.result()["sketch"] == {"r": [10]} and many.result()["fragments"] == {"r": 100}


def test_snapshot_restore_and_entries_round_trip() -> None:
    e = engine(GROUPS, BY_A)
    e.apply([event("r", (1, 9, 0), 1), event("r", (7, 9, 0), 2)])
    entries = list(e.all_entries())
    other, third = engine(GROUPS, BY_A), engine(GROUPS, BY_A)
    other.restore(e.snapshot())
    third.restore_entries(entries)
    assert other.result() == third.result() == e.result()
    for x in (e, other, third):
        x.apply([event("r", (7, 9, 0), -1), event("r", (4, 8, 0), 1)])
    assert other.snapshot() == third.snapshot() == e.snapshot()
    assert other.result() == e.result()


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT a FROM r LEFT JOIN s ON r.a = s.a", "outer"),
        ("SELECT a FROM r WHERE a IN (SELECT a FROM s)", "subquer"),
        ("SELECT a FROM (SELECT a FROM r) t", "subquer"),
        ("SELECT a, ROW_NUMBER() OVER (ORDER BY b) FROM r", "window"),
        ("SELECT a FROM r EXCEPT SELECT a FROM s", "EXCEPT"),
        ("SELECT a FROM r UNION SELECT a FROM s", "UNION ALL"),
        ("SELECT COUNT(DISTINCT a) FROM r", "DISTINCT"),
        ("SELECT nope FROM r", "unknown column"),
        ("SELECT a FROM nowhere", "unknown table"),
        ("SELECT a, b FROM r GROUP BY a", "GROUP BY"),
        ("SELECT a FROM r, s", "ambiguous"),
        ("SELECT STDDEV(b) FROM r", "unsupported"),
        ("SELECT a FROM r LIMIT 1 OFFSET 2", "OFFSET"),
        ("WITH t AS (SELECT a FROM r) SELECT a FROM t", "WITH"),
        ("SELECT b, SUM(a) FROM r GROUP BY b HAVING SUM(a) > 5", "not provably safe"),
        ("SELECT b, SUM(a) AS t FROM r GROUP BY b ORDER BY t LIMIT 2", "not provably safe"),
    ],
)
def test_queries_outside_the_class_are_config_errors_naming_the_construct(sql: str, message: str) -> None:
    from tests.unit.sketches.sketches_oracle import SCHEMA

    with pytest.raises(ValueError, match=message):
        compile_query(sql, SCHEMA, {"r": {"column": "a", "boundaries": [5]}})


def test_s4_accepts_monotone_having_only_with_the_flag() -> None:
    from tests.unit.sketches.sketches_oracle import SCHEMA

    q = "SELECT b, SUM(a) FROM r GROUP BY b HAVING SUM(a) > 5"
    part = {"r": {"column": "a", "boundaries": [5]}}
    assert compile_query(q, SCHEMA, part, monotone_aggregates=True).safety == "S4"
    with pytest.raises(ValueError, match="not provably safe"):
        compile_query(
            "SELECT b, AVG(a) FROM r GROUP BY b HAVING AVG(a) > 5", SCHEMA, part, monotone_aggregates=True
        )


@pytest.mark.parametrize(
    "partition",
    [
        {"r": {"column": "zz", "boundaries": [1]}},
        {"r": {"column": "a", "boundaries": [3, 1]}},
        {"r": {"column": "a", "ranges": 4}},
        {"q": {"column": "a", "boundaries": [1]}},
        {"s": {"column": "a", "boundaries": [1]}},
        {"r": {"column": "a", "boundaries": [1], "ranges": 3, "domain": [0, 9]}},
    ],
)
def test_bad_partitions_are_config_errors(partition: dict[str, Any]) -> None:
    from tests.unit.sketches.sketches_oracle import SCHEMA

    with pytest.raises(ValueError, match="partition"):
        compile_query("SELECT a FROM r", SCHEMA, partition)


def test_tpch_catalog_uses_standard_column_names_and_platform_events() -> None:
    e = SketchEngine(
        {
            "query": "SELECT l_orderkey, SUM(l_quantity) AS q FROM lineitem GROUP BY l_orderkey "
            "HAVING SUM(l_quantity) > 10",
            "relations": "tpch",
            "partition": {"lineitem": {"column": "l_orderkey", "boundaries": [10, 20]}},
            "strategy": "imp",
            "selection_pushdown": True,
            "bloom": False,
            "allow_unsafe": False,
            "monotone_aggregates": False,
            "top_m": 0,
            "join": "mat",
            "instances": [],
        }
    )
    from decimal import Decimal

    from ivmstream.events.tpch import TPCH_TABLES

    cols = [c for c, _ in TPCH_TABLES["lineitem"]]
    row = [12, 1, 1, 1, Decimal("11.5"), Decimal("100.00"), Decimal("0.05"), Decimal("0"), "N", "O"] + [
        "x"
    ] * 6
    e.apply([UpdateEvent("lineitem", dict(zip(cols, row, strict=True)), 1)])
    assert e.result()["sketch"] == {"lineitem": [1]} and e.result()["answer"] == [[12, "11.5"]]
