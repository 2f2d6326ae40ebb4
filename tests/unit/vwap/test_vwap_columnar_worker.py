"""A vwap worker whose engines take columns (``VwapEngine.apply_columns``) against the same worker taking
events: on random order-book records (bad records, deletes of absent tuples, zero volumes, both sides,
any batch size) both publish the same records, dead-letter the same records with the same reasons and
checkpoint the same offsets and state, also across a crash and a restart from the last checkpoint."""

from __future__ import annotations

import dataclasses

import orjson
from helpers_worker import crash_then_resume, events_only, unstamped
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.config import build_config
from ivmstream.engine import columnar_entry
from ivmstream.runtime.harness import InMemoryCluster
from ivmstream.service import load_service
from ivmstream.state import MemoryStore

VWAP = load_service("vwap")


SERVICES = {"columns": VWAP, "events": events_only(VWAP)}

good = st.builds(
    lambda rel, oid, volume, price, delta: orjson.dumps(
        {
            "relation": rel,
            "row": {"t": 1, "id": oid, "broker_id": 0, "volume": volume, "price": price},
            "delta": delta,
        }
    ),
    st.sampled_from(["bids", "bids", "asks"]),
    st.integers(0, 2),
    st.integers(0, 3),  # 0: refused
    st.integers(1, 4),
    st.sampled_from([1, 1, 2, -1]),  # deletes of absent tuples refused
)
bad = st.sampled_from([b"{not json", b'{"relation": "trades", "row": {}, "delta": 1}', b'{"delta": 0}'])
records = st.tuples(good, st.lists(st.one_of(good, good, good, bad), max_size=30)).map(
    lambda t: [t[0], *t[1]]
)


def _run(name: str, values: list[bytes], batch: int, strategy: str, crash_after: int | None) -> dict:
    cluster = InMemoryCluster()
    cluster.create_topic("in", 1)
    for value in values:
        cluster.produce("in", value, None, partition=0)
    service = SERVICES[name]
    options = {"query": "vwap", "strategy": strategy, "input_topic": "in", "output_topic": "out"}
    config = build_config(service, {**options, "dlq_topic": "dlq", "batch_size": batch})
    config = dataclasses.replace(config, checkpoint_interval=0.0)  # a checkpoint after every batch
    store = MemoryStore()
    assert (columnar_entry(service.engine(config.options)) is None) == (name == "events")
    crash_then_resume(service, config, cluster, store, crash_after)
    stored = store.load("in", 0)
    return {
        "published": [unstamped(v) for v in cluster.values("out")],
        "dead letters": [(m.value(), sorted(m.headers() or [])) for m in cluster.messages("dlq")],
        "offset": stored.offset,
        "entries": {k: sorted(v) for k, v in stored.entries.items()},
    }


@settings(max_examples=25, deadline=None)
@given(records, st.integers(1, 9), st.sampled_from(["auto", "rpai"]), st.sampled_from([None, 1, 2]))
def test_columns_and_events_give_the_same_records_dead_letters_and_checkpoints(
    values, batch, strategy, crash_after
):
    runs = {name: _run(name, values, batch, strategy, crash_after) for name in SERVICES}
    assert runs["columns"] == runs["events"]
    assert any(runs["columns"]["published"])
