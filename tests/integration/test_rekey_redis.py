"""The re-keying marks on the Redis store: a keyed view over Debezium topics whose re-keyed topic holds
every event twice (a step restarted without a checkpoint) and whose worker, keeping its state in a real
redis-server, crashes mid-stream and restarts: the marks (``\\0origins`` in each partition's hash) are
written in the same MULTI/EXEC as the state, restored, and drop every copy, so the view equals the
offline replay; each partition's stored marks are the last origin tags it holds."""

from __future__ import annotations

from typing import Any

import pytest

from ivmstream.runtime import Worker
from ivmstream.runtime.harness import run_to_end
from ivmstream.runtime.hooks import CheckpointWritten, Hooks
from ivmstream.runtime.partition import origin_marks
from ivmstream.runtime.rekey import ORIGIN_HEADER
from ivmstream.state import MemoryStore, open_store
from tests.helpers_cdc import workload
from tests.unit.test_rekey import REKEYED, SERVICE, _cluster, _config, _step_until_done, offline, published


class Crash(Exception):
    pass


def test_marks_in_redis_drop_the_copies_across_a_crash(redis_server: Any, unique: str) -> None:
    w = workload(seed=9, changes=300, key_field="tenant")
    cluster, config = _cluster(w), _config(batch_size=23, checkpoint_interval=1e-9)
    _step_until_done(cluster, config, MemoryStore())
    _step_until_done(cluster, config, MemoryStore())  # no checkpoint to resume from: every event again
    tags = [dict(m.headers() or [])[ORIGIN_HEADER] for m in cluster.messages(REKEYED)]
    assert len(tags) == 2 * len(set(tags))

    def store() -> Any:
        return open_store("redis", f"{unique}.rekeyed", redis_url=redis_server.url)

    seen = [0]

    def crash(_cp: CheckpointWritten) -> None:
        seen[0] += 1
        if seen[0] == 4:
            raise Crash

    with pytest.raises(Crash):
        run_to_end(Worker(SERVICE, config, cluster, store(), hooks=Hooks(checkpoint_written=[crash])))
    run_to_end(Worker(SERVICE, config, cluster, store()))
    assert published(cluster) == offline(w)

    last: dict[int, dict[str, tuple[int, int]]] = {}
    for msg in cluster.messages(REKEYED):
        tag = dict(msg.headers() or [])[ORIGIN_HEADER].decode()
        where, offset, index = tag.rsplit(":", 2)
        marks = last.setdefault(msg.partition(), {})  # type: ignore[arg-type]
        marks[where] = max(marks.get(where, (-1, -1)), (int(offset), int(index)))
    reader = store()
    for partition, expected in last.items():
        assert origin_marks(reader.load(REKEYED, partition).origins) == expected
