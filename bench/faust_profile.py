"""Where a worker's time goes, on either runtime: a cProfile of the measured window (first batch to
the final checkpoint) of the thread that runs the worker, split into parts by the code each function
belongs to, plus the CPU time of the process's other threads over the same window.

cProfile sees one thread: the default runtime's worker loop, or Faust's event loop (its stream
machinery, the agent, our apply and checkpoint). aiokafka's fetching runs in a thread of its own under
Faust (and librdkafka's in C threads under the default runtime), shown as "other threads' CPU". A
builtin's time (a C method: confluent-kafka's ``consume``, RocksDB's write, epoll) goes to the part
of the code that called it. cProfile adds a cost per Python call, so code made of many small calls
(Faust's per-event coroutines) looks heavier under it than it is: the shares are a map, the
throughput is the unprofiled runs'."""

from __future__ import annotations

import pstats
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

# (part, what it covers); the first part whose marker a function's file or name contains takes it
PARTS: tuple[tuple[str, str], ...] = (
    ("waiting", "idle: the event loop's epoll, the consume timeout (no record ready)"),
    ("consume", "confluent-kafka's consume (librdkafka, C: records already fetched and decompressed)"),
    ("aiokafka", "aiokafka in the event loop's thread (records handed over from its fetcher thread)"),
    ("faust", "Faust's stream machinery (conductor, stream iteration, events, acks, sensors)"),
    ("adapter", "ivmstream's Faust adapter (messages for the codec, holding and acknowledging events)"),
    ("decode", "ivmstream's codec (decoding records, dead letters)"),
    ("engine", "the service's engine (apply)"),
    ("publish", "publishing results (confluent-kafka producer)"),
    ("checkpoint", "checkpoints (outputs flushed, RocksDB write)"),
    ("runtime", "the worker's loop and apply mode (grouping by key, partitions)"),
    ("asyncio", "asyncio's scheduling (tasks, futures, callbacks)"),
    ("other", "everything else"),
)
_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("waiting", ("select.epoll", "<method 'poll' of 'select", "<method 'select' of", "/selectors.py")),
    ("consume", ("'consume' of 'cimpl.Consumer'", "'poll' of 'cimpl.Consumer'")),
    ("aiokafka", ("/aiokafka/",)),
    ("adapter", ("ivmstream/faust/",)),
    ("faust", ("/faust/", "/mode/", "/venusian/", "/yarl/", "/croniter/")),
    ("decode", ("ivmstream/events/", "_fastjson", "ivmstream/runtime/refusals", "ivmstream/runtime/dlq")),
    ("engine", ("ivmstream/services/",)),
    ("publish", ("ivmstream/runtime/output", "'produce' of 'cimpl.Producer'", "ivmstream/redis_client")),
    ("checkpoint", ("ivmstream/runtime/checkpoint", "ivmstream/state/", "rocksdict", "'flush' of 'cimpl")),
    ("runtime", ("ivmstream/runtime/", "ivmstream/metrics", "ivmstream/engine", "prometheus_client")),
    ("asyncio", ("asyncio/", "contextvars", "_asyncio")),
)

Key = tuple[str, int, str]


def part_of(key: Key) -> str | None:
    """The part a function belongs to by its file or name; None for a builtin or a standard library
    function outside asyncio (``weakref``, ``typing``, ``collections``...), whose time goes to its
    callers."""
    text = f"{key[0]}:{key[2]}"
    for part, markers in _MARKERS:
        if any(m in text for m in markers):
            return part
    stdlib = "/lib/python3" in key[0] and "-packages/" not in key[0]
    return None if key[0] == "~" or stdlib or key[0].startswith("<frozen") else "other"


def split(stats: Mapping[Key, Any]) -> dict[str, float]:
    """Seconds per part: each function's own time, a builtin's given to its callers' parts in
    proportion to the calls each made (recursively, for builtins called by builtins)."""
    seconds: dict[str, float] = defaultdict(float)

    def place(key: Key, amount: float, depth: int = 0) -> None:
        part = part_of(key)
        if part is not None or depth > 8:
            seconds[part or "other"] += amount
            return
        callers = stats[key][4]
        calls = sum(c[1] for c in callers.values())
        if not calls:
            seconds["other"] += amount
            return
        for caller, c in callers.items():
            if caller in stats:
                place(caller, amount * c[1] / calls, depth + 1)
            else:
                seconds["other"] += amount * c[1] / calls

    for key, (_cc, _nc, tt, _ct, _callers) in stats.items():
        place(key, tt)
    return dict(seconds)


def summarize(path: str, run: dict[str, Any]) -> dict[str, Any]:
    """A profiled run's parts: seconds and share of the profiled thread's time, per event."""
    stats = pstats.Stats(path).stats  # type: ignore[attr-defined]
    seconds = split(stats)
    total = sum(seconds.values())
    events = run["records"]
    return {
        "run": run,
        "profiled_seconds": total,
        "parts": {
            p: {
                "seconds": seconds.get(p, 0.0),
                "share": seconds.get(p, 0.0) / total,
                "us_per_event": 1e6 * seconds.get(p, 0.0) / events,
            }
            for p, _ in PARTS
            if seconds.get(p, 0.0) > 0
        },
    }


def profile_table(profile: dict[str, Any]) -> str:
    """The docs table: µs per event of each part on each runtime, under cProfile."""
    runtimes = [r for r in ("confluent-kafka", "faust") if r in profile]
    head = " | ".join(f"{r}, µs/event (share)" for r in runtimes)
    lines = [f"| part | {head} |", "|---|" + "---:|" * len(runtimes)]
    for part, what in PARTS:
        cells = []
        for r in runtimes:
            p = profile[r]["parts"].get(part)
            cells.append(f"{p['us_per_event']:.1f} ({100 * p['share']:.0f}%)" if p else "-")
        if any(c != "-" for c in cells):
            lines.append(f"| {part}: {what} | {' | '.join(cells)} |")
    totals = [1e6 * profile[r]["profiled_seconds"] / profile[r]["run"]["records"] for r in runtimes]
    lines.append(f"| **profiled thread, in all** | {' | '.join(f'**{t:.1f}**' for t in totals)} |")
    others = [
        1e6 * profile[r]["run"]["other_threads_cpu_seconds"] / profile[r]["run"]["records"] for r in runtimes
    ]
    lines.append(
        "| other threads' CPU (aiokafka's fetcher under Faust; librdkafka's under the default runtime) | "
        + " | ".join(f"{o:.1f}" for o in others)
        + " |"
    )
    return "\n".join(lines)
