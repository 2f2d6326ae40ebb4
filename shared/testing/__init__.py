"""The conformance suite: what every service is checked for, just by existing.

A service author runs it over their service from their own tests; it uses only the declaration and
its workloads (``ServiceDefinition.demo`` and ``ServiceDefinition.workloads``), so a new service needs
no test of its own to be held to the platform's guarantees::

    import pytest
    from ivmstream.testing import check_snapshot_restore, conformance_cases

    CASES = conformance_cases(["mysvc"])  # every service found when None

    @pytest.mark.parametrize("case", CASES, ids=str)
    def test_restore(case):
        assert check_snapshot_restore(case) > 0

In process (no broker, no Redis):

- ``check_snapshot_restore(case)``: restoring a snapshot taken at any of several cut points and
  applying the rest equals never having stopped (same result, same snapshot bytes); an
  IncrementalEngine rebuilt from its checkpointed entries is the same engine too;
- ``check_determinism(case)``: a second run, in another process with another hash seed, gives the
  same results and snapshot bytes;
- ``check_rejections_change_nothing(case)``: an engine that refuses events ends where an engine that
  never saw them ends, and generic probes (duplicates, negated and scaled deltas) provoke some refusal;
- ``check_change_log(case)``: an IncrementalEngine that counts its pending changes keeps no change
  log until a checkpoint takes its state, and none right after each checkpoint.

Through the real runtime, given a ``Broker`` (``ivmstream.dev.broker.BrokerProcess``), a Redis URL
(``ivmstream.dev.redis_server.RedisServer``), a working directory and a unique prefix for topics:

- ``check_stream_equals_replay(...)``: ``ivmstream run`` over the workload publishes exactly what
  ``ivmstream.replay`` computes offline;
- ``check_kill9_restart(...)``: the same, with the worker killed with SIGKILL mid-stream and
  restarted; returns a ``KillPoint`` per kill, saying where it landed.

Test doubles: ``InMemoryCluster`` (topics, consumers and producers in memory) runs a real
``ivmstream.runtime.worker.Worker`` without a broker, and ``run_to_end`` drives it until it has
consumed and checkpointed everything (``ivmstream.runtime.harness`` says what it leaves out).

``Case`` is one service and one workload (``conformance_cases`` lists them); ``StreamRun`` is one
workload on its own topics, group, state directory and Redis keys, for tests that drive workers
themselves. The checks raise AssertionError with a readable message; they import no test framework.
"""

from __future__ import annotations

from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.testing._cases import Case, child_environment, conformance_cases
from ivmstream.testing._engine_checks import (
    check_change_log,
    check_determinism,
    check_rejections_change_nothing,
    check_snapshot_restore,
)
from ivmstream.testing._stream_checks import (
    Broker,
    KillPoint,
    StreamRun,
    check_kill9_restart,
    check_stream_equals_replay,
)

__all__ = [
    "Broker",
    "Case",
    "InMemoryCluster",
    "KillPoint",
    "StreamRun",
    "check_change_log",
    "check_determinism",
    "check_kill9_restart",
    "check_rejections_change_nothing",
    "check_snapshot_restore",
    "check_stream_equals_replay",
    "child_environment",
    "conformance_cases",
    "run_to_end",
]
