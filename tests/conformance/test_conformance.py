"""The conformance suite (ivmstream.testing) over every service found in services/ and each of its
workloads: a service folder is checked by existing, with no test of its own."""

from __future__ import annotations

import pytest

from ivmstream.testing import (
    Case,
    check_determinism,
    check_kill9_restart,
    check_rejections_change_nothing,
    check_snapshot_restore,
    check_stream_equals_replay,
    conformance_cases,
)

CASES = conformance_cases()
cases = pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
# The kill -9 runs cost ~12 s each: they run on each service's demo workload, while its further
# workloads (other strategies of the same engine) are held to the same state by the cut-point restores
# and the stream-equals-replay run above.
DEMO_CASES = [c for c in CASES if c.workload is c.service.demo]
demo_cases = pytest.mark.parametrize("case", DEMO_CASES, ids=[str(c) for c in DEMO_CASES])


def test_every_service_has_a_workload():
    """A service without a demo or workload would silently escape every check below."""
    from ivmstream.service import available_services

    assert {c.name for c in CASES} == set(available_services())
    assert {c.name for c in DEMO_CASES} == set(available_services()), "a service without a demo skips kill -9"


@cases
def test_snapshot_restore_at_cut_points_equals_uninterrupted(case: Case):
    assert check_snapshot_restore(case) > 0


@cases
def test_two_runs_give_identical_results_and_snapshots(case: Case):
    check_determinism(case)


@cases
def test_a_refused_event_changes_nothing(case: Case):
    assert check_rejections_change_nothing(case) > 0


@cases
def test_stream_equals_replay(case: Case, broker, redis_server, unique, tmp_path):
    check_stream_equals_replay(case, broker, redis_server.url, tmp_path, unique)


@pytest.mark.slow
@demo_cases
def test_kill9_mid_stream_then_restart_equals_uninterrupted(
    case: Case, broker, redis_server, unique, tmp_path
):
    kills = check_kill9_restart(case, broker, redis_server.url, tmp_path, unique)
    # Each kill hit a worker with published, uncheckpointed work, before the end of the input.
    assert len(kills) == 2
    assert all(0 < k.checkpointed < k.total and k.published_beyond > 0 for k in kills)
