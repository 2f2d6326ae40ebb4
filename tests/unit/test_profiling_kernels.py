"""The profiles credit a compiled kernel's time to its C source: cProfile sees each kernel call as a
built-in, which the summary must not lump with dict lookups under ``builtin``."""

from __future__ import annotations

import cProfile
import pstats

import pytest

from bench.lib.profiling import kernel, summarize


def test_kernel_names_map_to_their_c_sources() -> None:
    assert kernel("<built-in method ivmstream.services.triangles._kernels.dot>") == (
        "ivmstream/services/triangles/_kernels.c",
        "dot",
    )
    # the vwap extension's sources: the module's own, and one named after a type or function it holds
    assert kernel("<built-in method ivmstream.services.vwap._kernels.ledger_pass>") == (
        "ivmstream/services/vwap/_kernels.c",
        "ledger_pass",
    )
    assert kernel("<method 'add' of 'ivmstream.services.vwap._kernels.LevelTree' objects>") == (
        "ivmstream/services/vwap/_level_tree.c",
        "LevelTree.add",
    )
    assert kernel("<built-in method ivmstream.services.vwap._kernels.bag_entries>") == (
        "ivmstream/services/vwap/_bag_entries.c",
        "bag_entries",
    )
    assert kernel("<built-in method ivmstream.services.reservoir._exact_kernels.reweigh>") == (
        "ivmstream/services/reservoir/_exact_kernels.c",
        "reweigh",
    )
    # a module built from several sources: each kernel credited to the source that holds its body
    assert kernel("<built-in method ivmstream.services.fivm._kernels.absorb_run>") == (
        "ivmstream/services/fivm/_intake.c",
        "absorb_run",
    )
    assert kernel("<built-in method ivmstream.services.reservoir._kernels.delta_get>") == (
        "ivmstream/services/reservoir/_batches.c",
        "delta_get",
    )
    assert kernel("<built-in method ivmstream.services.reservoir._kernels.insert_sized>") == (
        "ivmstream/services/reservoir/_kernels.c",
        "insert_sized",
    )
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
