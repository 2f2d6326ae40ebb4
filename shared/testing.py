"""The conformance suite: what every service is checked for, just by existing.

``tests/conformance/test_conformance.py`` runs each ``check_*`` below over every service that
``available_services()`` finds and each of its workloads (``ServiceDefinition.demo`` and
``ServiceDefinition.workloads``). The checks use only the declaration, so a new service folder is
checked with no test of its own:

- ``check_snapshot_restore``: restoring a snapshot taken at any of several cut points and applying
  the rest equals never having stopped (same result, same snapshot bytes); an IncrementalEngine
  rebuilt from its checkpointed entries is the same engine too;
- ``check_determinism``: a second run, in another process with another hash seed, gives the same
  results and snapshot bytes;
- ``check_rejections_change_nothing``: an engine that refuses events ends where an engine that never
  saw them ends, and generic probes (duplicates, negated and scaled deltas) provoke some refusal;
- ``check_stream_equals_replay``: ``ivmstream run`` over the workload on a broker publishes exactly
  what ``ivmstream.replay`` computes offline;
- ``check_kill9_restart``: the same, with the worker killed with SIGKILL mid-stream and restarted.

The checks raise AssertionError with a readable message; they import no test framework.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import Any, Protocol

import orjson

from ivmstream.config import ServiceConfig, build_config, schema_of
from ivmstream.engine import Engine, Rejection, is_incremental
from ivmstream.events import EventCodec, EventError, SourceRecord, UpdateEvent, read_source
from ivmstream.replay import KEYLESS, replay_all
from ivmstream.service import DemoWorkload, ServiceDefinition, available_services, load_service

PROJECT_ROOT = Path(__file__).resolve().parents[1]  # holds the shared/ and services/ packages
PROBE_SCALE = 1000  # a negated delta this many times larger deletes more copies than any workload holds
KILL_SLICES = 4  # a kill's second half goes out in this many slices: more chances to catch work in flight


class Broker(Protocol):
    """What the stream checks need of a broker (``ivmstream.dev.broker.BrokerProcess`` is one)."""

    @property
    def bootstrap(self) -> str: ...

    def create_topic(self, name: str, partitions: int, *, exist_ok: bool = False) -> None: ...


# --- cases -------------------------------------------------------------------------------------------


@dataclass
class Case:
    """One service (by the name the CLI loads it with) and one of its workloads."""

    name: str
    service: ServiceDefinition
    workload: DemoWorkload

    def __str__(self) -> str:
        return f"{self.name}/{self.workload.name}"

    @cached_property
    def config(self) -> ServiceConfig:
        return build_config(self.service, dict(self.workload.config), source=f"{self} workload config")

    @property
    def keyed(self) -> bool:
        return self.config.key_field is not None

    @cached_property
    def records(self) -> list[SourceRecord]:
        """The workload's records, as ``produce`` puts them on the wire and ``replay`` reads them."""
        w = self.workload
        source = read_source(w.input, w.format, key_field=self.config.key_field, **w.read_options)
        return [r for r in source if r.error is None]

    def events_by_key(self) -> dict[str, list[UpdateEvent]]:
        """Freshly decoded events per partition key, in log order (what the runtime hands each engine);
        records the codec refuses never reach an engine and are left out."""
        codec = EventCodec(schema_of(self.service, self.config))
        out: dict[str, list[UpdateEvent]] = {}
        for item in codec.decode_many(r.value for r in self.records):
            if not isinstance(item, EventError):
                out.setdefault(item.key if self.keyed else KEYLESS, []).append(item)
        return out

    def engine(self) -> Engine:
        return self.service.engine(self.config.options)


def conformance_cases(names: Iterable[str] | None = None) -> list[Case]:
    """Every (service, workload) pair: the demo first, then the further workloads."""
    cases = []
    for name in sorted(names if names is not None else available_services()):
        service = load_service(name)
        workloads = [w for w in (service.demo, *service.workloads) if w is not None]
        names_seen = [w.name for w in workloads]
        if len(set(names_seen)) != len(names_seen):
            raise AssertionError(f"service {name}: workload names repeat: {names_seen}")
        cases += [Case(name, service, w) for w in workloads]
    return cases


# --- in-process checks ---------------------------------------------------------------------------------


def _codes(rejections: Sequence[Rejection], offset: int = 0) -> list[tuple[int, str]]:
    return [(r.index + offset, r.code) for r in rejections]


def _short(value: Any, width: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _assert_same_state(got: Engine, want: Engine, where: str) -> None:
    """Same result and same snapshot bytes, or an AssertionError saying which differs."""
    got_result, want_result = got.result(), want.result()
    if got_result != want_result:
        raise AssertionError(f"{where}: result {_short(got_result)} != {_short(want_result)}")
    got_snap, want_snap = got.snapshot(), want.snapshot()
    if got_snap != want_snap:
        at = next((i for i, (a, b) in enumerate(zip(got_snap, want_snap, strict=False)) if a != b), None)
        at = min(len(got_snap), len(want_snap)) if at is None else at
        raise AssertionError(
            f"{where}: snapshots differ at byte {at} of {len(got_snap)}/{len(want_snap)}: "
            f"{got_snap[max(0, at - 40) : at + 40]!r} != {want_snap[max(0, at - 40) : at + 40]!r}"
        )


def cut_points(n: int, count: int = 5) -> list[int]:
    """``count`` positions spread over ``0..n``, both ends included."""
    return sorted({n * i // (count - 1) for i in range(count)})


def check_snapshot_restore(case: Case, cuts: int = 5) -> int:
    """Per key, at each cut point: apply the events before it, snapshot, restore into a fresh engine
    and apply the rest; the result and final snapshot bytes equal those of an engine that applied the
    same two batches without stopping, and a restored engine snapshots to the bytes it was given.
    Returns the number of restores checked."""
    checked = 0
    for key, events in case.events_by_key().items():
        n = len(events)
        for cut in cut_points(n, cuts):
            where = f"{case}: key {key!r} restored after event {cut} of {n}"
            straight = case.engine()
            first = _codes(straight.apply(list(events[:cut])))
            rest = _codes(straight.apply(list(events[cut:])), cut)

            fresh = case.engine()
            before = _codes(fresh.apply(list(events[:cut])))
            snap = fresh.snapshot()
            restored = case.engine()
            restored.restore(snap)
            if restored.snapshot() != snap:
                raise AssertionError(f"{where}: snapshot -> restore -> snapshot changes the bytes")
            if restored.result() != fresh.result():
                raise AssertionError(f"{where}: the restored engine's result differs right after restore")
            after = _codes(restored.apply(list(events[cut:])), cut)
            if (before, after) != (first, rest):
                raise AssertionError(f"{where}: refusals differ: {before + after} != {first + rest}")
            _assert_same_state(restored, straight, where)
            if is_incremental(straight) and cut:
                _check_entries_restore(case, events, cut, where)
            checked += 1
    return checked


def _check_entries_restore(case: Case, events: Sequence[UpdateEvent], cut: int, where: str) -> None:
    """For an IncrementalEngine, the runtime's other checkpoint path: a full scan of the entries after
    the first batch, the changed entries after the second; a fresh engine rebuilt from what that stored
    is the same engine, and stays the same over the rest of the events."""
    half = cut // 2
    live: Any = case.engine()
    live.apply(list(events[:half]))
    live.changed_entries()  # a first checkpoint writes every entry instead
    stored = {(m, k): v for m, k, v in live.all_entries()}
    live.apply(list(events[half:cut]))
    for m, k, v in live.changed_entries():
        if v is None:
            stored.pop((m, k), None)
        else:
            stored[(m, k)] = v
    if stored != {(m, k): v for m, k, v in live.all_entries()}:
        raise AssertionError(f"{where}: the changed entries do not add up to the engine's entries")
    rebuilt: Any = case.engine()
    rebuilt.restore_entries([(m, k, v) for (m, k), v in stored.items()])
    _assert_same_entries(rebuilt, live, f"{where} (rebuilt from its changed entries)")
    rebuilt.apply(list(events[cut:]))
    live.apply(list(events[cut:]))
    _assert_same_entries(rebuilt, live, f"{where} (rebuilt from its changed entries, then the rest applied)")


def _assert_same_entries(got: Any, want: Any, where: str) -> None:
    """Same result and the same entries. Entries are restored in any order, so a snapshot's bytes
    (which may follow the order state was built in) are not compared on this path."""
    if got.result() != want.result():
        raise AssertionError(f"{where}: result {_short(got.result())} != {_short(want.result())}")
    mine, theirs = {(m, k): v for m, k, v in got.all_entries()}, {(m, k): v for m, k, v in want.all_entries()}
    if mine != theirs:
        differ = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        raise AssertionError(f"{where}: {len(differ)} entries differ, e.g. {_short(differ[:3])}")


def state_digest(case: Case) -> dict[str, list[Any]]:
    """Per key: the final result (as published, JSON) and the SHA-256 of the final snapshot."""
    out: dict[str, list[Any]] = {}
    for key, events in sorted(case.events_by_key().items()):
        engine = case.engine()
        engine.apply(events)
        out[key] = [
            orjson.loads(orjson.dumps(engine.result())),
            hashlib.sha256(engine.snapshot()).hexdigest(),
        ]
    return out


def check_determinism(case: Case, env: Mapping[str, str] | None = None) -> None:
    """Two runs agree: one here and one in a child process with a different hash seed, so state that
    depends on set or dict iteration order of hashed strings shows up."""
    here = state_digest(case)
    child_env = {**child_environment(env), "PYTHONHASHSEED": str(_other_hash_seed())}
    proc = subprocess.run(
        [sys.executable, "-m", "ivmstream.testing", "digest", case.name, case.workload.name],
        capture_output=True,
        text=True,
        env=child_env,
        cwd=PROJECT_ROOT,
        timeout=300,
    )
    if proc.returncode != 0:
        raise AssertionError(f"{case}: the second run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    there = json.loads(proc.stdout)
    if there.keys() != here.keys():
        raise AssertionError(f"{case}: keys differ between runs: {sorted(here)} != {sorted(there)}")
    for key in here:
        if here[key][0] != there[key][0]:
            raise AssertionError(
                f"{case}: key {key!r}: results differ between runs: {_short(here[key][0])} != "
                f"{_short(there[key][0])}"
            )
        if here[key][1] != there[key][1]:
            raise AssertionError(f"{case}: key {key!r}: snapshots differ between runs (hash seeds differ)")


def _other_hash_seed() -> int:
    own = os.environ.get("PYTHONHASHSEED", "")
    return 2 if own == "1" else 1


def probes(event: UpdateEvent) -> list[UpdateEvent]:
    """Well-formed events an engine may refuse, made from a workload event: the same event again (a
    duplicate insert), its undo, and its undo scaled far beyond any multiplicity the workload builds."""
    return [
        UpdateEvent(event.relation, dict(event.row), event.delta, event.key),
        UpdateEvent(event.relation, dict(event.row), -event.delta, event.key),
        UpdateEvent(event.relation, dict(event.row), -event.delta * PROBE_SCALE, event.key),
    ]


def probe_batch(
    events: Sequence[UpdateEvent], cut: int, window: int = 40, earlier: int = 20
) -> list[UpdateEvent]:
    """The next ``window`` events after ``cut``, each followed by its probes, after probes of up to
    ``earlier`` events spread over the ones already applied."""
    step = max(1, cut // earlier) if cut else 1
    batch = [p for ev in events[:cut:step] for p in probes(ev)]
    for ev in events[cut : cut + window]:
        batch.append(ev)
        batch += probes(ev)
    return batch


def check_rejections_change_nothing(case: Case) -> int:
    """Per key: apply the first half of the events, then a batch of workload events mixed with probes.
    Whatever the engine refused must have changed nothing: an engine given the same batch without the
    refused events accepts all of it and ends with the same result and snapshot bytes. Fails if no
    probe is refused for any key, since then nothing was checked. Returns the number of refusals."""
    refused = 0
    for key, events in case.events_by_key().items():
        cut = len(events) // 2
        where = f"{case}: key {key!r}, probes after event {cut} of {len(events)}"
        probed = case.engine()
        probed.apply(list(events[:cut]))
        rejections = probed.apply(probe_batch(events, cut))
        dropped = {r.index for r in rejections}
        for r in rejections:
            if not (isinstance(r.code, str) and r.code):
                raise AssertionError(f"{where}: refusal {r!r} has no reason code")

        clean = case.engine()
        clean.apply(list(events[:cut]))
        kept = [ev for i, ev in enumerate(probe_batch(events, cut)) if i not in dropped]
        again = clean.apply(kept)
        if again:
            raise AssertionError(
                f"{where}: without the refused events, the batch still had refusals {_codes(again)[:5]}: "
                "a refused event changed the state"
            )
        _assert_same_state(probed, clean, f"{where} ({len(rejections)} refused)")
        refused += len(rejections)
    if not refused:
        raise AssertionError(
            f"{case}: no probe (duplicate, undo or scaled undo of a workload event) was refused, so "
            "refusals were not checked; the workload should make some of these impossible"
        )
    return refused


# --- through the real runtime --------------------------------------------------------------------------


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment (ivmstream is installed; PYTHONPATH is passed on, so services that
    other directories on it register are found), quieter logs, and ``extra``."""
    env = dict(os.environ)
    env.setdefault("IVMSTREAM_LOG_LEVEL", "WARNING")
    env.update(extra or {})
    return env


@dataclass
class StreamRun:
    """One workload on its own topics, consumer group, state directory and Redis keys."""

    case: Case
    broker: Broker
    redis_url: str
    workdir: Path
    prefix: str
    backend: str = "rocksdb"

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

    def worker_command(self, *extra: str) -> list[str]:
        """``ivmstream run`` for this run's group: every worker shares the state dir, as on one machine."""
        return [
            *(sys.executable, "-m", "ivmstream.cli", "run", self.case.name),
            *("--bootstrap", self.broker.bootstrap, "--config", str(self.config_path), "--group", self.group),
            *("--state-dir", str(self.workdir / f"{self.prefix}.state"), "--state-backend", self.backend),
            *("--redis", self.redis_url, *extra),
        ]

    def start_worker(self) -> subprocess.Popen[bytes]:
        args = self.worker_command()
        with open(self.log, "ab") as out:  # the child keeps its own descriptor
            return subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, env=child_environment(), cwd=PROJECT_ROOT
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
                    f"{self.case}: key {key!r}: published {_short(got[key])} != replay {_short(want[key])}"
                )


def check_stream_equals_replay(
    case: Case, broker: Broker, redis_url: str, workdir: Path, prefix: str
) -> None:
    """Produce the workload, run ``ivmstream run`` until its group has checkpointed all of it, stop it,
    and compare every result it published to Redis with ``ivmstream.replay`` over the same records."""
    run = StreamRun(case, broker, redis_url, workdir, prefix)
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
) -> list[KillPoint]:
    """SIGKILL a worker ``kills`` times mid-stream, then let a last one finish; the published results
    equal ``ivmstream.replay`` over the whole workload (nothing lost, nothing applied twice).

    The workload is fed in ``kills + 1`` parts. For part k: produce its first half, start a worker and
    wait until its group checkpoints past everything before (the restart restored state and went on);
    produce the second half, slice by slice, until the worker is seen with results published beyond its
    checkpoint (a slice checkpointed before a poll caught it is followed by the next); then kill it and
    produce the slices left. So every kill lands with applied, published, not yet checkpointed work, and
    before the end of the input; the returned KillPoints say what was seen."""
    records = case.records
    total = len(records)
    parts = kills + 1
    if total < 4 * parts:
        raise AssertionError(f"{case}: {total} records are too few for {kills} kills")
    bounds = [total * i // parts for i in range(parts + 1)]
    run = StreamRun(case, broker, redis_url, workdir, prefix, backend)
    # Checkpoints a second apart leave uncheckpointed work in sight long enough to kill a worker holding
    # some; a short session timeout lets the group drop a killed worker after a few seconds.
    run.prepare(batch_size=50, checkpoint_interval=1.0, session_timeout_ms=3000)
    seen: list[KillPoint] = []
    for k in range(kills):
        start, end = bounds[k], bounds[k + 1]
        middle = (start + end) // 2
        stale = run.published_offsets()  # what killed workers published; the next must redo it
        before = seen[-1].checkpointed if seen else 0
        run.produce(records[start:middle])
        worker = run.start_worker()
        point: list[KillPoint] = []
        try:
            run.wait_for(
                worker, f"a checkpoint past {stale or before}", partial(_resumed, run, stale, before)
            )
            unsent = _slices(records[middle:end], KILL_SLICES)
            while unsent and not point:
                run.produce(unsent.pop(0))
                # a slice the worker checkpointed before a poll saw it ahead is followed by the next one
                settled = partial(_ahead_or_caught_up, run, point, total)
                run.wait_for(worker, "results published beyond the checkpoint", settled)
        finally:
            if worker.poll() is None:
                os.kill(worker.pid, signal.SIGKILL)
            code = worker.wait(30)
        if code != -signal.SIGKILL:
            raise AssertionError(f"{case}: worker ended with {code} before it was killed:\n{run.tail()}")
        if not point:
            raise AssertionError(f"{case}: every slice was checkpointed before results beyond it were seen")
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


def _ahead_or_caught_up(run: StreamRun, found: list[KillPoint], total: int) -> bool:
    """Results are ahead of the checkpoint (kill now), or the checkpoint already covers the input."""
    return _ahead(run, found, total) or run.caught_up()


def _ahead(run: StreamRun, found: list[KillPoint], total: int) -> bool:
    """Whether published results (read first) reflect input past the checkpoint (read second)."""
    reached = run.published_offsets()
    progress = run.progress()
    beyond = sum(max(0, reached.get(p.partition, 0) - p.committed) for p in progress)
    if beyond:
        found.append(KillPoint(sum(p.committed for p in progress), beyond, total))
    return bool(beyond)


# --- child-process entry point (the second run of check_determinism) ----------------------------------


def _main(argv: Sequence[str]) -> int:
    if len(argv) != 3 or argv[0] != "digest":
        print("usage: python -m ivmstream.testing digest SERVICE WORKLOAD", file=sys.stderr)
        return 2
    [case] = [c for c in conformance_cases([argv[1]]) if c.workload.name == argv[2]]
    sys.stdout.write(json.dumps(state_digest(case)))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
