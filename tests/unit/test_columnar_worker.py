"""A worker whose engine takes columns (``apply_columns``) against the same worker taking events: on random
records (bad ones, deletes refused below zero, several keys and partitions, any batch size) both publish
the same records, dead-letter the same records with the same reasons, checkpoint the same offsets and
state and count the same events per relation, also across a crash and a restart from the last
checkpoint. The columnar worker's records are decoded as columns (``EventCodec.decode_columns``)."""

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

REFERENCE = load_service("reference")


SERVICES = {"columns": REFERENCE, "events": events_only(REFERENCE)}

good = st.builds(
    lambda item, price, store, delta: orjson.dumps(
        {"relation": "items", "row": {"item": item, "qty": 2, "price": price, "store": store}, "delta": delta}
    ),
    st.sampled_from("ab"),
    st.sampled_from(["1.5", "1.50", "2", "+.5", "-0", "0.00", "1e1", 2.5, 10]),  # strings reach it as text
    st.sampled_from(["s", "t", "u"]),
    st.sampled_from([1, 1, 2, -1, -3]),
)
bad = st.sampled_from([b"{not json", b'{"relation": "nope", "row": {}, "delta": 1}', b'{"delta": 0}'])
records = st.tuples(good, st.lists(st.one_of(good, good, good, bad), max_size=30)).map(
    lambda t: [t[0], *t[1]]
)


def _run(name: str, values: list[bytes], batch: int, crash_after: int | None) -> dict:
    cluster = InMemoryCluster()
    cluster.create_topic("in", 2)
    for i, value in enumerate(values):
        cluster.produce("in", value, b"k", partition=i % 2)
    service = SERVICES[name]
    config = build_config(
        service,
        {
            "key_field": "store",
            "input_topic": "in",
            "output_topic": "out",
            "dlq_topic": "dlq",
            "batch_size": batch,
        },
    )
    config = dataclasses.replace(config, checkpoint_interval=0.0)  # a checkpoint after every batch
    store = MemoryStore()
    assert (columnar_entry(service.engine(config.options)) is None) == (name == "events")
    worker = crash_then_resume(service, config, cluster, store, crash_after)
    stored = {p: store.load("in", p) for p in (0, 1)}
    return {
        "published": [unstamped(v) for v in cluster.values("out")],
        "dead letters": [(m.value(), sorted(m.headers() or [])) for m in cluster.messages("dlq")],
        "offsets": {p: cp.offset for p, cp in stored.items()},
        "entries": {p: {k: sorted(v) for k, v in cp.entries.items()} for p, cp in stored.items()},
        "events per relation": worker.coverage.counts,
    }


@settings(max_examples=40, deadline=None)
@given(records, st.integers(1, 7), st.sampled_from([None, 1, 2]))
def test_columns_and_events_give_the_same_records_dead_letters_and_checkpoints(values, batch, crash_after):
    runs = {name: _run(name, values, batch, crash_after) for name in SERVICES}
    assert runs["columns"] == runs["events"]
    assert any(runs["columns"]["published"])
