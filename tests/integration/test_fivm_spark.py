"""Spark side of the fivm service (docs/fivm/algorithm.md §8).

- The bootstrap's state (views evaluated bottom-up with Spark) equals the engine's own state after
  replaying the same events, entry for entry up to the creation numbers (exact rings), or within
  float tolerance: random databases with deletes, duplicates, ``-0.0``, free variables, static
  relations, a snowflake, a star, a self-join, a cyclic join with indicator projections, and the
  demo sample.
- The SQL recomputation equals the engine's results on the same databases.
- Bootstrap then stream equals streaming everything; reconcile says MATCH after streaming and
  MISMATCH when a published result is tampered with; the CLI runs both jobs.
- Rings and strategies the bootstrap cannot build, and exact values beyond 38 digits, are refused.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from ivmstream.compare import diff
from ivmstream.config import load_config, schema_of
from ivmstream.events import read_source
from ivmstream.replay import replay_all
from ivmstream.service import load_service
from ivmstream.services.fivm import state as st
from ivmstream.services.fivm.batch import JOBS, build_state, comparable, recompute
from ivmstream.services.fivm.service import DEMO_CONFIG
from ivmstream.spark.decode import net_bags
from ivmstream.spark.jobs import BatchError
from ivmstream.spark.snapshot import read_snapshot

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("one_shuffle_partition")]

SAMPLE = Path(__file__).resolve().parents[2] / "services" / "fivm" / "data" / "housing.jsonl"
SERVICE = load_service("fivm")
KEYS = ("north", "south")


# --- random databases ----------------------------------------------------------------------------------

SNOWFLAKE = {  # fact R, dimensions S and U, S's own dimension T
    "R": [{"a": "int"}, {"b": "int"}, "x"],
    "S": [{"b": "int"}, {"c": "int"}, "y"],
    "T": [{"c": "int"}, "z", {"g": "str"}],
    "U": [{"a": "int"}, "w"],
}
STAR = {  # every relation holds the centre a
    "F": [{"a": "int"}, {"n": "int"}, "x"],
    "A": [{"a": "int"}, {"p": "int"}],
    "B": [{"a": "int"}, {"g": "str"}, "y"],
}
TRIANGLE = {
    "R": [{"a": "int"}, {"b": "int"}],
    "S": [{"b": "int"}, {"c": "int"}],
    "T": [{"c": "int"}, {"a": "int"}],
}
CHAIN = {  # a float and an int join variable
    "R": [{"a": "int"}, "b"],
    "S": ["b", {"c": "int"}, "x"],
    "T": [{"c": "int"}, "y"],
}
PATHS = {
    "E": [{"a": "int"}, {"b": "int"}],
    "E2": {"alias_of": "E", "columns": ["b", "c"]},
    "W": [{"c": "int"}, "x"],
}

CONFIGS: dict[str, dict[str, Any]] = {
    "count-free-snowflake": {"relations": SNOWFLAKE, "ring": "count", "free": ["g", "a"]},
    "int-sum-power-free-star": {"relations": STAR, "ring": "sum", "sum": ["a", "n", "p", "p"], "free": "g"},
    "decimal-sum-snowflake": {"relations": SNOWFLAKE, "ring": "sum", "sum": ["x", "z", "z"], "decimals": 2},
    "covariance-decimals-snowflake": {
        "relations": SNOWFLAKE,
        "ring": "covariance",
        "features": ["x", "y", "z", "w"],
        "decimals": 2,
    },
    "covariance-decimals-free-star": {
        "relations": STAR,
        "ring": "covariance",
        "features": ["x", "y", "n"],
        "free": "g",
        "decimals": 3,
    },
    "covariance-static-fivm-one": {
        "relations": SNOWFLAKE,
        "ring": "covariance",
        "features": ["w", "x", "z"],
        "decimals": 2,
        "strategy": "fivm-one",
        "updatable": ["R"],
        "model": {"label": "x", "ridge": 0.5},
    },
    "covariance-decimals-lifted-join-variables": {
        "relations": CHAIN,
        "ring": "covariance",
        "features": ["a", "b", "c", "x", "y"],
        "decimals": 1,
    },
    "covariance-float-snowflake": {
        "relations": SNOWFLAKE,
        "ring": "covariance",
        "features": ["x", "y", "z", "w"],
    },
    "count-triangle-indicators": {"relations": TRIANGLE, "ring": "count", "indicators": True},
    "count-self-join-debug": {"relations": PATHS, "ring": "count", "debug": True},
}
EXACT = [name for name in CONFIGS if "float" not in name]


def _value(rng: random.Random, column: str, typ: str, dom: int) -> Any:
    if typ == "int":
        return rng.randrange(dom) if rng.random() < 0.8 else 0  # 0: a skewed (heavy) value
    if typ == "str":
        return rng.choice("pqr")
    return rng.choice([0.0, -0.0, 1.25, -2.5, round(rng.uniform(-9, 9), 2), 0.1, 3])


def random_events(
    seed: int, relations: dict[str, Any], static: list[str], n: int = 160, dom: int = 5
) -> list[dict]:
    """Events over two keys, static relations first: inserts, duplicates and deletes (also of tuples
    never inserted, and whole tuples deleted again)."""
    rng = random.Random(seed)
    bases = {name: cols for name, cols in relations.items() if isinstance(cols, list)}
    order = [r for r in bases if r in static] + [r for r in bases if r not in static]
    events = []
    for rel in order:
        seen: list[tuple[dict, str]] = []
        for _ in range(n // len(bases)):
            if seen and rng.random() < 0.25:
                row, key = rng.choice(seen)
                delta = rng.choice([-1, -1, 1])
            else:
                key = rng.choice(KEYS)
                row = {}
                for col in bases[rel]:
                    name, typ = (col, "float") if isinstance(col, str) else next(iter(col.items()))
                    row[name] = _value(rng, name, typ, dom)
                seen.append((row, key))
                delta = rng.choice([1, 1, 2, -1])
            events.append({"relation": rel, "row": {**row, "region": key}, "delta": delta})
    return events


def write_events(path: Path, events: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def configured(tmp_path: Path, query: dict[str, Any], **extra: Any):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**query, "key_field": "region", **extra}))
    return load_config(SERVICE, path)


def bags_of(spark, config, snapshot: Path):
    """The snapshot's net bags, as the framework hands them to the jobs (cached: two jobs read them)."""
    schema = schema_of(SERVICE, config)
    bags = net_bags({n: [df] for n, df in read_snapshot(spark, snapshot, schema).items()}, schema)
    return {name: df.cache() for name, df in bags.items()}


# --- comparing states ----------------------------------------------------------------------------------


def entries(engine) -> dict[str, dict[bytes, bytes]]:
    """Every entry but the creation numbers (any creation order of a view's keys is a valid one)."""
    out: dict[str, dict[bytes, bytes]] = {}
    for name, key, value in engine.all_entries():
        if name == st.META and key == b"seq":
            continue
        if name != st.META and not name.startswith(st.SUPPORT_PREFIX):
            value = st.decode_view_value(value)[1]
        out.setdefault(name, {})[key] = value
    return out


def components(ring, payload) -> np.ndarray:
    if ring.name == "cofactor":
        s, q = payload.dense(0, len(ring.variables))
        return np.concatenate(([float(payload.count)], s.astype(float), q.astype(float).ravel()))
    return np.array([float(payload)])


def assert_float_views_close(built, replayed) -> None:
    """Views equal within float tolerance; a key one side lacks must be (nearly) zero on the other."""
    ring = replayed.ring
    assert set(built.maint.views) == set(replayed.maint.views)
    for name, view in replayed.maint.views.items():
        mine = built.maint.views[name].data
        for key in set(view.data) | set(mine):
            a = components(ring, mine[key]) if key in mine else None
            b = components(ring, view.data[key]) if key in view.data else None
            a = np.zeros_like(b) if a is None else a
            b = np.zeros_like(a) if b is None else b
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9, err_msg=f"{name} {key}")


def assert_bootstrap_equals_replay(states: dict[str, bytes], replay, options, exact: bool) -> None:
    assert sorted(states) == sorted(replay.engines)
    for key, replayed in replay.engines.items():
        built = SERVICE.engine(options)
        built.restore(states[key])
        assert built.maint.loading == replayed.maint.loading
        if exact:
            assert entries(built) == entries(replayed), key
            assert built.result() == replayed.result()
        else:
            assert_float_views_close(built, replayed)
            assert {r: s.data for r, s in built.maint.supports.items()} == {
                r: s.data for r, s in replayed.maint.supports.items()
            }
            assert diff(comparable(replayed.result()), comparable(built.result())) == []


# --- bootstrap and recompute on random databases -------------------------------------------------------


@pytest.mark.parametrize("name", list(CONFIGS))
def test_bootstrap_and_recompute_equal_the_engine_on_random_databases(spark, tmp_path, name):
    query = CONFIGS[name]
    config = configured(tmp_path, query)
    static = [r for r in query["relations"] if "updatable" in query and r not in query["updatable"]]
    events = random_events(len(name), query["relations"], static)
    snapshot = write_events(tmp_path / "snapshot.jsonl", events)
    replay = replay_all(SERVICE, config, read_source(snapshot, key_field="region"))
    assert replay.rejected == 0
    bags = bags_of(spark, config, snapshot)
    states = dict(build_state(spark, bags, config.options))
    assert_bootstrap_equals_replay(states, replay, config.options, exact=name in EXACT)
    expected = recompute(spark, bags, config.options)
    for key, engine in replay.engines.items():
        published = comparable(orjson.loads(orjson.dumps(engine.result())))  # as JSON carries it
        assert diff(expected.get(key, JOBS.empty(config.options)), published) == [], key


def test_static_relations_only_stay_in_the_loading_phase(spark, tmp_path):
    """A key that has only static relations' tuples is still loading: every view of μ(τ, all)."""
    query = CONFIGS["covariance-static-fivm-one"]
    config = configured(tmp_path, query)
    events = [e for e in random_events(5, query["relations"], ["S", "T", "U"]) if e["relation"] != "R"]
    snapshot = write_events(tmp_path / "static.jsonl", events)
    replay = replay_all(SERVICE, config, read_source(snapshot, key_field="region"))
    states = dict(build_state(spark, bags_of(spark, config, snapshot), config.options))
    assert all(e.maint.loading for e in replay.engines.values())
    assert_bootstrap_equals_replay(states, replay, config.options, exact=True)


def test_bootstrap_of_the_demo_sample_equals_its_replay(spark, tmp_path):
    config = configured(tmp_path, {k: v for k, v in DEMO_CONFIG.items() if k != "key_field"})
    replay = replay_all(SERVICE, config, read_source(SAMPLE, key_field="region"))
    bags = bags_of(spark, config, SAMPLE)
    states = dict(build_state(spark, bags, config.options))
    assert sorted(states) == ["east", "north", "south"]
    assert_bootstrap_equals_replay(states, replay, config.options, exact=True)
    expected = recompute(spark, bags, config.options)
    assert expected == {k: comparable(e.result()) for k, e in replay.engines.items()}


# --- refusals ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        {"relations": STAR, "ring": "listing", "free": ["a", "n"]},
        {"relations": STAR, "ring": "count", "strategy": "dbt"},
        {"relations": STAR, "ring": "count", "strategy": "f-re"},
    ],
)
def test_rings_and_strategies_it_cannot_build_are_refused(spark, tmp_path, query):
    config = configured(tmp_path, query)
    with pytest.raises(BatchError, match=r"^bootstrap supports rings count, sum, covariance .*use replay"):
        next(iter(build_state(spark, {}, config.options)))


def test_weighted_tuples_are_refused_by_both_jobs(spark, tmp_path):
    from ivmstream.services.fivm.batch import recompute

    config = configured(tmp_path, {"relations": STAR, "ring": "sum", "sum": ["y"], "weights": {"F": "x"}})
    with pytest.raises(BatchError, match=r"^fivm bootstrap does not handle weighted tuples"):
        next(iter(build_state(spark, {}, config.options)))
    with pytest.raises(BatchError, match=r"^fivm reconcile does not handle weighted tuples"):
        recompute(spark, {}, config.options)


def test_exact_values_beyond_38_digits_are_refused(spark, tmp_path):
    config = configured(tmp_path, {"relations": STAR, "ring": "covariance", "features": "x", "decimals": 30})
    events = random_events(3, STAR, [])
    events.append({"relation": "F", "row": {"a": 1, "n": 2, "x": 1e12, "region": "north"}, "delta": 1})
    bags = bags_of(spark, config, write_events(tmp_path / "big.jsonl", events))
    with pytest.raises(BatchError, match="38-digit"):
        dict(build_state(spark, bags, config.options))
    with pytest.raises(BatchError, match="38-digit"):
        recompute(spark, bags, config.options)


# --- with the runtime: bootstrap, stream, reconcile ----------------------------------------------------


def test_bootstrap_then_stream_equals_streaming_everything_and_reconcile_matches(
    spark, broker, redis_server, unique, tmp_path
):
    from helpers import offline_results, rocksdb_snapshots, run_worker_to_end, spark_bootstrap, stream_config

    from ivmstream.redis_client import connect
    from ivmstream.runtime.output import result_key
    from ivmstream.runtime.produce import produce_records
    from ivmstream.spark.runs import run_reconcile
    from ivmstream.state import open_store

    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    head, tail = tmp_path / "head.jsonl", tmp_path / "tail.jsonl"  # the static relations lie in the head
    head.write_bytes(b"".join(lines[: len(lines) * 6 // 10]))
    tail.write_bytes(b"".join(lines[len(lines) * 6 // 10 :]))
    topic, group, out = f"{unique}.updates", f"{unique}-g", f"{unique}.results"
    broker.create_topic(topic, 2)
    cfg = stream_config(tmp_path / "c.json", unique, **DEMO_CONFIG, checkpoint_interval=0.2)
    config = load_config(SERVICE, cfg)
    state = tmp_path / "state"
    report = spark_bootstrap(
        spark, SERVICE, config, head, group=group, state_dir=state, bootstrap=broker.bootstrap
    )
    assert report.keys == 3
    snaps = rocksdb_snapshots(
        group, state, topic, partitions=2, new_engine=lambda: SERVICE.engine(config.options)
    )
    head_replay = replay_all(SERVICE, config, read_source(head, key_field="region"))
    assert_bootstrap_equals_replay(snaps, head_replay, config.options, exact=True)

    produce_records(broker.bootstrap, topic, read_source(tail, key_field="region"))
    client = connect(redis_server.url)
    results = run_worker_to_end(
        SERVICE, config, broker.bootstrap, open_store("rocksdb", group, state_dir=state), group, client
    )
    assert results == offline_results(cfg, SAMPLE, service="fivm")

    # Spark SQL over the snapshot plus the log agrees with every published result ...
    good = run_reconcile(spark, SERVICE, config, broker.bootstrap, client, snapshot=str(head))
    assert good.verdict == "match" and good.keys == 3, good.mismatches
    # ... and catches a published result that is off in one moment.
    record = orjson.loads(client.get(result_key(out, "south")))
    record["result"]["sumprod"][1][2] += 1e-6
    client.set(result_key(out, "south"), orjson.dumps(record))
    bad = run_reconcile(spark, SERVICE, config, broker.bootstrap, client, snapshot=str(head))
    assert bad.verdict == "mismatch" and list(bad.mismatches) == ["south"]
    assert bad.mismatches["south"][0].startswith("$.sumprod[1][2]: expected")


def test_cli_bootstrap_then_stream_then_reconcile(spark, broker, redis_server, unique, tmp_path):
    """The user path on a random covariance query without a key: `ivmstream bootstrap fivm`, the rest
    streamed by a worker that resumes from that state, then reconcile says MATCH."""
    from helpers import ivm_bootstrap, run_worker_to_end, stream_config

    from ivmstream.redis_client import connect
    from ivmstream.runtime.produce import produce_records
    from ivmstream.spark.jobs import record_verdict
    from ivmstream.spark.runs import run_reconcile
    from ivmstream.state import open_store
    from ivmstream.verdict import reconcile_key

    query = CONFIGS["covariance-decimals-snowflake"]
    events = [
        {**e, "row": {k: v for k, v in e["row"].items() if k != "region"}}
        for e in random_events(9, SNOWFLAKE, [])
    ]
    head = write_events(tmp_path / "head.jsonl", events[:100])
    tail = write_events(tmp_path / "tail.jsonl", events[100:])
    topic, group = f"{unique}.updates", f"{unique}-g"
    broker.create_topic(topic, 1)
    cfg = stream_config(tmp_path / "c.json", unique, **query, checkpoint_interval=0.2)
    proc = ivm_bootstrap(
        "fivm", cfg, head, bootstrap=broker.bootstrap, state_dir=tmp_path / "s", group=group, in_process=True
    )
    assert proc.stdout.startswith("bootstrapped 1 key(s) of fivm into rocksdb state"), proc.stdout
    produce_records(broker.bootstrap, topic, read_source(tail))
    config = load_config(SERVICE, cfg)
    store = open_store("rocksdb", f"fivm.{group}", state_dir=tmp_path / "s")  # the CLI's store namespace
    client = connect(redis_server.url)
    results = run_worker_to_end(SERVICE, config, broker.bootstrap, store, group, client)
    everything = replay_all(SERVICE, config, read_source(write_events(tmp_path / "all.jsonl", events)))
    assert results == {"": everything.engines[""].result()}
    report = run_reconcile(spark, SERVICE, config, broker.bootstrap, client, snapshot=str(head))
    assert report.summary().startswith("reconcile fivm: MATCH on 1 key(s)"), report.summary()
    record_verdict(client, report)
    assert orjson.loads(client.get(reconcile_key(config.output_topic)))["verdict"] == "match"
