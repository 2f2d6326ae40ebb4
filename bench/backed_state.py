"""Store-backed state: a key's bag read through RocksDB with a bounded cache, against all-resident.

One partition key of the reference service holds a bag of N distinct tuples (10K to 1M). For each N a
RocksDB state store is written once with that state (as entries, the way the runtime stores it), and
for each cache size (``--caches``: resident tuples per key, ``all`` for the whole bag in memory) a fresh
child process copies it and runs the partition runtime (``PartitionState`` and ``RocksDBStore``, no
broker) over it:

1. restore: ``store.load`` (without the bag when it is store-backed) and the engines rebuilt from it;
2. ``--updates`` updates through ``engine.apply`` in batches of 500, a checkpoint (``take_changes`` and
   a RocksDB commit) every ``--checkpoint-every`` updates and one at the end. The updates are skewed
   (tuple i of N drawn as N * u^3, u uniform: a quarter of the draws fall in the first 1.6% of the
   bag): +1 on an existing tuple, -1 on a tuple raised before, and one in ten an insert of a new
   tuple or the delete of one, so the bag keeps its size.

Reported per (N, cache): the process's resident set after the run (VmRSS) and its peak (VmHWM), the
bag entries held in memory after the final checkpoint and at most (just before a checkpoint),
updates/s (checkpoints included), the cache hit rate, the median and maximum checkpoint time, and the
restore time. A child process per case, so one case's memory never counts in another's.

Writes ``bench/results/backed_state.json`` and ``backed_state.png`` (``backed_state_quick.*`` with
``--quick``). ``--markdown FILE.json`` prints the section of docs/benchmarks.md from a report.

Run: ``.venv/bin/python bench/backed_state.py`` (about 5 minutes), ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from bench.lib.machine import machine_info  # noqa: E402
from bench.lib.plots import plt  # noqa: E402
from ivmstream.events import UpdateEvent  # noqa: E402
from ivmstream.runtime.partition import PartitionState, store_backing  # noqa: E402
from ivmstream.services.reference.engine import BagEngine  # noqa: E402
from ivmstream.services.reference.options import DEFAULT_RELATIONS  # noqa: E402
from ivmstream.state import StateChanges  # noqa: E402
from ivmstream.state.rocksdb import RocksDBStore  # noqa: E402

RESULTS = REPO / "bench" / "results"
TOPIC, KEY, NAMESPACE, ENVELOPE = "in", "store-1", "bench", b"{}"
BATCH = 500


def tuple_event(i: int, delta: int) -> UpdateEvent:
    """Tuple i of the bag (the default relation items: item, qty, price)."""
    return UpdateEvent("items", {"item": f"i{i}", "qty": i % 7, "price": Decimal(i % 400) / 4}, delta)


def workload(n: int, updates: int, seed: int) -> Iterator[list[UpdateEvent]]:
    """Skewed churn that keeps the bag at n tuples and never deletes below zero, in batches made as
    they are needed (so the input never sits in the process's memory)."""
    rng = random.Random(seed)
    raised: list[int] = []
    added: list[int] = []
    fresh = n
    batch: list[UpdateEvent] = []
    for j in range(updates):
        if j % 10 == 9:  # an insert of a new tuple, or the delete of one inserted before
            if added and rng.random() < 0.5:
                batch.append(tuple_event(added.pop(rng.randrange(len(added))), -1))
            else:
                added.append(fresh)
                batch.append(tuple_event(fresh, 1))
                fresh += 1
        elif j % 2 == 0 or not raised:
            i = int(n * rng.random() ** 3)
            raised.append(i)
            batch.append(tuple_event(i, 1))
        else:
            batch.append(tuple_event(raised.pop(rng.randrange(len(raised))), -1))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def build_store(n: int, root: Path) -> float:
    """A RocksDB store holding one key with n distinct tuples, written as the runtime writes entries."""
    t0 = time.perf_counter()
    engine = BagEngine(DEFAULT_RELATIONS)
    for start in range(0, n, 10_000):
        engine.apply([tuple_event(i, 1) for i in range(start, min(n, start + 10_000))])
    store = RocksDBStore(root, NAMESPACE)
    store.commit(TOPIC, 0, 0, StateChanges(entries={KEY: engine.changed_entries()}), ENVELOPE)
    store.close()
    return time.perf_counter() - t0


def _proc_status(field: str) -> int:
    """A /proc/self/status memory field, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(root: Path, n: int, cache: int | None, updates: int, checkpoint_every: int, seed: int) -> dict:
    """One case, in this (child) process: restore the store at ``root``, run the updates, checkpoint."""
    store = RocksDBStore(root, NAMESPACE)

    def factory() -> BagEngine:
        return BagEngine(DEFAULT_RELATIONS, resident_entries=cache)

    rss_before = _proc_status("VmRSS")
    t0 = time.perf_counter()
    backed = store_backing(store, factory(), incremental=True)
    cp = store.load(TOPIC, 0, skip_maps=backed)
    state = PartitionState(TOPIC, 0, factory, cp, store=store if backed else None, backed=backed)
    del cp
    restore = time.perf_counter() - t0
    engine = state.engine(KEY)
    assert isinstance(engine, BagEngine)
    rss_restored = _proc_status("VmRSS")
    checkpoints: list[float] = []
    offset = refused = peak_resident = 0
    seconds = 0.0  # applying and checkpointing; making the input is not timed
    for batch in workload(n, updates, seed):
        t0 = time.perf_counter()
        refused += len(engine.apply(batch))
        state.dirty.add(KEY)
        offset += len(batch)
        if offset % checkpoint_every == 0 or offset >= updates:
            peak_resident = max(peak_resident, engine.bag.resident)  # the most before any checkpoint
            c0 = time.perf_counter()
            store.commit(TOPIC, 0, offset, state.take_changes(), ENVELOPE)
            checkpoints.append(time.perf_counter() - c0)
        seconds += time.perf_counter() - t0
    if refused:
        raise RuntimeError(f"{refused} updates refused: the workload is wrong")
    bag = engine.bag
    result = engine.result()
    store.close()
    return {
        "tuples": n,
        "cache": cache,
        "updates": updates,
        "seconds": seconds,
        "updates_per_second": updates / seconds,
        "restore_seconds": restore,
        "checkpoints": len(checkpoints),
        "checkpoint_seconds_median": statistics.median(checkpoints),
        "checkpoint_seconds_max": max(checkpoints),
        "resident_tuples": bag.resident,
        "peak_resident_tuples": peak_resident,
        "hits": bag.hits,
        "misses": bag.misses,
        "hit_rate": bag.hits / max(1, bag.hits + bag.misses),
        "evictions": bag.evictions,
        "rss_bytes_before_restore": rss_before,
        "rss_bytes_restored": rss_restored,
        "rss_bytes": _proc_status("VmRSS"),
        "peak_rss_bytes": _proc_status("VmHWM"),
        "distinct_after": result["relations"]["items"]["distinct"],
        "fingerprint": result["fingerprint"],
    }


def run_case(built: Path, tmp: Path, n: int, cache: int | None, args: argparse.Namespace) -> dict:
    """``measure`` in a fresh child process on a copy of the built store."""
    copy = tmp / f"case-{uuid.uuid4().hex[:8]}"
    shutil.copytree(built, copy)
    try:
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--measure",
                orjson.dumps(
                    {
                        "root": str(copy),
                        "n": n,
                        "cache": cache,
                        "updates": args.updates,
                        "checkpoint_every": args.checkpoint_every,
                        "seed": n,
                    }
                ).decode(),
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=3600,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"case {n} tuples, cache {cache} failed:\n{proc.stderr[-3000:]}")
        return orjson.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def cache_label(cache: int | None) -> str:
    return "all resident" if cache is None else f"cache {cache:,}"


def plot(results: dict[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.5))
    for cache in results["caches"]:
        rows = [r for r in results["cases"] if r["cache"] == cache]
        xs = [r["tuples"] for r in rows]
        label = cache_label(cache)
        axes[0].loglog(xs, [r["rss_bytes"] / 2**20 for r in rows], "o-", label=label)
        axes[1].semilogx(xs, [r["updates_per_second"] for r in rows], "o-", label=label)
        axes[2].semilogx(xs, [r["hit_rate"] for r in rows], "o-", label=label)
        axes[3].loglog(xs, [r["checkpoint_seconds_median"] * 1e3 for r in rows], "o-", label=label)
    titles = [
        ("process RSS after the run (MiB)", "memory"),
        ("updates/s, checkpoints included", "throughput"),
        ("bag cache hit rate", "hit rate"),
        (f"ms per checkpoint (every {results['checkpoint_every']:,} updates)", "checkpoint time"),
    ]
    for ax, (ylabel, title) in zip(axes, titles, strict=True):
        ax.set(xlabel="distinct tuples in the key's bag", ylabel=ylabel, title=title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(results: dict[str, Any]) -> str:
    """The docs/benchmarks.md section, from a report."""
    m = results["machine"]
    quick = " (a --quick run)" if results["quick"] else ""
    noisy = ": the machine was shared, so rates are noisy" if m["loadavg_1_5_15"][0] > 1 else ""
    lines = [
        "## Store-backed state against state size (`bench/backed_state.py`)",
        "",
        f"Command: `.venv/bin/python bench/backed_state.py`{quick} (one key of the reference service, "
        f"{results['updates']:,} skewed updates through `PartitionState` on RocksDB, a checkpoint every "
        f"{results['checkpoint_every']:,}; each case in its own process). Results: "
        "`bench/results/backed_state.json`, `bench/results/backed_state.png`. Recorded run "
        f"`{results['run_id']}` ({m['cpu_count']} CPUs, Python {m['python']}, load average "
        f"{m['loadavg_1_5_15'][0]} at the end{noisy}).",
        "",
        "| tuples | bag | resident tuples (end / most) | RSS | peak RSS | updates/s | hit rate "
        "| checkpoint (median / max) | restore |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["cases"]:
        lines.append(
            f"| {r['tuples']:,} | {cache_label(r['cache'])} "
            f"| {r['resident_tuples']:,} / {r['peak_resident_tuples']:,} "
            f"| {r['rss_bytes'] / 2**20:,.0f} MiB | {r['peak_rss_bytes'] / 2**20:,.0f} MiB "
            f"| {r['updates_per_second']:,.0f} | {r['hit_rate']:.3f} "
            f"| {r['checkpoint_seconds_median'] * 1e3:.1f} / {r['checkpoint_seconds_max'] * 1e3:.1f} ms "
            f"| {r['restore_seconds']:.2f} s |"
        )
    s = results["summary"]
    lines += [
        "",
        f"From {s['smallest']:,} to {s['largest']:,} tuples the all-resident process grows by "
        f"{s['rss_growth_mib']['all']:,.0f} MiB and the one with the smallest cache by "
        f"{s['rss_growth_mib']['smallest_cache']:,.0f} MiB; at {s['largest']:,} tuples the smallest "
        f"cache runs at {s['throughput_ratio_smallest_cache_vs_resident_largest']:.2f} of the "
        "all-resident rate (every miss is a RocksDB read). Restoring a store-backed key reads only its "
        "aggregates, so it takes the same time at every size. Every tuple changed since the last "
        "checkpoint stays in memory whatever the cache size (so the most resident, just before a "
        "checkpoint, exceeds a small cache; the hit rate counts hits on those too): the checkpoint "
        "interval, not the cache, bounds that part of memory.",
    ]
    return "\n".join(lines) + "\n"


def summarize(cases: list[dict], sizes: list[int], caches: list[int | None]) -> dict[str, Any]:
    def row(n: int, cache: int | None) -> dict:
        return next(r for r in cases if r["tuples"] == n and r["cache"] == cache)

    small = min((c for c in caches if c is not None), default=None)
    lo, hi = sizes[0], sizes[-1]
    out: dict[str, Any] = {"smallest": lo, "largest": hi, "rss_growth_mib": {}}
    if None in caches:
        out["rss_growth_mib"]["all"] = (row(hi, None)["rss_bytes"] - row(lo, None)["rss_bytes"]) / 2**20
    if small is not None:
        out["rss_growth_mib"]["smallest_cache"] = (
            row(hi, small)["rss_bytes"] - row(lo, small)["rss_bytes"]
        ) / 2**20
    if small is not None and None in caches:
        out["throughput_ratio_smallest_cache_vs_resident_largest"] = (
            row(hi, small)["updates_per_second"] / row(hi, None)["updates_per_second"]
        )
    # Every cache size computes the same state: the same distinct count and fingerprint per size.
    for n in sizes:
        answers = {(r["distinct_after"], r["fingerprint"]) for r in cases if r["tuples"] == n}
        if len(answers) != 1:
            raise RuntimeError(f"{n} tuples: the cache sizes disagree on the result: {answers}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=None, help="tuples in the bag (default 10000,100000,1000000)")
    p.add_argument("--caches", default=None, help="resident tuples per key, 'all' (default 1000,10000,all)")
    p.add_argument("--updates", type=int, default=None, help="updates per case (default 200000)")
    p.add_argument("--checkpoint-every", type=int, default=10_000)
    p.add_argument("--quick", action="store_true", help="smoke size: 2000 and 20000 tuples, 20000 updates")
    p.add_argument("--out", default=None, help="output path prefix (default bench/results/backed_state)")
    p.add_argument("--measure", help=argparse.SUPPRESS)
    p.add_argument("--markdown", metavar="REPORT.json", help="print the docs section of a report and exit")
    args = p.parse_args(argv)
    if args.measure:
        spec = orjson.loads(args.measure)
        print(orjson.dumps(measure(Path(spec.pop("root")), **spec)).decode())
        return 0
    if args.markdown:
        sys.stdout.write(markdown(orjson.loads(Path(args.markdown).read_bytes())))
        return 0
    default_sizes = "2000,20000" if args.quick else "10000,100000,1000000"
    sizes = [int(s) for s in (args.sizes or default_sizes).split(",")]
    caches = [
        None if c == "all" else int(c)
        for c in (args.caches or ("100,1000,all" if args.quick else "1000,10000,all")).split(",")
    ]
    args.updates = args.updates or (20_000 if args.quick else 200_000)
    if args.checkpoint_every % BATCH:
        p.error(f"--checkpoint-every must be a multiple of {BATCH}")
    out = Path(args.out) if args.out else RESULTS / ("backed_state_quick" if args.quick else "backed_state")
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-backed-bench-"))
    started = time.time()
    cases = []
    try:
        for n in sizes:
            built = tmp / f"built-{n}"
            build = build_store(n, built)
            print(f"[{n:,} tuples] store built in {build:.1f}s", file=sys.stderr, flush=True)
            for cache in caches:
                r = run_case(built, tmp, n, cache, args)
                r["build_seconds"] = build
                cases.append(r)
                print(
                    f"[{n:,} tuples, {cache_label(cache)}] {r['updates_per_second']:,.0f} updates/s, "
                    f"RSS {r['rss_bytes'] / 2**20:,.0f} MiB, hit rate {r['hit_rate']:.3f}, checkpoint "
                    f"{r['checkpoint_seconds_median'] * 1e3:.1f} ms, restore {r['restore_seconds']:.2f}s",
                    file=sys.stderr,
                    flush=True,
                )
            shutil.rmtree(built, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = {
        "benchmark": "backed_state",
        "run_id": uuid.uuid4().hex[:8],
        "quick": args.quick,
        "started": started,
        "seconds": time.time() - started,
        "updates": args.updates,
        "checkpoint_every": args.checkpoint_every,
        "batch": BATCH,
        "sizes": sizes,
        "caches": caches,
        "machine": machine_info(),
        "summary": summarize(cases, sizes, caches),
        "cases": cases,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    plot(results, out.with_suffix(".png"))
    print(orjson.dumps(results["summary"], option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
