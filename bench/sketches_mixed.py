"""The IMP paper's mixed workload with several query instances (docs/sketches/benchmark.md): Q_endtoend
``SELECT a, AVG(c) FROM t GROUP BY a HAVING AVG(c) > lo AND AVG(c) < hi`` where the sketch is kept for a
bucket's interval and every query is a random instance whose interval lies inside it, answered over
that one sketch (reuse, docs/sketches/algorithm.md §2.7.1).

Strategies over the same operations: ``imp`` maintains the bucket's sketch at every update and answers
over it; ``full`` recaptures the sketch at the first query after updates; ``nosketch`` answers over all
rows. Operations alternate ``u`` update batches and ``q`` queries (1U1Q, 1U5Q, 5U1Q) for several Δ,
including the paper's exception, 5U1Q at Δ = 2,000, where five batches change the table between two
queries.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

from bench.lib.progress import progress
from bench.sketches_db import SYNTH, Updates, options
from bench.sketches_experiments import by_a, fresh_id, synthetic
from ivmstream.services.sketches.engine import SketchEngine


def instances(groups: int, count: int, seed: int) -> tuple[str, list[str]]:
    """The bucket query (AVG(c) in (lo, hi), c ≈ 3a: a fifth of the groups) and ``count`` instances with
    intervals inside it."""
    lo, hi = 3 * groups // 5, 3 * groups // 5 + 3 * groups // 5
    rng = random.Random(seed)
    base = "SELECT a, AVG(c) FROM t GROUP BY a HAVING AVG(c) > {lo} AND AVG(c) < {hi}"
    out = []
    for _ in range(count):
        a = rng.randint(lo, hi - 2)
        b = rng.randint(a + 1, min(hi, a + (hi - lo) // 3))
        out.append(base.format(lo=a, hi=b))
    return base.format(lo=lo, hi=hi), out


def exp_mixed_instances(
    n: int, groups: int, ops: int, deltas: Sequence[int], ratios: Sequence[str], n_instances: int
) -> list[dict[str, Any]]:
    bucket, inst = instances(groups, n_instances, seed=2)
    data = synthetic(n, groups, seed=23)
    out = []
    for ratio in ratios:
        u, q = int(ratio[0]), int(ratio[2])
        for d in deltas:
            rec: dict[str, Any] = {
                "ratio": ratio,
                "delta": d,
                "rows": n,
                "operations": ops,
                "instances": n_instances,
            }
            answers = {}
            for strategy in ("imp", "full", "nosketch"):
                engine = SketchEngine(
                    options(bucket, SYNTH, by_a(groups, 1000), strategy=strategy, instances=inst)
                )
                engine.maintain({"t": dict(data["t"])})
                engine.sketch()  # captured before the timed operations (every strategy starts from a sketch)
                total, ans, scanned = _run(engine, Updates(list(data["t"]), seed=d), u, q, d, ops, seed=d)
                answers[strategy] = ans
                rec[f"{strategy}_s"] = total
                rec[f"{strategy}_rows_scanned"] = scanned
            if not answers["imp"] == answers["full"] == answers["nosketch"]:
                raise AssertionError("mixed workload with instances: strategies answer differently")
            rec["fastest"] = min(("imp", "full", "nosketch"), key=lambda s: rec[f"{s}_s"])
            progress(
                f"mixed+instances {ratio} Δ={d}: "
                + ", ".join(f"{s} {rec[s + '_s']:.2f}s" for s in ("imp", "full", "nosketch"))
            )
            out.append(rec)
    return out


def _run(
    engine: SketchEngine, feeder: Updates, updates: int, queries: int, delta: int, ops: int, seed: int
) -> tuple[float, list[Any], int]:
    """Seconds for ``ops`` operations, every answer (in order) and the rows the queries scanned."""
    rng = random.Random(seed)
    compiled = [c for _, c in engine.compiled.instances]
    total, done, answers, scanned = 0.0, 0, [], 0
    use_sketch = engine.strategy != "nosketch"
    while done < ops:
        for _ in range(updates):
            batch = {"t": feeder.batch(delta, fresh_id)}
            t0 = time.perf_counter()
            engine.maintain(batch)
            total += time.perf_counter() - t0
            done += 1
        for _ in range(queries):
            which = compiled[rng.randrange(len(compiled))]
            t0 = time.perf_counter()
            sketch = engine.sketch() if use_sketch else None
            answers.append(engine.answer(sketch, which))
            total += time.perf_counter() - t0
            scanned += engine.rows_scanned(sketch) if sketch is not None else sum(engine.rows.values())
            done += 1
    return total, answers, scanned
