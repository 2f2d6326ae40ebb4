"""A view compiled from SQL against the same view configured by hand, through the worker.

Each case is one of the demo's workloads (docs/examples/sql/demo.sql) as a view compiled from SQL, and
the same query as a user configures its service by hand over the same input rows:

* ``triangles``: the directed 3-cycles of graph ``social``; by hand, relations mode with each edge
  published as R, S and T events;
* ``vwap``: DBToaster's VWAP over the order book; by hand, ``query: vwap`` at fraction 1/4 over the
  order book's bids;
* ``fivm``: the Housing regression's cofactors (F-IVM's lifts); by hand, the fivm demo's covariance
  config (every column of every relation declared, the region as a column);
* ``reservoir``: 25 walks of three edges that do not step back; by hand, the reservoir demo's
  three-path config over the edge relation's aliases;
* ``topics``: revenue per city over orders and customers as Debezium topics, the compiled view reading
  them directly (its intake inside the worker); by hand, fivm over the same topics as ``inputs``
  (``bench/sql_topics.py``).

One run starts its own embedded broker. Each side's input is produced (``sql produce`` for the
compiled view) to a fresh topic of one partition before its clock starts; a real ``Worker`` (memory
store, default batch size) reads it to the end, timed from its first batch to its final checkpoint
(``bench/lib/worker_runs``). Both sides read the same input rows, so the rate compared is input rows
per second (the hand view's input; the compiled view drops the rest at intake, before the topic);
the ratio is the compiled view's time over the hand view's, the median over ``--repeats``
paired repeats (order alternating), and the ratio of each side's best run (the least disturbed on a
shared machine). The goal: at most 1.1. Every input is read ``SCALE`` times over
(copies are more rows of the same bags; the reservoir refuses them as duplicates, on both sides alike).

Usage (from the repo root)::

    .venv/bin/python bench/sql.py            # 3 repeats (~1 min)
    .venv/bin/python bench/sql.py --quick    # 1 repeat

Writes ``bench/results/sql.json`` (``sql_quick.json`` with ``--quick``); ``--markdown FILE.json``
prints the table of docs/sql.md from a stored report.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Producer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lib.broker import produce_all  # noqa: E402
from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import command_line, shown  # noqa: E402
from bench.lib.worker_runs import run_until_caught_up  # noqa: E402
from bench.sql_topics import topics_case  # noqa: E402
from ivmstream.config import build_config  # noqa: E402
from ivmstream.dev.broker import BrokerProcess  # noqa: E402
from ivmstream.events import read_source  # noqa: E402
from ivmstream.runtime import Worker  # noqa: E402
from ivmstream.runtime.clients import KafkaClients  # noqa: E402
from ivmstream.runtime.gc_policy import worker_gc  # noqa: E402
from ivmstream.runtime.kafka import producer_settings  # noqa: E402
from ivmstream.service import load_service  # noqa: E402
from ivmstream.sql import load_script  # noqa: E402
from ivmstream.sql.inputs import InputChoice, read_events  # noqa: E402
from ivmstream.sql.routing import plan_script  # noqa: E402
from ivmstream.sql.streaming import produce_events, stream_units, tables_of  # noqa: E402
from ivmstream.state import MemoryStore  # noqa: E402

RESULTS = REPO / "bench" / "results"
DEMO_SQL = REPO / "docs" / "examples" / "sql" / "demo.sql"
CASES = {
    "triangles": "social_triangles",
    "vwap": "vwap",
    "fivm": "housing_regression",
    "reservoir": "walks",
    "topics": "revenue",
}
TOPIC_ORDERS = 20_000  # the topics case: Debezium creates of orders (and 200 customers)
GOAL = 1.1
SCALE = 4  # each input read this many times over, so that a run lasts long enough to time


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _encode(relation: str, row: dict[str, Any], delta: int) -> bytes:
    return orjson.dumps({"relation": relation, "row": row, "delta": delta})


def hand_triangles() -> tuple[str, dict[str, Any], list[bytes], int]:
    rows = [e for e in _lines(REPO / "services/triangles/data/sample.jsonl") if e["row"]["graph"] == "social"]
    out = []
    for e in rows:
        a, b, d = e["row"]["src"], e["row"]["dst"], e["delta"]
        out += [
            _encode("R", {"a": a, "b": b}, d),
            _encode("S", {"b": a, "c": b}, d),
            _encode("T", {"c": a, "a": b}, d),
        ]
    return "triangles", {"mode": "relations", "strategy": "ivm-eps", "id_type": "int"}, out, len(rows)


def hand_vwap() -> tuple[str, dict[str, Any], list[bytes], int]:
    service = load_service("vwap")
    config = {"query": "vwap", "strategy": "rpai", "fraction": "1/4"}
    cfg = build_config(service, config)
    from ivmstream.config import schema_of

    records = list(
        read_source(
            REPO / "services/vwap/data/finance-standard.csv",
            "orderbook",
            schema=schema_of(service, cfg),
            options={"book": "bids"},
        )
    )
    return "vwap", config, [r.value for r in records], len(records)


def hand_fivm() -> tuple[str, dict[str, Any], list[bytes], int]:
    from ivmstream.services.fivm.service import DEMO_CONFIG  # the bench reads a service's demo config

    config = {k: v for k, v in DEMO_CONFIG.items() if k not in ("key_field", "model", "decimals")}
    config["relations"] = {name: {**cols, "region": "str"} for name, cols in DEMO_CONFIG["relations"].items()}
    rows = _lines(REPO / "services/fivm/data/housing.jsonl")
    return "fivm", config, [_encode(e["relation"], e["row"], e["delta"]) for e in rows], len(rows)


def hand_reservoir() -> tuple[str, dict[str, Any], list[bytes], int]:
    from ivmstream.services.reservoir.service import LINE3_CONFIG

    config = {k: v for k, v in LINE3_CONFIG.items() if k != "key_field"}
    config["relations"] = {
        "G1": {"a": "int", "b": "int", "g": "str"},
        "G2": {"b": "int", "c": "int", "g": "str"},
        "G3": {"c": "int", "d": "int", "g": "str"},
    }
    config["base_columns"] = {"edges": ["src", "dst", "graph"]}
    rows = _lines(REPO / "services/reservoir/data/graph.jsonl")
    return "reservoir", config, [_encode(e["relation"], e["row"], e["delta"]) for e in rows], len(rows)


HAND: dict[str, Callable[[], tuple[str, dict[str, Any], list[bytes], int]]] = {
    "triangles": hand_triangles,
    "vwap": hand_vwap,
    "fivm": hand_fivm,
    "reservoir": hand_reservoir,
}


def compiled(view: str) -> tuple[Any, list[bytes], int]:
    """The view's one unit and the records ``sql produce`` publishes for it; the input rows read."""
    script = load_script(DEMO_SQL, base=REPO)
    (unit,) = stream_units(plan_script(script, view), None, script.tables)
    events = list(read_events(script, tables_of([unit]), InputChoice({}, None, REPO)))
    values: list[bytes] = []
    produce_events([unit], events, lambda _t, v: values.append(v))
    return unit, values, len(events)


def _run(broker: BrokerProcess, service: Any, raw: dict[str, Any], values: list[bytes]) -> float:
    topic = f"sqlbench-{uuid.uuid4().hex[:10]}"
    broker.create_topic(topic, 1)
    producer = Producer(producer_settings(broker.bootstrap, {"linger.ms": 20}))
    produce_all(producer, topic, ((None, v, 0) for v in values))
    config = build_config(
        service, {**raw, "input_topic": topic, "output_topic": f"{topic}.out", "dlq_topic": f"{topic}.dlq"}
    )
    worker = Worker(service, config, KafkaClients(broker.bootstrap), MemoryStore(), group=f"{topic}-g")
    with worker_gc():
        seconds, _results = run_until_caught_up(worker, {0: len(values)})
    return seconds


def _case(broker: BrokerProcess, case: str, view: str, repeats: int) -> dict[str, Any]:
    """Paired runs of one demo view, compiled and by hand, each side on topics of its own."""
    unit, sql_values, sql_rows = compiled(view)
    name, hand_config, hand_values, hand_rows = HAND[case]()
    # bags: copies are rows too; each next to its original, so static tables stay loaded first
    sql_values = [v for v in sql_values for _ in range(SCALE)]
    hand_values = [v for v in hand_values for _ in range(SCALE)]
    service = load_service(name)
    runs: dict[str, list[float]] = {"sql": [], "hand": []}
    for r in range(repeats):
        for side in ("sql", "hand") if r % 2 == 0 else ("hand", "sql"):
            if side == "sql":
                runs["sql"].append(_run(broker, unit.service, dict(unit.unit.options), sql_values))
            else:
                runs["hand"].append(_run(broker, service, hand_config, hand_values))
        progress(f"{case} repeat {r + 1}/{repeats}: sql {runs['sql'][-1]:.3f}s, hand {runs['hand'][-1]:.3f}s")
    return {
        "view": view,
        "service": name,
        "input_rows": hand_rows * SCALE,
        "rows_read_by_sql": sql_rows * SCALE,
        "records": {"sql": len(sql_values), "hand": len(hand_values)},
        "seconds": runs,
    }


def bench(broker: BrokerProcess, repeats: int, only: list[str] | None = None) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for case, view in CASES.items():
        if only and case not in only:
            continue
        if case == "topics":
            with tempfile.TemporaryDirectory() as tmp:
                entry = topics_case(broker, repeats, TOPIC_ORDERS, Path(tmp))
        else:
            entry = _case(broker, case, view, repeats)
        runs, rows = entry["seconds"], entry["input_rows"]
        entry["ratio"] = statistics.median(s / h for s, h in zip(runs["sql"], runs["hand"], strict=True))
        entry["ratio_best"] = min(runs["sql"]) / min(runs["hand"])
        entry["rows_per_s"] = {side: rows / statistics.median(runs[side]) for side in ("sql", "hand")}
        cases[case] = entry
    return {"repeats": repeats, "goal": GOAL, "cases": cases, "load_average": load_average()}


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| view | service | input rows | compiled from SQL (rows/s) | by hand (rows/s) "
        "| time ratio, best runs | time ratio, median of pairs |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for c in report["cases"].values():
        lines.append(
            f"| `{c['view']}` | {c['service']} | {c['input_rows']:,} | {c['rows_per_s']['sql']:,.0f} | "
            f"{c['rows_per_s']['hand']:,.0f} | {c['ratio_best']:.2f} | {c['ratio']:.2f} |"
        )
    load = report.get("load_average") or ["?"]
    lines += [
        "",
        f"{report['repeats']} paired repeats per case; rows/s from each side's median time; the ratios are "
        f"the compiled view's time to the hand view's, of each side's best run and the median of the "
        f"per-repeat ratios (goal at most {report['goal']}); load average {load[0]} "
        f"(`{report.get('command', 'bench/sql.py')}`).",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only this case (repeatable)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--markdown", type=Path, metavar="FILE.json", help="print the docs table of a report")
    args = parser.parse_args()
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text())))
        return
    repeats = args.repeats or (1 if args.quick else 3)
    out = args.out or RESULTS / ("sql_quick.json" if args.quick else "sql.json")
    with BrokerProcess() as broker:
        report = bench(broker, repeats, args.case)
    report["command"] = command_line("bench/sql.py", None)
    report["machine"] = machine_info()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    ratios = {c: {"best": v["ratio_best"], "median": v["ratio"]} for c, v in report["cases"].items()}
    print(json.dumps({"ratios": ratios, "out": shown(out)}, indent=2))


if __name__ == "__main__":
    main()
