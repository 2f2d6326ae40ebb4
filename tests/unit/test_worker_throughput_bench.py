"""bench/worker_throughput.py: a smoke run (the same checkout on both sides, so the two sides must publish
the same results), the profile's split of a worker's samples into parts, and docs/performance.md's
table equal to what ``--markdown`` prints from the stored run."""

from __future__ import annotations

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
