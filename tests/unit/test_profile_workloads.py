"""The profiles replay a short trace on fresh engines: each round's batches go to its own engine, in
order, and the result read after a batch is that engine's."""

from __future__ import annotations

from bench.profile_workloads import _Rounds


class _Recorder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def apply(self, batch: list[str]) -> list[str]:
        self.seen.extend(batch)
        return []

    def result(self) -> list[str]:
        return list(self.seen)


def test_each_round_goes_to_a_fresh_engine_and_reads_it() -> None:
    engines = [_Recorder(), _Recorder(), _Recorder()]
    replay = _Rounds(engines, batches_per_round=2)
    trace = [["a"], ["b", "c"]]
    reads = []
    for batch in trace * 3:
        assert replay.apply(batch) == []
        reads.append(replay.result())
    assert [e.seen for e in engines] == [["a", "b", "c"]] * 3
    assert reads == [["a"], ["a", "b", "c"]] * 3
