"""The profiles credit a compiled kernel's time to its C source: cProfile sees each kernel call as a
built-in, which the summary must not lump with dict lookups under ``builtin``."""

from __future__ import annotations

import cProfile
import pstats

import pytest

from bench.lib.profiling import kernel, summarize

KERNEL_ROWS = [
    ("<built-in method ivmstream.services.triangles._kernels.dot>", "triangles/_kernels.c", "dot"),
    # the vwap extension's sources: the module's own, and one named after a type or function it holds
    ("<built-in method ivmstream.services.vwap._kernels.ledger_pass>", "vwap/_kernels.c", "ledger_pass"),
    (
        "<method 'add' of 'ivmstream.services.vwap._kernels.LevelTree' objects>",
        "vwap/_level_tree.c",
        "LevelTree.add",
    ),
    ("<built-in method ivmstream.services.vwap._kernels.bag_entries>", "vwap/_bag_entries.c", "bag_entries"),
    (
        "<built-in method ivmstream.services.reservoir._exact_kernels.reweigh>",
        "reservoir/_exact_kernels.c",
        "reweigh",
    ),
    # a module built from several sources: each kernel credited to the source that holds its body
    ("<built-in method ivmstream.services.fivm._kernels.absorb_run>", "fivm/_intake.c", "absorb_run"),
    (
        "<built-in method ivmstream.services.reservoir._kernels.delta_get>",
        "reservoir/_batches.c",
        "delta_get",
    ),
    (
        "<built-in method ivmstream.services.reservoir._kernels.insert_sized>",
        "reservoir/_kernels.c",
        "insert_sized",
    ),
    (
        "<built-in method ivmstream.services.reservoir._kernels.insert_run>",
        "reservoir/_arrivals.c",
        "insert_run",
    ),
]


@pytest.mark.parametrize(("row", "source", "name"), KERNEL_ROWS)
def test_kernel_names_map_to_their_c_sources(row: str, source: str, name: str) -> None:
    assert kernel(row) == (f"ivmstream/services/{source}", name)


def test_rows_that_are_not_kernels_map_to_none() -> None:
    assert kernel("<method 'get' of 'dict' objects>") is None
    assert kernel("<built-in method builtins.len>") is None


def test_summary_credits_a_kernel_call_to_its_c_source_and_counts_it_as_compiled() -> None:
    kernels = pytest.importorskip(
        "ivmstream.services.triangles._kernels", reason="the triangle kernels are not built here"
    )
    walk = {c: 1 for c in range(2_000)}
    probe = {c: 2 for c in range(0, 2_000, 2)}
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(50):
        kernels.dot(walk, probe)
        sum(probe.get(c, 0) for c in walk)
    profile.disable()
    summary = summarize(pstats.Stats(profile), tuples=50, us_per_tuple=100.0)
    rows = {r["function"]: r for r in summary["functions"]}
    dot = rows["dot (ivmstream/services/triangles/_kernels.c)"]
    assert dot["compiled"] and dot["calls_per_tuple"] == 1.0
    files = {f["file"]: f for f in summary["files"]}
    assert files["ivmstream/services/triangles/_kernels.c"]["self_share"] == summary["compiled_share"]
    assert 0 < summary["compiled_share"] < 1  # the generator's Python time is not compiled
    assert not any(r["compiled"] for name, r in rows.items() if "_kernels.c" not in name)
