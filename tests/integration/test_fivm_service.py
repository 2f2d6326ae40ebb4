"""The fivm service through the real runtime: the Housing sample keyed by region, results equal to the
engine and to statistics and regressions computed here with numpy from the materialised join; bad
input dead-lettered while the partition goes on; the authors' tables produced one after another. The
generic checks (replay, kill -9, snapshots) are the conformance suite's."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from helpers import (
    REPO,
    catch_up_with_workers,
    headers,
    ivm,
    ivm_produce,
    offline_results,
    published_results,
    read_topic,
    stream_config,
    trickle,
    worker_args,
)

from ivmstream.config import build_config
from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.engine import FivmEngine, query_config, shape_result
from ivmstream.services.fivm.options import HOUSING
from ivmstream.services.fivm.service import DEMO_CONFIG, SERVICE

SAMPLE = REPO / "services" / "fivm" / "data" / "housing.jsonl"
TABLES = REPO / "tests" / "data" / "fivm_housing"
STATIC_FIRST = ("Demographics", "Transport", "Shop", "Institution", "Restaurant", "House")


def demo_config(tmp_path: Path, unique: str, **extra: Any) -> Path:
    return stream_config(
        tmp_path / "fivm.json", unique, **{**DEMO_CONFIG, "checkpoint_interval": 0.3, **extra}
    )


def events_by_key(lines: list[bytes], key_field: str) -> dict[str, list[UpdateEvent]]:
    out: dict[str, list[UpdateEvent]] = defaultdict(list)
    for line in lines:
        ev = orjson.loads(line)
        row = dict(ev["row"])
        key = row.pop(key_field)
        out[key].append(UpdateEvent(ev["relation"], row, ev["delta"], key))
    return out


def engine_results(events: dict[str, list[UpdateEvent]], config: dict[str, Any]) -> dict[str, Any]:
    """A bare ``FivmEngine`` per key fed that key's events in one batch, its result in the service's form."""
    options = build_config(SERVICE, config).options
    out = {}
    for key, evs in events.items():
        engine = FivmEngine(query_config(options))
        assert engine.apply(evs) == []
        out[key] = orjson.loads(orjson.dumps(shape_result(engine.query, engine.result(), options["model"])))
    return out


def materialised_join(events: list[UpdateEvent], features: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The join of the six relations on postcode as (feature rows, multiplicities), built here."""
    bags: dict[str, dict[tuple, int]] = defaultdict(lambda: defaultdict(int))
    for ev in events:
        bags[ev.relation][tuple(sorted(ev.row.items()))] += ev.delta
    by_postcode: dict[str, dict[int, list[tuple[dict, int]]]] = {}
    for rel, bag in bags.items():
        index: dict[int, list[tuple[dict, int]]] = defaultdict(list)
        for t, m in bag.items():
            if m:
                row = dict(t)
                index[row["postcode"]].append((row, m))
        by_postcode[rel] = index
    rows, weights = [], []
    postcodes = set.intersection(*(set(by_postcode[r]) for r in HOUSING))
    for p in sorted(postcodes):
        combos: list[tuple[dict, int]] = [({}, 1)]
        for rel in HOUSING:
            combos = [({**a, **b}, ma * mb) for a, ma in combos for b, mb in by_postcode[rel][p]]
        for row, m in combos:
            rows.append([row[f] for f in features])
            weights.append(m)
    return np.asarray(rows, dtype=np.float64), np.asarray(weights, dtype=np.int64)


def exact_moments(x: np.ndarray, m: np.ndarray) -> tuple[list[float], list[list[float]]]:
    """Σ m·x_i and Σ m·x_i·x_j in exact decimals (of the values as written), each rounded to a float."""
    rows = [[Decimal(repr(float(v))) for v in row] for row in x]
    k = x.shape[1]
    sums = [
        float(sum((w * r[i] for r, w in zip(rows, m.tolist(), strict=True)), Decimal(0))) for i in range(k)
    ]
    prods = [
        [
            float(sum((w * r[i] * r[j] for r, w in zip(rows, m.tolist(), strict=True)), Decimal(0)))
            for j in range(k)
        ]
        for i in range(k)
    ]
    return sums, prods


def test_demo_stream_equals_the_engine_and_numpy_per_region(broker, redis_server, unique, tmp_path):
    broker.create_topic(f"{unique}.updates", 2)
    cfg = demo_config(tmp_path, unique)
    trickle(broker.bootstrap, f"{unique}.updates", SAMPLE, "region", 0.0)
    args = worker_args("fivm", broker, redis_server, unique, tmp_path, cfg)
    catch_up_with_workers(args, broker, unique, tmp_path)
    published = published_results(redis_server.url, f"{unique}.results", service="fivm")

    events = events_by_key(SAMPLE.read_bytes().splitlines(), "region")
    assert published == engine_results(events, dict(DEMO_CONFIG))
    assert set(published) == {"north", "east", "south"}

    label, ridge = DEMO_CONFIG["model"]["label"], DEMO_CONFIG["model"]["ridge"]
    for key, result in published.items():
        names = result["variables"]
        x, m = materialised_join(events[key], names)
        assert (m > 0).all() and len(m) > 20  # the sample's churn leaves a set: one row per postcode
        # decimals: 4 makes the statistics exact: equal to decimal sums rounded once to a float.
        assert result["count"] == int(m.sum())
        sums, sumprods = exact_moments(x, m)
        assert result["sum"] == sums and result["sumprod"] == sumprods

        # The model equals ridge least squares on the rows of the join (the intercept is not penalised).
        features = [f for f in DEMO_CONFIG["features"] if f != label]
        design = np.repeat(np.column_stack([np.ones(len(x)), x[:, [names.index(f) for f in features]]]), m, 0)
        target = np.repeat(x[:, names.index(label)], m)
        penalty = np.sqrt(ridge) * np.eye(len(features) + 1)[1:]
        theta = np.linalg.lstsq(
            np.vstack([design, penalty]), np.concatenate([target, np.zeros(len(features))]), rcond=None
        )[0]
        model = result["model"]
        assert model["status"] == "ok" and model["features"] == features and model["count"] == len(target)
        assert model["intercept"] == pytest.approx(theta[0], rel=1e-6)
        assert [model["coefficients"][f] for f in features] == pytest.approx(theta[1:].tolist(), rel=1e-6)


def test_bad_events_go_to_the_dlq_with_reasons_and_the_partition_keeps_going(
    broker, redis_server, unique, tmp_path
):
    topic, dlq = f"{unique}.updates", f"{unique}.dlq"
    broker.create_topic(topic, 1)
    good = [line for line in SAMPLE.read_bytes().splitlines() if b'"north"' in line]
    house = orjson.loads(next(line for line in good if b'"House"' in line))
    demographics = orjson.loads(good[0])
    assert demographics["relation"] == "Demographics"

    def variant(ev: dict[str, Any], **change: Any) -> bytes:
        return orjson.dumps({**ev, **change})

    bad = {
        "malformed-json": b'{"relation": "House", "row": {',
        "unknown-relation": variant(house, relation="Houses"),
        "wrong-type": variant(house, row={**house["row"], "price": "cheap"}),
        "missing-column": variant(house, row={k: v for k, v in house["row"].items() if k != "garden"}),
        "zero-delta": variant(house, delta=0),
        # Demographics is static in the demo config: once House updates arrive it is refused.
        "static-relation": variant(demographics, row={**demographics["row"], "postcode": 1}),
    }
    third = len(good) // 3
    lines = [*good[:third], *list(bad.values())[:3], *good[third:], *list(bad.values())[3:]]
    data = tmp_path / "mixed.jsonl"
    data.write_bytes(b"\n".join(lines) + b"\n")
    cfg = demo_config(tmp_path, unique)
    ivm_produce(broker.bootstrap, topic, data, key_field="region")
    args = worker_args("fivm", broker, redis_server, unique, tmp_path, cfg)
    catch_up_with_workers(args, broker, unique, tmp_path)

    dead = read_topic(broker.bootstrap, dlq, expect=len(bad))
    by_reason = {headers(m)["ivmstream.reason"]: m for m in dead}
    assert set(by_reason) == set(bad) and len(dead) == len(bad)
    for reason, raw in bad.items():
        h = headers(by_reason[reason])
        assert by_reason[reason].value() == raw
        assert h["ivmstream.detail"] and h["ivmstream.source"].startswith(f"{topic}:0:")

    published = published_results(redis_server.url, f"{unique}.results", service="fivm")
    assert published == offline_results(cfg, data, service="fivm")
    assert published == engine_results(events_by_key(good, "region"), dict(DEMO_CONFIG))
    replayed = ivm("replay", "fivm", "--config", str(cfg), "--input", str(data), "--allow-rejects")
    assert orjson.loads(replayed.stdout.splitlines()[-1])["rejected"] == len(bad)
    assert "rejected (static-relation)" in replayed.stderr


def test_the_authors_tables_produced_one_after_another(broker, redis_server, unique, tmp_path):
    """Several tables reach one query by producing each file (relation from its name, columns from the
    service) to the topic in turn; the worker's result equals the engine over the same rows."""
    topic = f"{unique}.updates"
    broker.create_topic(topic, 1)
    query = {"relations": HOUSING, "ring": "count", "free": ["nbbedrooms"], "updatable": ["House"]}
    cfg = stream_config(tmp_path / "tables.json", unique, checkpoint_interval=0.3, **query)
    produce = ["produce", "--bootstrap", broker.bootstrap, "--service", "fivm", "--config", str(cfg)]
    for name in STATIC_FIRST:
        ivm(*produce, "--input", str(TABLES / f"{name}.tbl"))
    args = worker_args("fivm", broker, redis_server, unique, tmp_path, cfg)
    catch_up_with_workers(args, broker, unique, tmp_path)
    published = published_results(redis_server.url, f"{unique}.results", service="fivm")

    events = []
    for name in STATIC_FIRST:
        for line in (TABLES / f"{name}.tbl").read_text().splitlines():
            values = map(float, line.rstrip("|").split("|"))
            events.append(UpdateEvent(name, dict(zip(HOUSING[name], values, strict=True)), 1, None))
    want = engine_results({"": events}, query)
    assert published == want
    counts = {g["key"]["nbbedrooms"]: g["value"] for g in want[""]["groups"]}
    assert sum(counts.values()) == len(
        (TABLES / "House.tbl").read_text().splitlines()
    )  # one row per postcode
