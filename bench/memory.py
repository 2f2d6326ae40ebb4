"""Memory per retained tuple, per service: peak and steady RSS through ``replay`` and through a worker
(between checkpoints and after one), beside the Python object floor of the same data.

Every figure comes from a child process of its own, so one measurement's heap never carries into the
next: a child builds its input lazily (one chunk at a time), reads its RSS before the first tuple and
after the last, and reports the difference divided by the tuples it retains. The floor is what a dict
of tuples of the same values costs (``{tuple(row.values()): 1}``), measured the same way.

    python bench/memory.py                      # 10^4, 10^5 and 10^6 where it fits; bench/results/memory.*
    python bench/memory.py --quick --out /tmp/m        # a smoke run (2,000 tuples)
    python bench/memory.py --markdown            # docs/memory.md's tables, from bench/results/memory.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lib.machine import machine_info
from lib.memory_report import log_share, markdown, merge, plot
from lib.progress import progress
from lib.report import RESULTS, command_line, shown

Row = dict[str, Any]
Event = tuple[str, Row]
PAGE = os.sysconf("SC_PAGE_SIZE")
DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (2000,)
CHUNK = 1000  # events per replay chunk and per produced batch
CHILD_TIMEOUT = 2400.0  # a 10^6-tuple child of the log kinds holds 2x10^6 tuples on a loaded machine


# --- workloads: every event inserts one distinct tuple ---------------------------------------------


def _edge(i: int) -> tuple[int, int]:
    """Edge i of a graph where every node has four out-neighbours at offsets 1, 2, 3 and 5: distinct
    as unordered pairs, with triangles (a, a+1, a+3) and joins of four results per node and edge."""
    a, j = divmod(i, 4)
    return a, a + (1, 2, 3, 5)[j]


def _reference(i: int) -> Event:
    return "items", {"item": f"item-{i}", "qty": i % 97, "price": f"{i % 1000}.{i % 100:02d}"}


def _reservoir(i: int) -> Event:
    a, b = _edge(i)
    return "edges", {"src": a, "dst": b}


def _triangles(i: int) -> Event:
    a, b = _edge(i)
    return "edges", {"src": a, "dst": b}


def _vwap(i: int) -> Event:
    return "bids", {
        "t": i,
        "id": i,
        "broker_id": i % 10,
        "volume": 1 + i % 100,
        "price": 1000 + (i * 7919) % 5000,
    }


def _sketches(i: int) -> Event:
    return "lineitem", {
        "orderkey": i // 4,
        "partkey": i % 2000,
        "suppkey": i % 100,
        "linenumber": i % 4 + 1,
        "quantity": str(1 + i % 50),
        "extendedprice": f"{1000 + i % 9000}.{i % 100:02d}",
        "discount": f"0.0{i % 10}",
        "tax": f"0.0{i % 8}",
        "returnflag": "RAN"[i % 3],
        "linestatus": "OF"[i % 2],
        "shipdate": f"199{i % 8}-0{1 + i % 9}-1{i % 10}",
        "commitdate": f"199{i % 8}-0{1 + i % 9}-2{i % 9}",
        "receiptdate": f"199{i % 8}-1{i % 3}-0{1 + i % 9}",
        "shipinstruct": "DELIVER IN PERSON",
        "shipmode": "TRUCK",
        "comment": f"comment {i % 5000}",
    }


def _fivm(i: int) -> Event:
    return ("R", {"a": i, "b": i % 1000}) if i % 2 == 0 else ("S", {"b": i % 1000, "c": i})


def _firstorder(i: int) -> Event:
    """Bids and asks alternately, four of each per broker, prices 100 to 116: about two in five of a
    broker's bid/ask pairs are more than 5 apart (axfinder's form, with many brokers)."""
    broker = i // 8
    if i % 2 == 0:
        return "bids", {"broker": broker, "price": float(100 + i % 13), "volume": float(1 + i % 7)}
    return "asks", {"broker": broker, "a_price": float(100 + i * 7 % 17), "a_volume": float(1 + i % 5)}


WORKLOADS: dict[str, tuple[dict[str, Any], Callable[[int], Event], str]] = {
    "reference": ({}, _reference, "distinct items tuples"),
    "reservoir": (
        {
            "relations": {"G1": ["a", "b"], "G2": ["b", "c"]},
            "aliases": {"G1": "edges", "G2": "edges"},
            "base_columns": {"edges": ["src", "dst"]},
            "k": 1000,
        },
        _reservoir,
        "edges of a 2-way self-join, k = 1,000",
    ),
    "sketches": (
        {
            "query": "SELECT l_returnflag, SUM(l_quantity) AS q FROM lineitem GROUP BY l_returnflag "
            "HAVING SUM(l_quantity) > 2000",
            "relations": "tpch",
            "partition": {"lineitem": {"column": "l_orderkey", "boundaries": [100, 200, 300, 400, 500]}},
            "monotone_aggregates": True,
            "strategy": "imp",
        },
        _sketches,
        "lineitem rows, GROUP BY/HAVING (imp)",
    ),
    "triangles": (
        {"mode": "graph", "strategy": "ivm-eps", "epsilon": "1/2"},
        _triangles,
        "undirected edges, graph mode, IVM^eps",
    ),
    "vwap": ({"query": "vwap", "strategy": "rpai"}, _vwap, "bids, VWAP with RPAI trees"),
    "fivm": (
        {"relations": {"R": ["a", "b"], "S": ["b", "c"]}, "ring": "count"},
        _fivm,
        "R(a,b) and S(b,c) rows, count ring",
    ),
    "firstorder": (
        {
            "relations": {
                "bids": {"broker": "int", "price": "float", "volume": "float"},
                "asks": {"broker": "int", "a_price": "float", "a_volume": "float"},
            },
            "predicate": "a_price - price > 5 or price - a_price > 5",
            "free": ["broker"],
            "aggregates": {"spread_volume": "a_volume - volume"},
        },
        _firstorder,
        "bids and asks, 4 of each per broker, joined on broker where prices differ by more than 5",
    ),
}


# Runtime settings of a service's worker child beside the measured defaults: the sketches' result answers
# the query over every sketched row, and firstorder's lists every group (one per broker, n / 8), so each
# is published once per checkpoint (``emit: checkpoint``), not after each of the n / CHUNK batches, which
# would visit n^2 / (2 CHUNK) rows (n^2 / (16 CHUNK) groups) over the run.
WORKER_SETTINGS: dict[str, dict[str, Any]] = {
    "sketches": {"emit": "checkpoint"},
    "firstorder": {"emit": "checkpoint"},
}


def events(service: str, n: int) -> Iterator[Event]:
    make = WORKLOADS[service][1]
    return (make(i) for i in range(n))


# --- measuring in a child ---------------------------------------------------------------------------


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


def peak_rss() -> int:
    """VmHWM: the most this process has held resident (reset to now by ``reset_peak``)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_peak() -> None:
    """Make VmHWM the current RSS (Linux 4.0+), so a peak is that of what follows."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _encoded(service: str, n: int) -> Iterator[bytes]:
    import orjson

    for rel, row in events(service, n):
        # a copy sized to its content: an orjson result kept alive pins a whole buffer (ivmstream.engine)
        yield b"%b" % orjson.dumps({"relation": rel, "row": row, "delta": 1})


def _config(service: str, **runtime: Any) -> Any:
    from ivmstream.config import build_config
    from ivmstream.service import load_service

    svc = load_service(service)
    return svc, build_config(svc, {**WORKLOADS[service][0], **runtime})


def child_floor(service: str, n: int) -> dict[str, Any]:
    gc.collect()
    before = rss()
    reset_peak()
    floor = {(rel, *row.values()): 1 for rel, row in events(service, n)}
    gc.collect()
    return {"retained": len(floor), "steady": rss() - before, "peak": peak_rss() - before}


def child_replay(service: str, n: int) -> dict[str, Any]:
    from ivmstream.events import SourceRecord
    from ivmstream.replay import Replay

    svc, config = _config(service)
    run = Replay(svc, config)
    run.engine("")  # the engine exists before the baseline
    records = (SourceRecord(i + 1, v) for i, v in enumerate(_encoded(service, n)))
    gc.collect()
    before = rss()
    reset_peak()
    for _ in run.feed(records, chunk=CHUNK):
        pass
    gc.collect()
    out = {
        "retained": run.applied,
        "rejected": run.rejected,
        "steady": rss() - before,
        "peak": peak_rss() - before,
    }
    return out


def child_log(service: str, n: int) -> dict[str, Any]:
    """The change log between checkpoints: n tuples checkpointed (changed_entries drained), n more
    pending; the same 2n tuples replayed without a checkpoint (no log) in the second half of this child's
    twin (``child_nolog``). Reports RSS with the n changes pending and after they are drained."""
    from ivmstream.events import SourceRecord
    from ivmstream.replay import Replay

    svc, config = _config(service)
    run = Replay(svc, config)
    engine: Any = run.engine("")
    records = (SourceRecord(i + 1, v) for i, v in enumerate(_encoded(service, 2 * n)))
    first = (next(records) for _ in range(n))
    gc.collect()
    before = rss()
    for _ in run.feed(first, chunk=CHUNK):
        pass
    engine.changed_entries()  # a checkpoint takes the state: changes are recorded from now on
    gc.collect()
    checkpointed = rss()
    for _ in run.feed(records, chunk=CHUNK):
        pass
    gc.collect()
    pending = rss()
    entries = len(engine.changed_entries())
    gc.collect()
    drained = rss()
    return {
        "retained": n,
        "entries": entries,
        "checkpointed": checkpointed - before,
        "pending": pending - before,
        "drained": drained - before,
    }


def child_nolog(service: str, n: int) -> dict[str, Any]:
    """``child_log``'s twin: the same 2n tuples, never checkpointed (nothing logged)."""
    from ivmstream.events import SourceRecord
    from ivmstream.replay import Replay

    svc, config = _config(service)
    run = Replay(svc, config)
    run.engine("")
    records = (SourceRecord(i + 1, v) for i, v in enumerate(_encoded(service, 2 * n)))
    gc.collect()
    before = rss()
    for _ in run.feed(records, chunk=CHUNK):
        pass
    gc.collect()
    return {"retained": n, "state": rss() - before}


def child_worker(service: str, n: int) -> dict[str, Any]:
    """A real Worker over the in-memory cluster and a RocksDB store, one checkpoint at the end: RSS at
    the last batch (every change pending) and after the checkpoint, above RSS with the input produced."""
    from ivmstream.runtime import Worker
    from ivmstream.runtime.harness import InMemoryCluster
    from ivmstream.runtime.hooks import BatchApplied
    from ivmstream.state.rocksdb import RocksDBStore

    svc, config = _config(
        service,
        input_topic="in",
        output_topic="out",
        dlq_topic="dlq",
        checkpoint_interval=1e9,
        batch_size=CHUNK,
        **WORKER_SETTINGS.get(service, {}),
    )
    cluster = InMemoryCluster()
    cluster.create_topic("in", 1)
    for value in _encoded(service, n):
        cluster.produce("in", value)
    marks: dict[str, int] = {}

    with tempfile.TemporaryDirectory() as state_dir:
        store = RocksDBStore(state_dir, "bench")
        worker = Worker(svc, config, cluster, store, group="memory")

        def applied(_b: BatchApplied) -> None:
            for log in cluster.logs.get("out", []):  # published results are not the worker's state
                log[:] = [None] * len(log)  # type: ignore[list-item]

        def caught_up(w: Worker) -> bool:
            """A checkpoint at n/2 tuples; at n, RSS with n/2 changes pending, then after a checkpoint."""
            position = min((p or 0) for p in w.positions().values()) if w.positions() else 0
            if "half" not in marks:
                if position >= n // 2:
                    w.checkpoint()
                    marks["half"] = position
                return False
            if position < n:
                return False
            gc.collect()
            marks["between"] = rss()
            w.checkpoint()
            gc.collect()
            marks["after"] = rss()
            usage: dict[str, int] = store.memory_usage()
            marks["store"] = sum(v for k, v in usage.items() if k != "block_cache_pinned")
            return True

        worker.hooks.batch_applied.append(applied)
        gc.collect()
        before = rss()
        reset_peak()
        worker.run(until=caught_up)
        peak = peak_rss()
    return {
        "retained": n,
        "between": marks["between"] - before,
        "after": marks["after"] - before,
        "store": marks["store"],  # of "after": RocksDB's memtables and block cache
        "engine_after": marks["after"] - marks["store"] - before,
        "peak": peak - before,
    }


CHILDREN: dict[str, Callable[[str, int], dict[str, Any]]] = {
    "floor": child_floor,
    "replay": child_replay,
    "worker": child_worker,
    "log": child_log,
    "nolog": child_nolog,
}


def measure(kind: str, service: str, n: int, timeout: float = CHILD_TIMEOUT) -> dict[str, Any]:
    """One child's figures (bytes, and per retained tuple), or the reason it gave none."""
    cmd = [sys.executable, __file__, "--child", kind, service, str(n)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["seconds"] = round(time.perf_counter() - start, 2)
    kept = max(1, out["retained"])
    for name in (
        "peak",
        "steady",
        "between",
        "after",
        "engine_after",
        "pending",
        "drained",
        "checkpointed",
        "state",
    ):
        if name in out:
            out[f"{name}_per_tuple"] = round(out[name] / kept, 1)
    return out


def available_memory() -> int:
    """MemAvailable: what this machine can give a child without swapping (others share it)."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def largest_child(row: dict[str, Any]) -> int:
    """The most RSS any child of a size's row grew by (the log's children hold twice the tuples)."""
    most = 0
    for kind in ("replay", "worker", "log", "nolog"):
        r = row.get(kind) or {}
        most = max(most, *(int(r.get(k, 0)) for k in ("peak", "pending", "state", "between")))
    return most


def fits(n: int, done: dict[str, Any]) -> str | None:
    """None when size ``n`` fits in memory, else why not: predicted from the size ten times smaller
    (10x its largest child, doubled for the interpreter's and the input's share), against at most half
    of the memory available now, as other processes share the machine. A size asked for alone runs."""
    smaller = done.get(str(n // 10))
    if smaller is None:
        return None
    need = 2 * 10 * largest_child(smaller)
    budget = available_memory() // 2
    if need <= budget:
        return None
    return (
        f"needs about {need / 2**30:.1f} GiB (10x the largest child at {n // 10:,} tuples, doubled), over "
        f"half of the {2 * budget / 2**30:.1f} GiB available"
    )


KINDS = ("floor", "replay", "worker", "log", "nolog")


def run(
    sizes: list[int], services: list[str], kinds: tuple[str, ...] = KINDS, timeout: float = CHILD_TIMEOUT
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "machine": machine_info(mem_available=available_memory()),
        "sizes": sizes,
        "services": {},
    }
    for service in services:
        done: dict[str, Any] = {}
        skipped: dict[str, str] = {}
        for n in sizes:
            why = fits(n, done)
            if why is not None:
                skipped[str(n)] = why
                progress(f"{service} n={n}: skipped, {why}")
                continue
            row = {kind: measure(kind, service, n, timeout) for kind in kinds}
            if "log" in row and "nolog" in row:
                row["log"].update(log_share(row["log"], row["nolog"]))
            done[str(n)] = row
            progress(
                f"{service} n={n}: floor {row.get('floor', {}).get('steady_per_tuple')} B, replay peak "
                f"{row.get('replay', {}).get('peak_per_tuple')} B steady "
                f"{row.get('replay', {}).get('steady_per_tuple')} B, worker between "
                f"{row.get('worker', {}).get('between_per_tuple')} B after "
                f"{row.get('worker', {}).get('after_per_tuple')} B"
            )
        entry: dict[str, Any] = {"workload": WORKLOADS[service][2], "runs": done}
        if skipped:
            entry["skipped"] = skipped
        report["services"][service] = entry
    report["machine"]["loadavg_end"] = machine_info()["loadavg_1_5_15"]
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    ap.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK_SIZES[0]} tuples per service")
    ap.add_argument("--services", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument(
        "--kinds", nargs="+", default=list(KINDS), choices=list(KINDS), help="the children to run"
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "memory", help="report path without suffix")
    ap.add_argument(
        "--markdown", action="store_true", help="print the docs tables of a stored report and exit"
    )
    ap.add_argument(
        "--from", dest="source", type=Path, default=RESULTS / "memory.json", help="with --markdown"
    )
    ap.add_argument("--merge", type=Path, nargs="+", help="merge these reports' runs into --out and exit")
    ap.add_argument(
        "--why",
        nargs=4,
        action="append",
        default=[],
        metavar=("SERVICE", "N", "KIND", "TEXT"),
        help="with --merge: why a child that gave no figure was stopped (in place of its exit status)",
    )
    ap.add_argument(
        "--child-timeout",
        type=float,
        default=CHILD_TIMEOUT,
        help="seconds a child may take (default %(default)s)",
    )
    ap.add_argument("--child", nargs=3, metavar=("KIND", "SERVICE", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, service, n = args.child
        print(json.dumps(CHILDREN[kind](service, int(n))))
        return 0
    if args.markdown:
        print(markdown(json.loads(args.source.read_text())))
        return 0
    if args.merge:
        merged = merge([json.loads(p.read_text()) for p in args.merge])
        for service, n, kind, text in args.why:
            figures = merged["services"][service]["runs"][n][kind]
            if "error" in figures:
                figures["error"] = text
        # the parts by name only: where they were kept is a path of the machine that merged them
        parts = " ".join(p.name for p in args.merge)
        whys = "".join(f" --why {s} {n} {k} {t!r}" for s, n, k, t in args.why)
        merged["merge_command"] = f"bench/memory.py --merge {parts}{whys}"
        png = args.out.with_suffix(".png")
        plot(merged, png)
        merged["plot"] = shown(png)
        args.out.with_suffix(".json").write_text(json.dumps(merged, indent=2) + "\n")
        print(markdown(merged))
        return 0
    sizes = sorted(QUICK_SIZES if args.quick else args.sizes)
    report = run(sizes, args.services, tuple(args.kinds), args.child_timeout)
    report["command"] = command_line("bench/memory.py", argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    png = args.out.with_suffix(".png")
    plot(report, png)
    report["plot"] = shown(png)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))
    progress(f"wrote {shown(args.out.with_suffix('.json'))} and {shown(png)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
