"""``emit: every-event``: a JSON Patch of each key's result after every event, tagged with the event's
offset, on the output topic (docs/architecture.md, "Result modes"). Through a worker killed twice
mid-stream: per key, the records deduplicated by event replay into exactly the results an engine gives
after each accepted event, and a record published twice is the same record."""

from __future__ import annotations

import orjson
import pytest
from helpers import read_topic

from ivmstream.changelog import apply
from ivmstream.service import DemoWorkload, load_service
from ivmstream.testing import Case, check_kill9_restart


@pytest.mark.slow
def test_every_event_changelog_through_kill9_restarts_equals_results_after_each_event(
    broker, redis_server, unique, tmp_path
):
    service = load_service("reference")
    assert service.demo is not None
    workload = DemoWorkload(
        input=service.demo.input,
        config={**service.demo.config, "emit": "every-event"},
        partitions=service.demo.partitions,
        name="every-event",
    )
    case = Case("reference", service, workload)
    check_kill9_restart(case, broker, redis_server.url, tmp_path, unique)  # Redis keeps the replay's results

    expected: dict[str, list[dict]] = {}
    for key, events in case.events_by_key().items():
        engine = case.engine()
        for ev in events:
            if not engine.apply([ev]):
                expected.setdefault(key, []).append(orjson.loads(orjson.dumps(engine.result())))

    by_event: dict[str, dict] = {}
    for msg in read_topic(broker.bootstrap, f"{unique}.results"):
        record = orjson.loads(msg.value())
        assert msg.key().decode() == record["key"]
        held = by_event.setdefault(record["event"], record)
        assert held == record  # a replay after a kill publishes the same change again
    got: dict[str, list[dict]] = {}
    docs: dict[str, dict] = {}
    for record in sorted(by_event.values(), key=lambda r: int(r["event"].rsplit(":", 1)[1])):
        key = record["key"]
        topic, partition, offset = record["event"].rsplit(":", 2)
        assert record["offsets"] == {f"{topic}:{partition}": int(offset) + 1}
        docs[key] = apply(docs.get(key, {}), record["patch"])
        got.setdefault(key, []).append(docs[key])
    assert got == expected
