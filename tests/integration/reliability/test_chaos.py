"""Chaos: workers SIGKILLed and restarted at seeded random points, and a rebalance storm.

``make test`` runs the template service's workload through three kill rounds and a short storm; ``make
chaos`` (``IVMSTREAM_CHAOS=long``) runs every service's, with more rounds and a longer storm.

Two workers share one consumer group (and the Redis state backend, as workers on different machines
would), so every kill and every restart moves partitions between them. Whatever the interleaving, the
results they published must equal ``replay`` of the whole input: nothing lost, nothing counted twice.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path

import pytest
from reliability_runs import Run, demo_cases, parts, redone, uncheckpointed

from ivmstream.testing import Case

SEED = 20261123
LONG = os.environ.get("IVMSTREAM_CHAOS") == "long"
# Each kill run takes ~10 s a service: the short form kills the template service's workers only.
ROUNDS = 7 if LONG else 3
STORMS = 6 if LONG else 2
SESSION_MS = 1000  # a killed worker's partitions move after this long
FAST = "reference"
cases = pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.name) for c in demo_cases() if LONG or c.name == FAST],
)


def _wait_all(
    run: Run,
    workers: Mapping[str, subprocess.Popen[bytes]],
    what: str,
    done: Callable[[], bool],
    timeout: float = 90.0,
) -> None:
    """Poll ``done`` until true; fail if any worker exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not done():
        for name, worker in workers.items():
            if worker.poll() is not None:
                raise AssertionError(
                    f"worker {name} exited ({worker.returncode}) waiting for {what}:\n{run.tail()}"
                )
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout}s:\n{run.tail()}")
        time.sleep(0.1)


def _stop_all(run: Run, workers: Mapping[str, subprocess.Popen[bytes]]) -> None:
    """SIGTERM every live worker at once (each checkpoints and leaves); each must exit 0."""
    live = {name: w for name, w in workers.items() if w.poll() is None}
    for worker in live.values():
        worker.terminate()
    for name, worker in live.items():
        # one SIGTERM only: a second one landing during interpreter shutdown (when Python has put the
        # default action back) would kill a worker that had already stopped cleanly
        try:
            code = worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            code = worker.wait()
        assert code == 0, f"worker {name} exited {code} when stopped:\n{run.tail()}"


def _kill(worker: subprocess.Popen[bytes]) -> int:
    if worker.poll() is None:
        os.kill(worker.pid, signal.SIGKILL)
    return worker.wait(30)


def _assignments(run: Run, name: str) -> list[int]:
    """The input partitions worker ``name`` was assigned, one per assignment, from its log."""
    pattern = re.compile(rf"assigned {re.escape(run.topic)}:(\d+) from offset")
    log = run.worker_log(name)
    return [int(p) for p in pattern.findall(log.read_text(errors="replace"))] if log.exists() else []


def _assigned_since(run: Run, name: str, seen: int) -> bool:
    return len(_assignments(run, name)) > seen


def _owns_all(run: Run, name: str) -> bool:
    return run.owned(name) == run.case.workload.partitions


def _assigned(run: Run, name: str) -> set[int]:
    return set(_assignments(run, name))


def _checkpointed(run: Run) -> int:
    return sum(p.committed for p in run.progress())


def _ahead_or_done(run: Run) -> bool:
    return uncheckpointed(run) > 0 or run.caught_up()


def _all_running(run: Run, names: Iterable[str]) -> bool:
    """Every named worker's latest life has logged that it runs, which it does once its SIGTERM handler
    is installed (before that, SIGTERM just kills it: nothing to checkpoint yet, but not a clean 0)."""
    lives = (run.worker_log(name).read_text(errors="replace").rsplit("--- start", 1)[-1] for name in names)
    return all(" INFO ivmstream: running " in life for life in lives)


@cases
def test_seeded_kills_of_two_workers_in_one_group_equal_replay(
    case: Case, broker, redis_server, unique, tmp_path: Path
):
    """Each round: the last round's redone work is checkpointed, a new part of the input arrives, and
    after a seeded random delay, once results are published past the checkpoint, one worker, the other
    or both (in seeded order) are SIGKILLed and restarted; a lone victim only once the survivor has
    taken every partition. Killing each worker alone once moves some partition between them, whatever
    the assignor decides when both restart."""
    rng = random.Random(f"{SEED}:{case.name}")
    run = Run(case, broker, redis_server.url, tmp_path, unique, backend="redis")
    # Checkpoints a second apart leave published, uncheckpointed work in sight long enough to kill.
    run.prepare(batch_size=20, checkpoint_interval=1.0, session_timeout_ms=SESSION_MS)
    chunks = parts(case.records, ROUNDS + 1)
    workers = {name: run.start_named(name) for name in ("a", "b")}
    # each worker killed alone once and both together once, then (long form) seeded picks
    plans = [["a"], ["b"], ["a", "b"]]
    plans += [rng.sample(["a", "b"], rng.randint(1, 2)) for _ in range(ROUNDS - len(plans))]
    rng.shuffle(plans)
    kills: list[tuple[list[str], list[int], int]] = []  # victims, their exit codes, work lost with them
    try:
        for chunk, victims in zip(chunks, plans, strict=False):
            _wait_all(run, workers, "the killed work redone and checkpointed", partial(redone, run))
            run.produce(chunk)
            time.sleep(rng.uniform(0.0, 0.4))
            # (or, should the window be missed, the chunk checkpointed: the kill then lands after it)
            _wait_all(run, workers, "results published past the checkpoint", partial(_ahead_or_done, run))
            lost = uncheckpointed(run)
            kills.append((victims, [_kill(workers[v]) for v in victims], lost))
            for name in (n for n in workers if n not in victims):
                # restart the victim only once the survivor owns every partition: the victim's moved
                owns_all = partial(_owns_all, run, name)
                _wait_all(run, {name: workers[name]}, f"{name} to own every partition", owns_all)
            workers.update({v: run.start_named(v) for v in victims})
        run.produce(chunks[-1])
        _wait_all(run, workers, "catch-up after the kills", run.caught_up)
        _wait_all(run, workers, "every worker running", partial(_all_running, run, list(workers)))
    finally:
        _stop_all(run, workers)
    for victims, codes, _lost in kills:
        assert codes == [-signal.SIGKILL] * len(victims), run.tail()  # killed, never crashed by itself
    assert any(lost for _v, _c, lost in kills), f"no kill met published, uncheckpointed work: {kills}"
    a, b = _assigned(run, "a"), _assigned(run, "b")
    assert a & b, f"no partition moved between the workers: a had {a}, b had {b}"
    run.assert_published_equals_replay()


def test_rebalance_storm_makes_progress_and_loses_nothing(broker, redis_server, unique, tmp_path: Path):
    """A steady worker while another joins and leaves again and again: each round, the group checkpoints
    further, and at the end the published results equal replay. Each joiner starts once the steady
    worker owns every partition, so every round moves partitions to the joiner and back."""
    [case] = [c for c in demo_cases() if c.name == FAST]
    run = Run(case, broker, redis_server.url, tmp_path, unique, backend="redis")
    run.prepare(batch_size=20, checkpoint_interval=0.3, session_timeout_ms=SESSION_MS)
    chunks = parts(case.records, STORMS + 1)
    steady = run.start_named("steady")
    checkpointed = [0]
    try:
        for chunk in chunks[:STORMS]:
            _wait_all(
                run, {"steady": steady}, "steady to own every partition", partial(_owns_all, run, "steady")
            )
            before = len(_assignments(run, "joiner"))
            joiner = run.start_named("joiner")
            workers = {"steady": steady, "joiner": joiner}
            run.produce(chunk)
            joined = partial(_assigned_since, run, "joiner", before)
            _wait_all(run, workers, "partitions for the joiner", joined)
            run.stop(joiner)  # leaves: its partitions go back to the steady worker
            _wait_all(run, {"steady": steady}, "progress", lambda: _checkpointed(run) > checkpointed[-1])
            checkpointed.append(_checkpointed(run))
        run.produce(chunks[-1])
        _wait_all(run, {"steady": steady}, "catch-up after the storm", run.caught_up)
    finally:
        run.stop(steady)
    assert checkpointed == sorted(set(checkpointed)), checkpointed  # progress in every round
    assert run.logs().count("--- start") == STORMS + 1
    run.assert_published_equals_replay()
