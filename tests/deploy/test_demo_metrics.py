"""deploy/demo_metrics.py draws the documentation's figure: its bucket interpolation must be Prometheus'
``histogram_quantile``, checked against promtool on random histograms (fixed seed)."""

from __future__ import annotations

import random

import yaml
from deploy_tools import run_tool, tool

from deploy.demo_metrics import _quantile

BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def test_quantiles_match_promtools_histogram_quantile(tmp_path):
    rng = random.Random(20261123)
    series, checks = [], []
    for h in range(40):
        # cumulative counts, skewed towards few buckets, some empty ones, never an empty histogram
        counts, total = [], 0
        for _ in (*BOUNDS, float("inf")):
            total += rng.choice((0, 0, 1, rng.randint(1, 50), rng.randint(100, 1000)))
            counts.append(total)
        counts[-1] += 1
        buckets = list(zip((*BOUNDS, float("inf")), map(float, counts), strict=True))
        for upper, count in buckets:
            le = "+Inf" if upper == float("inf") else repr(upper)
            series.append({"series": f'x_bucket{{h="{h}",le="{le}"}}', "values": f"{count:g}x2"})
        for q in (0.5, 0.9, 0.99, rng.random()):
            expected = _quantile(q, buckets)
            checks.append(
                {
                    "expr": f'abs(histogram_quantile({q!r}, x_bucket{{h="{h}"}}) - {expected!r}) < bool 1e-9',
                    "eval_time": "1m",
                    "exp_samples": [{"labels": f'{{h="{h}"}}', "value": 1}],
                }
            )
    path = tmp_path / "quantiles_test.yaml"
    test = {"interval": "1m", "input_series": series, "promql_expr_test": checks}
    path.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "1m", "tests": [test]}))
    proc = run_tool(tool("promtool"), "test", "rules", str(path))
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout[-3000:] + proc.stderr
    assert len(checks) == 160
