"""Scrape every worker's /metrics while ``ivmstream demo`` runs, and draw the dashboards' main panels from
those samples (docs/operations.md shows the figure, since a Grafana screenshot needs a Grafana server).

``python -m deploy.demo_metrics [--out docs/operations] [--data bench/results/demo-metrics.json]`` writes
the raw scrapes (``--data``, beside the benchmarks' reports) and the figure ``demo-metrics.png``
(``--out``). The panels compute what the dashboards' PromQL computes: per-second rates of the counters
between scrapes, the consumer lag per partition, and batch latency quantiles interpolated in the
histogram's buckets like ``histogram_quantile``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Sample = tuple[str, dict[str, str], float]
# the series the figure draws (the raw file keeps only these)
KEEP = frozenset(
    (
        "ivmstream_events_in_total",
        "ivmstream_events_applied_total",
        "ivmstream_consumer_lag",
        "ivmstream_batch_seconds_bucket",
    )
)


def scrape(port: int) -> list[Sample] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    families = text_string_to_metric_families(text)
    return [(s.name, dict(s.labels), s.value) for f in families for s in f.samples if s.name in KEEP]


def record_demo(every: float = 0.5) -> dict[str, list[dict[str, Any]]]:
    """Run the demo; while its workers live, scrape each one every ``every`` seconds."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ivmstream.cli", "demo"], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdout is not None
    ports: dict[str, int] = {}
    scrapes: dict[str, list[dict[str, Any]]] = {}
    done = threading.Event()
    started = time.monotonic()

    def poll() -> None:
        while not done.is_set():
            for service, port in list(ports.items()):
                samples = scrape(port)
                if samples is not None:
                    scrapes.setdefault(service, []).append(
                        {"t": time.monotonic() - started, "samples": samples}
                    )
            done.wait(every)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    for line in proc.stdout:
        print(line, end="", flush=True)
        found = re.search(r"^\s+(\S+): worker started .* metrics on :(\d+)\)", line)
        if found:
            ports[found.group(1)] = int(found.group(2))
    proc.wait()
    done.set()
    poller.join()
    if proc.returncode != 0:
        raise SystemExit(f"ivmstream demo failed ({proc.returncode})")
    return scrapes


def _value(samples: list[Sample], name: str, **labels: str) -> float:
    return sum(v for n, lab, v in samples if n == name and all(lab.get(k) == x for k, x in labels.items()))


def _quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """``histogram_quantile``: linear interpolation inside the bucket holding rank q * total."""
    buckets = sorted(buckets)
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = upper, count
    return lower


def panels(scrapes: dict[str, list[dict[str, Any]]], window: float = 2.0) -> dict[str, dict[str, Any]]:
    """Per service: time series of the overview's panels."""
    out: dict[str, dict[str, Any]] = {}
    for service, series in scrapes.items():
        times: list[float] = []
        rates_in: list[float] = []
        rates_applied: list[float] = []
        p50: list[float | None] = []
        p99: list[float | None] = []
        lag: dict[str, list[tuple[float, float]]] = {}
        for i, now in enumerate(series):
            j = max(k for k in range(i + 1) if series[i]["t"] - series[k]["t"] >= window or k == 0)
            if j == i:
                continue
            then = series[j]
            dt = now["t"] - then["t"]
            times.append(now["t"])
            for name, target in (
                ("ivmstream_events_in_total", rates_in),
                ("ivmstream_events_applied_total", rates_applied),
            ):
                target.append((_value(now["samples"], name) - _value(then["samples"], name)) / dt)
            buckets: dict[float, float] = {}
            for n, lab, v in now["samples"]:
                if n == "ivmstream_batch_seconds_bucket":
                    buckets[float(lab["le"])] = buckets.get(float(lab["le"]), 0.0) + v
            for n, lab, v in then["samples"]:
                if n == "ivmstream_batch_seconds_bucket":
                    buckets[float(lab["le"])] -= v
            p50.append(_quantile(0.5, list(buckets.items())))
            p99.append(_quantile(0.99, list(buckets.items())))
            for n, lab, v in now["samples"]:
                if n == "ivmstream_consumer_lag":
                    lag.setdefault(f"{lab['topic']}:{lab['partition']}", []).append((now["t"], v))
        out[service] = {
            "t": times,
            "in": rates_in,
            "applied": rates_applied,
            "p50": p50,
            "p99": p99,
            "lag": lag,
        }
    return out


def last_activity(scrapes: dict[str, list[dict[str, Any]]]) -> float:
    """When the last events were consumed (the demo's Spark reconciliation follows, with idle workers)."""
    data = panels(scrapes)
    return max(
        (t for d in data.values() for t, rate in zip(d["t"], d["in"], strict=True) if rate > 0), default=0
    )


def trim(scrapes: dict[str, list[dict[str, Any]]], after: float = 10.0) -> dict[str, list[dict[str, Any]]]:
    end = last_activity(scrapes) + after
    return {service: [s for s in series if s["t"] <= end] for service, series in scrapes.items()}


def plot(scrapes: dict[str, list[dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = panels(scrapes)
    end = last_activity(scrapes) + 4.0
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for service, d in sorted(data.items()):
        axes[0].plot(d["t"], d["in"], label=f"{service} in")
        axes[0].plot(d["t"], d["applied"], linestyle="--", label=f"{service} applied")
        for partition, points in sorted(d["lag"].items()):
            axes[1].step([t for t, _v in points], [v for _t, v in points], where="post", label=partition)
        axes[2].plot(d["t"], [v * 1000 if v is not None else None for v in d["p99"]], label=f"{service} p99")
        axes[2].plot(
            d["t"],
            [v * 1000 if v is not None else None for v in d["p50"]],
            linestyle=":",
            label=f"{service} p50",
        )
    axes[0].set(
        title="Events in / applied (per s, 2 s window)", xlabel="seconds into the demo", ylabel="events/s"
    )
    axes[1].set(title="Consumer lag per partition", xlabel="seconds into the demo", ylabel="records")
    axes[2].set(title="Batch latency p50 / p99 (2 s window)", xlabel="seconds into the demo", ylabel="ms")
    axes[2].set_yscale("log")
    for ax in axes:
        ax.set_xlim(0, end)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.demo_metrics", description=__doc__)
    parser.add_argument("--out", default="docs/operations", help="directory for demo-metrics.png")
    parser.add_argument(
        "--data",
        default="bench/results/demo-metrics.json",
        help="the raw scrapes (JSON), written or --replot read",
    )
    parser.add_argument(
        "--replot", action="store_true", help="draw from the recorded JSON, do not run the demo"
    )
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    raw = Path(args.data)
    raw.parent.mkdir(parents=True, exist_ok=True)
    if args.replot:
        scrapes = trim(json.loads(raw.read_text()))
    else:
        scrapes = trim(record_demo())
        raw.write_text(json.dumps(scrapes, separators=(",", ":")))
    plot(scrapes, out / "demo-metrics.png")
    print(f"wrote {raw} and {out / 'demo-metrics.png'} ({sum(map(len, scrapes.values()))} scrapes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
