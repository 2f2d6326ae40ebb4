"""Spark side of the vwap service: the SQL recompute, the bootstrap's bags and levels, and the CLI path.

- Spark SQL (one keyed job per query, every key at once) equals DuckDB running the same texts on the
  same small random bags, per key, and equals the literal oracles (``finance_recompute``, the TPC-H
  ``recompute`` plans): ties, duplicates, multiplicities, decimals, empty sides.
- The tiny DBToaster trace's final bid book gives DBToaster's published VWAP through Spark SQL.
- ``build_state``'s bags and levels equal ``snapshot.book_levels`` of the same bag (and the engine's
  own snapshot), and a bootstrap from the standard book restores engines that agree with streaming it.
- ``ivmstream bootstrap vwap`` then the stream, then ``ivmstream reconcile vwap``: MATCH.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from ivmstream.events import OrderBookAdaptor, Relation, Schema, UpdateEvent
from ivmstream.events.tpch import TPCH_TABLES
from ivmstream.services.vwap import sql
from ivmstream.services.vwap.batch import JOBS, build_state, spark_build
from ivmstream.services.vwap.batch_recompute import comparable, empty, recompute, shape
from ivmstream.services.vwap.snapshot import book_levels, decode, encode
from ivmstream.spark.decode import KEY, MULT, SPARK_TYPES, net_bags

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("one_shuffle_partition")]

BUNDLED = Path(__file__).resolve().parents[2] / "services" / "vwap" / "data"  # copies of DBToaster's data


def finance_file(bundled: str, shared: str) -> Path:
    """A DBToaster finance file: the service's bundled copy (``shared`` names its origin)."""
    return BUNDLED / bundled


BOOK = (("t", "int"), ("id", "int"), ("broker_id", "int"), ("volume", "exact"), ("price", "exact"))
NAMES = [c for c, _t in BOOK]
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "bids": BOOK,
    "asks": BOOK,
    "R": (("a", "exact"), ("b", "exact")),
    **{name: TPCH_TABLES[name] for name in ("lineitem", "part", "orders", "customer")},
}
Bag = dict[tuple[Any, ...], int]
Data = dict[str, dict[str, Bag]]  # key -> relation -> tuple -> multiplicity


# --- random bags -------------------------------------------------------------------------------------


def _add(bag: Bag, t: tuple[Any, ...], m: int) -> None:
    bag[t] = bag.get(t, 0) + m


def random_book(rng: random.Random, n: int, prices: int, decimals: bool = False) -> Bag:
    """Small domains force ties at prices and duplicate tuples (multiplicities > 1)."""
    bag: Bag = {}
    for _ in range(n):
        oid = rng.randint(1, 8)
        price: Any = rng.randint(1, prices)
        vol: Any = rng.randint(1, 5)
        if decimals:
            price = Decimal(price) + Decimal(rng.choice(("0", "0.25", "0.5")))
            vol = Decimal(vol) + Decimal(rng.choice(("0", "0.5")))
        _add(bag, (rng.randint(1, 3), oid, oid % 4, vol, price), rng.choice((1, 1, 1, 2, 3)))
    return bag


def book_data() -> Data:
    data: Data = {}
    for seed in range(7):
        rng = random.Random(seed)
        n, prices = ((12, 6), (30, 12), (20, 5), (1, 3), (15, 1), (60, 20), (25, 8))[seed]
        bids = random_book(rng, n, prices, decimals=seed == 2)
        asks = {} if seed == 6 else random_book(rng, max(1, n // 2 + 3), prices, decimals=seed == 2)
        data[f"s{seed}"] = {"bids": bids, "asks": asks}
    return data


def r_data() -> Data:
    data: Data = {"balanced": {"R": {(1, 2): 1, (2, 1): 2, (3, 4): 0}}}
    data["balanced"]["R"].pop((3, 4))
    data["half"] = {"R": {(1, Decimal("1.5")): 2, (2, 3): 1, (3, 1): 1, (3, 2): 1}}  # a=2 and a=3 hold half
    for seed in range(5):
        rng = random.Random(100 + seed)
        bag: Bag = {}
        for _ in range(rng.randint(1, 12)):
            _add(bag, (rng.randint(1, 1 + seed % 3), rng.randint(1, 4)), rng.choice((1, 1, 2)))
        data[f"r{seed}"] = {"R": bag}
    return data


def _tpch_row(table: str, **values: Any) -> tuple[Any, ...]:
    filler = {"int": 0, "exact": 0, "str": "x"}
    return tuple(values.get(c, filler[t]) for c, t in TPCH_TABLES[table])


def tpch_data() -> Data:
    data: Data = {}
    for seed in range(5):
        rng = random.Random(200 + seed)
        rel: dict[str, Bag] = {"lineitem": {}, "part": {}, "orders": {}, "customer": {}}
        for ck in range(1, 5):
            _add(rel["customer"], _tpch_row("customer", custkey=ck, name=f"Customer#{ck:03d}"), 1)
        for ok in range(1, 9):
            row = _tpch_row(
                "orders",
                orderkey=ok,
                custkey=rng.randint(1, 4),
                orderdate=f"1996-01-{rng.randint(1, 28):02d}",
                totalprice=Decimal(rng.randint(100, 99999)) / 100,
            )
            _add(rel["orders"], row, rng.choice((1, 1, 2)))
        for pk in range(1, 6):  # part 1 is Q17's default brand and container, part 2 the alternative
            row = _tpch_row(
                "part",
                partkey=pk,
                brand=("Brand#23", "Brand#12")[pk - 1] if pk < 3 else rng.choice(("Brand#23", "Brand#12")),
                container=("WRAP BOX", "MED BOX")[pk - 1] if pk < 3 else rng.choice(("WRAP BOX", "MED BOX")),
            )
            _add(rel["part"], row, rng.choice((1, 1, 2)))
        for ln in range(rng.randint(5, 40)):
            qty: Any = rng.choice((1, 2, 3, 10, 25, 40, 50))  # skewed: some lie below a fifth of the mean
            if seed == 3:
                qty = Decimal(qty) + Decimal(rng.choice(("0", "0.5", "0.25")))
            row = _tpch_row(
                "lineitem",
                orderkey=rng.randint(1, 8),
                partkey=rng.randint(1, 5),
                linenumber=ln % 3,
                quantity=qty,
                extendedprice=Decimal(rng.randint(100, 999999)) / 100,
            )
            _add(rel["lineitem"], row, rng.choice((1, 1, 1, 2)))
        data[f"h{seed}"] = rel
    return data


# --- evaluators ----------------------------------------------------------------------------------------


def spark_bags(spark, data: Data, relations) -> dict[str, Any]:
    """The net bags the framework hands a service: key, typed columns, ``__mult``."""
    rels = [Relation(name, COLUMNS[name]) for name in relations]
    parts = {}
    for rel in rels:
        ddl = ", ".join([f"{KEY} string"] + [f"{c} {SPARK_TYPES[t].simpleString()}" for c, t in rel.columns])
        rows = [
            (
                key,
                *(Decimal(v) if t == "exact" else v for v, (_c, t) in zip(tup, rel.columns, strict=True)),
                m,
            )
            for key, per_rel in data.items()
            for tup, m in per_rel.get(rel.name, {}).items()
        ]
        parts[rel.name] = [spark.createDataFrame(rows, f"{ddl}, {MULT} long")]
    return net_bags(parts, Schema.of(*rels))


def _duck_table(con, name: str, per_key: Mapping[str, Bag]) -> None:
    types = {"int": "BIGINT", "exact": "DECIMAL(18,3)", "str": "VARCHAR"}
    cols = COLUMNS[name]
    con.execute(f"CREATE TABLE {name} ({KEY} VARCHAR, {', '.join(f'{c} {types[t]}' for c, t in cols)})")
    rows = [(key, *tup) for key, bag in per_key.items() for tup, m in bag.items() for _ in range(m)]
    if rows:
        con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * (len(cols) + 1))})", rows)


def duck_plain(query: str, options: Mapping[str, Any], key: str, bags: Mapping[str, Bag], dialect: str):
    """The plain text (no partition key, docs/vwap/algorithm.md §5.4) on one key's tables."""
    con = duckdb.connect()
    for name in sql.RELATIONS[query]:
        _duck_table(con, name, {key: bags.get(name, {})})
    rows = con.execute(sql.render(query, options, dialect=dialect)).fetchall()
    return shape(query, [(key, *r) for r in rows]).get(key, empty({"query": query}))


def duck_keyed(query: str, options: Mapping[str, Any], data: Data, dialect: str) -> dict[str, Any]:
    con = duckdb.connect()
    for name in sql.RELATIONS[query]:
        _duck_table(con, name, {key: per_rel.get(name, {}) for key, per_rel in data.items()})
    return shape(query, con.execute(sql.render(query, options, keyed=True, dialect=dialect)).fetchall())


def oracle(query: str, options: Mapping[str, Any], bags: Mapping[str, Bag]) -> Any:
    """The literal nested-loop plans of the engine's ``recompute`` strategy (tuple at a time); None
    while a plan module is not there."""
    params = sql.query_params(query, options)
    try:
        if query in ("q17", "q17a", "q18"):
            from ivmstream.services.vwap.plans.tpch import make_tpch_plan

            plan = make_tpch_plan(query, "recompute", params)
        else:
            from ivmstream.services.vwap.plans.finance_recompute import make_plan

            plan = make_plan(query, params)
    except ImportError:
        return None
    for name in sql.RELATIONS[query]:
        cols = [c for c, _t in COLUMNS[name]]
        for tup, m in bags.get(name, {}).items():
            plan.update(name, dict(zip(cols, tup, strict=True)), m)
    return comparable(plan.result())


# --- (a) Spark SQL = DuckDB = literal oracle ------------------------------------------------------------

CASES = [
    ("vwap", {}),
    ("vwap", {"fraction": "1/3"}),
    ("vwap-paper", {}),
    ("ex21", {}),
    ("mst", {}),
    ("psp", {}),
    ("psp", {"fraction": "1/10"}),
    ("sq1", {}),
    ("sq1", {"variant": "b"}),
    ("sq2", {}),
    ("nq1", {}),
    ("nq2", {}),
    ("q17", {}),
    ("q17", {"fraction": "1/2", "brand": "Brand#12", "container": "MED BOX"}),
    ("q17a", {}),
    ("q17a", {"fraction": "1/4"}),
    ("q18", {}),
    ("q18", {"threshold": "31/2"}),
]


@pytest.fixture(scope="module")
def datasets() -> dict[str, Data]:
    return {"book": book_data(), "R": r_data(), "tpch": tpch_data()}


def _data_for(query: str, datasets: Mapping[str, Data]) -> Data:
    rels = sql.RELATIONS[query]
    return datasets["R"] if rels == ("R",) else datasets["tpch"] if "lineitem" in rels else datasets["book"]


@pytest.mark.parametrize(("query", "params"), CASES, ids=[f"{q}-{'-'.join(p.values())}" for q, p in CASES])
def test_spark_sql_equals_duckdb_and_the_literal_oracle(spark, datasets, query, params):
    data = _data_for(query, datasets)
    options = {"query": query, "strategy": "recompute", **params}
    got = recompute(spark, spark_bags(spark, data, sql.RELATIONS[query]), options)
    assert set(got) <= set(data)
    keyed = duck_keyed(query, options, data, "duckdb")
    for key, bags in data.items():
        expected = duck_plain(query, options, key, bags, "duckdb")
        assert got.get(key, empty(options)) == expected, key
        assert keyed.get(key, empty(options)) == expected, key
        # NQ2: Spark's text, run by DuckDB, equals the two-level correlation (docs/vwap/algorithm.md §5.4)
        if query == "nq2":
            assert duck_plain(query, options, key, bags, "spark") == expected, key
        assert oracle(query, options, bags) in (expected, None), key
    assert any(got.get(k, empty(options)) != empty(options) for k in data)  # not only empty results


def test_sql_texts_cover_the_catalog_and_refuse_bad_parameters():
    from ivmstream.services.vwap.catalog import QUERIES

    assert {q: info.reads for q, info in QUERIES.items()} == sql.RELATIONS
    for q, defaults in sql.DEFAULTS.items():  # the SQL texts' defaults are the engine's
        assert {k: QUERIES[q].defaults[k] for k in defaults} == defaults, q
    text = sql.render("vwap", {"fraction": "0.25"})
    assert "1 * (SELECT" in text and "4 * (SELECT" in text and "__key" not in text
    assert "b2.__key = b1.__key" in sql.render("vwap", keyed=True)
    with pytest.raises(ValueError, match="quotes"):
        sql.render("q17", {"brand": "Brand'23"})
    with pytest.raises(ValueError, match="variant"):
        sql.render("sq1", {"variant": "c"})
    with pytest.raises(ValueError, match="unknown vwap query"):
        sql.render("q99")


# --- (b) the tiny DBToaster trace, (c) bootstrap bags and levels ----------------------------------------


def trace_book(path: Path, book: str = "bids") -> dict[str, Bag]:
    adaptor = OrderBookAdaptor(book=book)
    bags: dict[str, Bag] = {"bids": {}, "asks": {}}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                for ev in adaptor.feed_line(line):
                    r = ev["row"]
                    _add(bags[ev["relation"]], tuple(r[c] for c, _t in BOOK), ev["delta"])
    return {rel: {t: m for t, m in bag.items() if m} for rel, bag in bags.items()}


@pytest.fixture(scope="module")
def tiny_book() -> dict[str, Bag]:
    return trace_book(finance_file("finance-tiny.csv", "tiny/finance.csv"))


def test_tiny_trace_vwap_is_dbtoasters_value(spark, tiny_book):
    got = recompute(spark, spark_bags(spark, {"tiny": tiny_book}, ("bids",)), {"query": "vwap"})
    assert got == {"tiny": {"vwap": 491070000}}
    assert oracle("vwap", {}, tiny_book) == {"vwap": 491070000}


def test_build_state_bags_and_levels_equal_the_engines(spark, datasets, tiny_book):
    from ivmstream.services.vwap.catalog import QUERIES
    from ivmstream.services.vwap.engine import create_engine

    data = {**datasets["book"], "tiny": tiny_book}
    bags = spark_bags(spark, data, ("bids", "asks"))
    relations = {r.name: r for r in QUERIES["mst"].relations}
    states = dict(build_state(spark, bags, {"query": "mst", "strategy": "rpai"}))
    assert set(states) == set(data)
    for key, state in states.items():
        snap = decode(state, relations)
        assert snap["bag"] == data[key], key
        for side in ("bids", "asks"):
            assert snap["levels"][side] == book_levels(data[key][side], NAMES), key
        engine = create_engine("mst", "rpai")
        engine.apply(
            [
                UpdateEvent(rel, dict(zip(NAMES, t, strict=True)), m, key)
                for rel in ("bids", "asks")
                for t, m in data[key][rel].items()
            ]
        )
        mine, theirs = orjson.loads(engine.snapshot()), orjson.loads(state)
        mine.pop("counters", None)  # the engine's event counters: no events were applied at bootstrap
        assert mine == theirs, key  # exactly the engine's own snapshot of the same bag
    # A non-book query: bags only, no levels.
    r_bags = spark_bags(spark, datasets["R"], ("R",))
    for key, state in build_state(spark, r_bags, {"query": "ex21", "strategy": "rpai"}):
        snap = decode(state, {"R": Relation("R", COLUMNS["R"])})
        assert snap["levels"] is None and snap["bag"] == datasets["R"][key]


def test_bad_input_fails_loudly(spark):
    """Volumes <= 0 and net negative multiplicities cannot be restored; a value Spark would round
    (more than 3 fractional digits) stops the recompute instead of changing its result."""
    bad_volume = {"k": {"bids": {(1, 1, 1, 0, 5): 1}, "asks": {}}}
    with pytest.raises(ValueError, match="volumes must be > 0"):
        list(
            build_state(
                spark, spark_bags(spark, bad_volume, ("bids", "asks")), {"query": "vwap", "strategy": "rpai"}
            )
        )
    negative = {"k": {"bids": {(1, 1, 1, 2, 5): -1}, "asks": {}}}
    with pytest.raises(ValueError, match="more deletes than inserts"):
        list(
            build_state(
                spark, spark_bags(spark, negative, ("bids", "asks")), {"query": "vwap", "strategy": "rpai"}
            )
        )
    too_fine = {"k": {"bids": {(1, 1, 1, 2, Decimal("5.0001")): 1}, "asks": {}}}
    with pytest.raises(Exception, match=r"bids.price = 5.0001.* is not exact in DECIMAL\(18,3\)"):
        recompute(spark, spark_bags(spark, too_fine, ("bids",)), {"query": "vwap"})


# --- (d) bootstrap from the standard book; the CLI path ---------------------------------------------------


def _exact_text(field: str) -> str:
    d = Decimal(field.strip())
    return str(int(d)) if d == d.to_integral_value() else format(d.normalize(), "f")


@pytest.fixture(scope="module")
def standard_snapshot(tmp_path_factory) -> Path:
    """The standard trace's final book (DBToaster's ``*_export.csv``: headerless, ``28803063.0, ...``)
    as a snapshot directory ``ivmstream bootstrap`` reads: ``bids.csv`` and ``asks.csv`` with a header."""
    out = tmp_path_factory.mktemp("standard-book")
    for side in ("bids", "asks"):
        lines = ["t,id,broker_id,volume,price"]
        export = finance_file(f"{side}-standard.csv", f"standard/{side}_export.csv")
        for line in export.read_text().splitlines():
            if line.strip():
                lines.append(",".join(_exact_text(f) for f in line.split(",")))
        (out / f"{side}.csv").write_text("\n".join(lines) + "\n")
    return out


def snapshot_events(path: Path) -> list[UpdateEvent]:
    """The snapshot's tuples as insert events, what streaming the book from scratch would apply."""
    events = []
    for side in ("bids", "asks"):
        for line in (path / f"{side}.csv").read_text().splitlines()[1:]:
            row = dict(
                zip(NAMES, [int(v) if "." not in v else Decimal(v) for v in line.split(",")], strict=True)
            )
            events.append(UpdateEvent(side, row, 1))
    return events


def test_bootstrap_from_the_standard_book_restores_engines_equal_to_streaming_it(spark, standard_snapshot):
    from ivmstream.services.vwap.catalog import ASKS, BIDS
    from ivmstream.services.vwap.engine import create_engine
    from ivmstream.spark.snapshot import read_snapshot

    schema = Schema.of(BIDS, ASKS)
    bags = net_bags({n: [df] for n, df in read_snapshot(spark, standard_snapshot, schema).items()}, schema)
    states = dict(JOBS.build_state(spark, bags, {"query": "vwap", "strategy": "rpai"}))
    assert list(states) == [""]  # keyless: one book
    events = snapshot_events(standard_snapshot)
    streamed = create_engine("vwap", "rpai")
    assert streamed.apply(events) == []
    restored = create_engine("vwap", "rpai")
    restored.restore(states[""])
    assert comparable(restored.result()) == comparable(streamed.result())
    assert (
        decode(restored.snapshot(), restored.relations)["bag"]
        == decode(states[""], restored.relations)["bag"]
    )
    # Spark SQL on the same bags agrees with the engines.
    assert recompute(spark, bags, {"query": "vwap"}) == {"": comparable(streamed.result())}
    # The same bags and levels serve every book query (only the snapshot's query name differs).
    [(bag, levels)] = spark_build(spark, bags, {"query": "mst"}).values()
    for query in ("vwap-paper", "mst", "psp", "nq1"):
        engine = create_engine(query, "rpai")
        engine.restore(encode(query, "rpai", bag, levels))
        reference = create_engine(query, "rpai")
        reference.apply(events)
        assert comparable(engine.result()) == comparable(reference.result()), query


def test_cli_bootstrap_then_stream_then_reconcile(
    spark, broker, redis_server, unique, tmp_path, standard_snapshot
):
    """The user path: `ivmstream bootstrap vwap` from the standard book, the tiny trace streamed on top,
    `ivmstream reconcile vwap` (Spark SQL over the snapshot plus the log) says MATCH."""
    import orjson
    from helpers import ivm_in_process, run_worker_to_end, write_config

    from ivmstream.compare import diff
    from ivmstream.config import load_config
    from ivmstream.events import read_source
    from ivmstream.redis_client import connect
    from ivmstream.runtime.output import result_key
    from ivmstream.runtime.produce import produce_records
    from ivmstream.service import load_service
    from ivmstream.services.vwap.engine import create_engine
    from ivmstream.state import open_store

    tiny = finance_file("finance-tiny.csv", "tiny/finance.csv")
    topic, group, out = f"{unique}.updates", f"{unique}-g", f"{unique}.results"
    broker.create_topic(topic, 1)
    cfg = write_config(
        tmp_path / "c.json",
        query="vwap",
        strategy="rpai",
        input_topic=topic,
        output_topic=out,
        dlq_topic=f"{unique}.dlq",
        checkpoint_interval=0.2,
    )
    state = tmp_path / "state"
    proc = ivm_in_process(
        "bootstrap",
        "vwap",
        "--config",
        str(cfg),
        "--snapshot",
        str(standard_snapshot),
        "--bootstrap",
        broker.bootstrap,
        "--from-offsets",
        "latest",
        "--state-dir",
        str(state),
        "--group",
        group,
    )
    assert proc.stdout.startswith("bootstrapped 1 key(s) of vwap into rocksdb state"), proc.stdout
    records = list(read_source(tiny, "orderbook", book="bids"))
    report = produce_records(broker.bootstrap, topic, records)
    assert report.sent == len(records) and not report.failures
    service = load_service("vwap")
    config = load_config(service, cfg)
    client = connect(redis_server.url)
    store = open_store("rocksdb", f"vwap.{group}", state_dir=state)  # the CLI's store namespace
    results = run_worker_to_end(service, config, broker.bootstrap, store, group, client)
    expected = create_engine("vwap", "rpai")
    assert expected.apply(snapshot_events(standard_snapshot)) == []
    assert expected.apply([UpdateEvent(**orjson.loads(r.value)) for r in records]) == []
    assert {k: comparable(r) for k, r in results.items()} == {"": comparable(expected.result())}

    report_path = tmp_path / "report.json"
    proc = ivm_in_process(
        "reconcile",
        "vwap",
        "--config",
        str(cfg),
        "--bootstrap",
        broker.bootstrap,
        "--redis",
        redis_server.url,
        "--snapshot",
        str(standard_snapshot),
        "--report",
        str(report_path),
    )
    assert proc.stdout.strip().startswith("reconcile vwap: MATCH on 1 key(s)"), proc.stdout
    assert orjson.loads(report_path.read_bytes())["verdict"] == "match"

    # What reconcile compares: a wrong published answer differs, the engine's diagnostics do not.
    record = orjson.loads(client.get(result_key(out, "")))
    assert "stats" in record["result"] and JOBS.comparable(record["result"]) == comparable(expected.result())
    assert diff(comparable(expected.result()), JOBS.comparable(dict(record["result"], vwap=1))) != []
