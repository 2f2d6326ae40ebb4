"""bench/worker_throughput.py: a smoke run (the same checkout on both sides, so the two sides must publish
the same results), the profile's split of a worker's samples into parts, and docs/performance.md's
table equal to what ``--markdown`` prints from the stored run, and ``--merge`` keeping the other
services' rows."""

from __future__ import annotations

import pytest
from helpers import REPO, assert_doc_block_is_printed, run_bench

from bench.lib.worker_profile import summarize

STORED = REPO / "bench" / "results" / "worker_throughput.json"


def test_quick_run_measures_both_sides_on_the_same_records(tmp_path):
    report = run_bench(
        "worker_throughput.py", tmp_path / "wt", "--same-code", "--services", "reference", timeout=120
    )
    point = report["services"]["reference"]
    assert "error" not in point, point
    assert len(point["runs"]["baseline"]) == len(point["runs"]["head"]) == report["repeats"] == 1
    for run in point["runs"]["baseline"] + point["runs"]["head"]:
        assert run["events"] == point["events"] * point["passes"] > 0
        assert run["dead_letters"] == 0 and run["published"] >= 1
        assert run["batches"] == -(-point["events"] // point["batch_size"])  # every batch full but the last
    assert point["same_published_results"]  # the same code on the same records publishes the same
    assert point["ratio_events_per_cpu_second"] > 0
    assert (tmp_path / "wt.png").stat().st_size > 0


def test_profile_parts_follow_the_first_matching_frame_under_worker_run():
    collapsed = "\n".join(
        [
            "main (c.py:1);Worker.run (ivmstream/runtime/worker.py:1);"
            "Engine.apply (ivmstream/services/x/e.py:3) 6",
            # an engine's checkpoint entries count as the engine's, though under the store's commit path
            "Worker.run (w.py:1);Checkpointer.write (ivmstream/runtime/checkpoint.py:2);"
            "E.changed_entries (ivmstream/services/x/e.py:9) 2",
            "Worker.run (w.py:1);RocksDBStore.commit (ivmstream/state/rocksdb.py:205) 4",
            "Worker.run (w.py:1);EventCodec.decode_grouped (ivmstream/events/codec.py:376) 3",
            "Worker.run (w.py:1);Output.publish (ivmstream/runtime/output.py:5) 1",
            "Worker.run (w.py:1);by_partition (ivmstream/runtime/apply.py:82) 4",
            # left out: the assignment (before the first batch) and anything outside Worker.run
            "Worker.run (w.py:1);Rebalance.on_assign (r.py:1);"
            "RocksDBStore._db (ivmstream/state/rocksdb.py:81) 50",
            "main (c.py:1);produce (h.py:1) 30",
        ]
    )
    got = summarize(collapsed, top=2)
    assert got["samples"] == 20
    assert got["shares"] == {
        "engine": 0.4,
        "state store": 0.2,
        "decode": 0.15,
        "publish": 0.05,
        "runtime, other": 0.2,
    }
    assert got["top_self"] == [
        ["Engine.apply (services/x/e.py:3)", 0.3],
        ["RocksDBStore.commit (state/rocksdb.py:205)", 0.2],
    ]


def test_docs_table_equals_what_markdown_prints_from_the_stored_run():
    assert_doc_block_is_printed(REPO / "docs" / "performance.md", "worker_throughput.py", str(STORED))


def _partial_report(name: str, head: str, ratio: float, load: float) -> dict:
    """A report of one service as a ``--services NAME`` run writes it (the figures made up)."""
    run = {
        "command": f"bench/worker_throughput.py --services {name}",
        "head": head,
        "created": "2026-01-01 00:00:00 UTC",
        "repeats": 3,
        "load_start": [load, load, load],
        "load_end": [load, load, load],
    }
    row = {
        "workload": f"{name} records",
        "events": 10,
        "passes": 1,
        "batch_size": 5,
        "checkpoint_interval_s": 1.0,
        "baseline_events_per_second": 100.0,
        "head_events_per_second": 100.0 * ratio,
        "ratio_events_per_second": ratio,
        "baseline_events_per_cpu_second": 200.0,
        "head_events_per_cpu_second": 200.0 * ratio,
        "ratio_events_per_cpu_second": ratio,
        "same_published_results": True,
        "load": [load],
        "run": run,
    }
    return {**run, "baseline": {"commit": "a896f2d^"}, "quick": False, "services": {name: row}}


def test_merge_keeps_the_other_services_rows_with_the_run_that_measured_each(tmp_path):
    from bench.lib.locked_report import update_report
    from bench.worker_throughput import markdown, merge_reports

    out = tmp_path / "wt.json"
    first, second = _partial_report("vwap", "aaa1111", 2.5, 4.0), _partial_report("fivm", "bbb2222", 3.5, 6.0)
    update_report(out, lambda stored: merge_reports(stored, first))
    merged = update_report(out, lambda stored: merge_reports(stored, second))
    assert list(merged["services"]) == ["vwap", "fivm"]
    assert merged["services"]["vwap"]["run"]["head"] == "aaa1111"
    assert merged["services"]["fivm"]["run"]["head"] == "bbb2222"
    # a re-run of one service replaces only its row
    again = update_report(
        out, lambda stored: merge_reports(stored, _partial_report("vwap", "ccc3333", 3.1, 5.0))
    )
    assert again["services"]["vwap"]["ratio_events_per_cpu_second"] == 3.1
    assert again["services"]["fivm"]["run"]["head"] == "bbb2222"
    table = markdown(again)
    assert "| vwap | `ccc3333` | 3 | 5.0, 5.0 |" in table and "| fivm | `bbb2222` | 3 | 6.0, 6.0 |" in table
    assert "`bench/worker_throughput.py --services fivm`" in table


def test_merge_refuses_a_run_against_another_baseline():
    from bench.worker_throughput import merge_reports

    other = {**_partial_report("fivm", "bbb2222", 3.5, 6.0), "baseline": {"commit": "HEAD~5"}}
    with pytest.raises(SystemExit, match="baseline"):
        merge_reports(_partial_report("vwap", "aaa1111", 2.5, 4.0), other)
