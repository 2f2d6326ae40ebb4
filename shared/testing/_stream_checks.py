"""The checks through the real runtime: ``ivmstream run`` on a broker publishes what ``ivmstream.replay``
computes offline, also when its worker is killed with SIGKILL mid-stream and restarted."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import orjson

from ivmstream.events import SourceRecord
from ivmstream.replay import KEYLESS, replay_all
from ivmstream.testing._cases import Case, child_environment, short

KILL_SLICES = 4  # a kill's second half goes out in this many slices: the first before the kill, others after
# A holding worker's checkpoint interval outlasts every wait here: what it applies stays uncheckpointed until
# it is killed, whatever the machine's speed and whenever it publishes (per batch, or when caught up).
HOLDING_INTERVAL = 3600.0


class Broker(Protocol):
    """What the stream checks need of a broker (``ivmstream.dev.broker.BrokerProcess`` is one)."""

    @property
    def bootstrap(self) -> str: ...

    def create_topic(self, name: str, partitions: int, *, exist_ok: bool = False) -> None: ...


@dataclass
class StreamRun:
    """One workload on its own topics, consumer group, state directory and Redis keys."""

    case: Case
    broker: Broker
    redis_url: str
    workdir: Path
    prefix: str
    backend: str = "rocksdb"
    extra: tuple[str, ...] = ()  # further ``ivmstream run`` flags (``--runtime faust``)

    @property
    def topic(self) -> str:
        return f"{self.prefix}.updates"

    @property
    def output_topic(self) -> str:
        return f"{self.prefix}.results"

    @property
    def group(self) -> str:
        return f"{self.prefix}-g"

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.prefix}.worker.log"

    def prepare(self, **runtime: Any) -> None:
        """Create the input topic and write the worker's config: the workload's, on these topics."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.broker.create_topic(self.topic, self.case.workload.partitions)
        config = {
            **self.case.workload.config,
            "input_topic": self.topic,
            "output_topic": self.output_topic,
            "dlq_topic": f"{self.prefix}.dlq",
            **runtime,
        }
        self.config_path.write_bytes(orjson.dumps(config))

    def variant(self, name: str, **runtime: Any) -> Path:
        """A copy of the prepared config with ``runtime`` over it, for ``start_worker(config=...)``."""
        path = self.workdir / f"{self.prefix}.{name}.config.json"
        path.write_bytes(orjson.dumps({**orjson.loads(self.config_path.read_bytes()), **runtime}))
        return path

    @property
    def config_path(self) -> Path:
        return self.workdir / f"{self.prefix}.config.json"

    def produce(self, records: Sequence[SourceRecord]) -> None:
        from ivmstream.runtime.produce import produce_records

        report = produce_records(self.broker.bootstrap, self.topic, records)
        if report.failures or report.sent != len(records):
            raise AssertionError(
                f"producing to {self.topic}: sent {report.sent}/{len(records)}, {report.failures}"
            )

    def worker_command(self, *extra: str, config: Path | None = None) -> list[str]:
        """``ivmstream run`` for this run's group: every worker shares the state dir, as on one machine.
        ``config``: a ``variant`` of the prepared config instead of it."""
        path = self.config_path if config is None else config
        return [
            *(sys.executable, "-m", "ivmstream.cli", "run", self.case.name),
            *("--bootstrap", self.broker.bootstrap, "--config", str(path), "--group", self.group),
            *("--state-dir", str(self.workdir / f"{self.prefix}.state"), "--state-backend", self.backend),
            *("--redis", self.redis_url, *self.extra, *extra),
        ]

    def start_worker(self, *, config: Path | None = None) -> subprocess.Popen[bytes]:
        args = self.worker_command(config=config)
        with open(self.log, "ab") as out:  # the child keeps its own descriptor
            return subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, env=child_environment(), cwd=self.workdir
            )

    def progress(self) -> list[Any]:
        from ivmstream.runtime.progress import group_progress

        return group_progress(self.broker.bootstrap, self.group, self.topic)

    def wait_for(
        self, worker: subprocess.Popen[bytes], what: str, done: Callable[[], bool], timeout: float = 120.0
    ) -> None:
        """Poll ``done`` until true; fail if the worker exits or ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while not done():
            if worker.poll() is not None:
                raise AssertionError(
                    f"{self.case}: worker exited ({worker.returncode}) waiting for {what}:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.case}: no {what} within {timeout}s:\n{self.tail()}")
            time.sleep(0.1)

    def caught_up(self) -> bool:
        return all(p.lag == 0 for p in self.progress())

    def stop(self, worker: subprocess.Popen[bytes]) -> None:
        """SIGTERM: the worker checkpoints and leaves; it must exit 0."""
        if worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(60)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        if worker.returncode != 0:
            raise AssertionError(
                f"{self.case}: worker exited {worker.returncode} when stopped:\n{self.tail()}"
            )

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else "(no log)"

    def published(self) -> dict[str, dict[str, Any]]:
        """Every key's latest record in Redis, as the worker published it."""
        from ivmstream.redis_client import connect
        from ivmstream.runtime.output import result_index, result_key

        client = connect(self.redis_url)
        try:
            keys = sorted(k.decode() for k in client.smembers(result_index(self.output_topic)))
            return {k: orjson.loads(client.get(result_key(self.output_topic, k))) for k in keys}
        finally:
            client.close()

    def published_offsets(self) -> dict[int, int]:
        """Per input partition, the furthest input offset any result published to Redis reflects."""
        reached: dict[int, int] = {}
        for record in self.published().values():
            for where, offset in record["offsets"].items():
                topic, _, partition = where.rpartition(":")
                if topic == self.topic:
                    reached[int(partition)] = max(reached.get(int(partition), 0), offset)
        return reached

    def expected(self) -> dict[str, Any]:
        """What ``ivmstream.replay`` computes over the same records, per key, as JSON."""
        run = replay_all(self.case.service, self.case.config, self.case.records)
        result = run.result() if self.case.keyed else {KEYLESS: run.result()}
        return orjson.loads(orjson.dumps(result))

    def assert_published_equals_replay(self) -> None:
        got = {k: rec["result"] for k, rec in self.published().items()}
        want = self.expected()
        if got.keys() != want.keys():
            raise AssertionError(f"{self.case}: published keys {sorted(got)} != replayed keys {sorted(want)}")
        for key in want:
            if got[key] != want[key]:
                raise AssertionError(
                    f"{self.case}: key {key!r}: published {short(got[key])} != replay {short(want[key])}"
                )


def check_stream_equals_replay(
    case: Case, broker: Broker, redis_url: str, workdir: Path, prefix: str, *, extra: Sequence[str] = ()
) -> None:
    """Produce the workload, run ``ivmstream run`` (with ``extra`` flags) until its group has
    checkpointed all of it, stop it, and compare every result it published to Redis with
    ``ivmstream.replay`` over the same records."""
    run = StreamRun(case, broker, redis_url, workdir, prefix, extra=tuple(extra))
    run.prepare(checkpoint_interval=0.3)
    run.produce(case.records)
    worker = run.start_worker()
    try:
        run.wait_for(worker, "catch-up", run.caught_up)
    finally:
        run.stop(worker)
    run.assert_published_equals_replay()


@dataclass(frozen=True)
class KillPoint:
    """What was seen just before one SIGKILL."""

    checkpointed: int  # input records covered by the group's checkpoint
    published_beyond: int  # of those partitions, how far published results ran past the checkpoint
    total: int  # records in the whole workload


def check_kill9_restart(
    case: Case,
    broker: Broker,
    redis_url: str,
    workdir: Path,
    prefix: str,
    *,
    backend: str = "rocksdb",
    kills: int = 2,
    extra: Sequence[str] = (),
) -> list[KillPoint]:
    """SIGKILL a worker ``kills`` times mid-stream, then let a last one finish; the published results
    equal ``ivmstream.replay`` over the whole workload (nothing lost, nothing applied twice).

    The workload is fed in ``kills + 1`` parts. For part k: produce its first half, start a worker and
    wait until its group checkpoints past everything before (the restart restored state and went on),
    then stop it (SIGTERM: a last checkpoint, and it leaves the group). Start a holding worker, one whose
    checkpoint interval outlasts the run, produce the first slice of the second half, wait until its
    results are published beyond the checkpoint, kill it and produce the slices left. So every kill
    lands with state checkpointed for part of the input, applied and published but not checkpointed
    work, and input not yet sent, whether the service publishes per batch or only when caught up and
    however fast its engine runs; the returned KillPoints say what was seen."""
    records = case.records
    total = len(records)
    parts = kills + 1
    if total < 4 * parts:
        raise AssertionError(f"{case}: {total} records are too few for {kills} kills")
    bounds = [total * i // parts for i in range(parts + 1)]
    run = StreamRun(case, broker, redis_url, workdir, prefix, backend, tuple(extra))
    # Small batches and frequent checkpoints make a restarted worker checkpoint several times; a short
    # session timeout lets the group drop a killed worker after a few seconds.
    run.prepare(batch_size=50, checkpoint_interval=0.3, session_timeout_ms=3000)
    holding = run.variant("holding", checkpoint_interval=HOLDING_INTERVAL)
    seen: list[KillPoint] = []
    for k in range(kills):
        start, end = bounds[k], bounds[k + 1]
        middle = (start + end) // 2
        stale = run.published_offsets()  # what killed workers published; the next must redo it
        before = seen[-1].checkpointed if seen else 0
        run.produce(records[start:middle])
        worker = run.start_worker()
        try:
            run.wait_for(
                worker, f"a checkpoint past {stale or before}", partial(_resumed, run, stale, before)
            )
        except BaseException:
            worker.kill()
            worker.wait(30)
            raise
        run.stop(worker)  # SIGTERM: a last checkpoint, then it leaves the group to the holding worker
        held, *unsent = _slices(records[middle:end], KILL_SLICES)
        worker = run.start_worker(config=holding)
        point: list[KillPoint] = []
        try:
            run.produce(held)
            ahead = partial(_ahead, run, point, total)
            run.wait_for(worker, "results published beyond the checkpoint", ahead)
        finally:
            if worker.poll() is None:
                os.kill(worker.pid, signal.SIGKILL)
            code = worker.wait(30)
        if code != -signal.SIGKILL:
            raise AssertionError(f"{case}: worker ended with {code} before it was killed:\n{run.tail()}")
        for piece in unsent:  # the rest of this part, in log order, before the next part
            run.produce(piece)
        seen.append(point[0])
    run.produce(records[bounds[kills] :])
    worker = run.start_worker()
    try:
        run.wait_for(worker, "catch-up after the kills", run.caught_up, timeout=180)
    finally:
        run.stop(worker)
    for i, p in enumerate(seen):
        if not (0 < p.checkpointed < p.total and p.published_beyond > 0):
            raise AssertionError(f"{case}: kill {i + 1} did not land mid-stream: {p}")
    if [p.checkpointed for p in seen] != sorted({p.checkpointed for p in seen}):
        raise AssertionError(f"{case}: restarted workers made no checkpointed progress: {seen}")
    run.assert_published_equals_replay()
    return seen


def _resumed(run: StreamRun, stale: Mapping[int, int], before: int) -> bool:
    """Whether the group's checkpoint covers everything published so far and has moved past ``before``."""
    progress = run.progress()
    covered = all(p.committed >= stale.get(p.partition, 0) for p in progress)
    return covered and sum(p.committed for p in progress) > before


def _slices(records: Sequence[SourceRecord], count: int) -> list[Sequence[SourceRecord]]:
    """``records`` in ``count`` consecutive, non-empty pieces (fewer when there are fewer records)."""
    count = max(1, min(count, len(records)))
    bounds = [len(records) * i // count for i in range(count + 1)]
    return [records[a:b] for a, b in itertools.pairwise(bounds)]


def _ahead(run: StreamRun, found: list[KillPoint], total: int) -> bool:
    """Whether published results (read first) reflect input past the checkpoint (read second)."""
    reached = run.published_offsets()
    progress = run.progress()
    beyond = sum(max(0, reached.get(p.partition, 0) - p.committed) for p in progress)
    if beyond:
        found.append(KillPoint(sum(p.committed for p in progress), beyond, total))
    return bool(beyond)
