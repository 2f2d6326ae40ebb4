"""The sketches benchmark's core: a sketched database kept fresh three ways (IMP's incremental
maintenance, full recapture, no maintenance) with DuckDB answering the queries, timed per delta.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd  # type: ignore[import-untyped]  (at import: never inside a timed span)
import sqlglot

from ivmstream.services.sketches import plan as P
from ivmstream.services.sketches.capture_sql import FRAG, branches, capture_sql
from ivmstream.services.sketches.engine import SketchEngine

RESULTS = Path(__file__).resolve().parent / "results"
SYNTH = {"t": {"id": "int", "a": "int", "b": "int", "c": "int", "d": "int", "e": "int"}}
SLOPES = {"b": 2, "c": 3, "d": 4, "e": 3}


CPU: list[float] = [0.0]  # the process CPU seconds (every thread) of the last ``timed`` call


def timed(fn: Callable[[], Any]) -> float:
    """Wall seconds of ``fn``; its CPU seconds in ``CPU[0]``, which a loaded machine does not inflate."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    CPU[0] = time.process_time() - c0
    return wall


def options(query: str, relations: Any, partition: Mapping[str, Any], **flags: Any) -> dict[str, Any]:
    return {
        "query": query,
        "relations": relations,
        "partition": dict(partition),
        "strategy": flags.get("strategy", "imp"),
        "selection_pushdown": True,
        "bloom": flags.get("bloom", False),
        "allow_unsafe": flags.get("allow_unsafe", False),
        "join": flags.get("join", "mat"),
        "monotone_aggregates": flags.get("monotone_aggregates", False),
        "top_m": flags.get("top_m", 0),
        "instances": flags.get("instances", []),
    }


# --- a sketched database with the three ways of keeping its sketch fresh ---------------------------------


class Updates:
    """Batches against a table: half deletes of stored rows, half inserts of copies of stored rows
    under fresh keys (``make``)."""

    def __init__(self, rows: Sequence[tuple[Any, ...]], seed: int) -> None:
        self.live = list(rows)
        self.rng = random.Random(seed)
        self.next_id = 10**9

    def batch(self, size: int, make: Callable[[tuple[Any, ...], int], tuple[Any, ...]]) -> dict:
        live, rng = self.live, self.rng
        delta: dict[tuple[Any, ...], int] = {}
        for _ in range(size // 2):
            i = rng.randrange(len(live))
            row = live[i]
            live[i] = live[-1]
            live.pop()
            delta[row] = delta.get(row, 0) - 1
        for _ in range(size - size // 2):
            self.next_id += 1
            row = make(live[rng.randrange(len(live))], self.next_id)
            live.append(row)
            delta[row] = delta.get(row, 0) + 1
        return {r: n for r, n in delta.items() if n}


class Bench:
    """One query over one database: the IMP engine, and a DuckDB copy with a fragment column per table."""

    def __init__(
        self,
        opts: Mapping[str, Any],
        data: Mapping[str, dict[tuple[Any, ...], int]],
        seed: int,
        probe: bool = False,
        duck_load: Callable[[Any, Bench], None] | None = None,
        pools: Mapping[str, Sequence[tuple[Any, ...]]] | None = None,
        duck: Any = None,
    ) -> None:
        """``duck_load(con, bench)`` creates the ``__p_<table>`` copies itself (big inputs, loaded without
        a Python row loop), in ``duck`` when given (a cursor of a database holding shared inputs);
        ``pools`` restricts the rows batches delete and copy (rows satisfying the
        query's predicates, as the paper draws its deltas)."""
        self.engine = SketchEngine(opts)
        pools = pools or {}
        self.updates = {
            t: Updates(list(pools.get(t, rows)), seed) for t, rows in data.items() if t in self.engine.tables
        }
        read = {t: dict(r) for t, r in data.items() if t in self.updates}
        self.bootstrap_s = timed(lambda: self.engine.maintain(read))
        # The same query with probe joins, fed the same batches (§2.4.5).
        self.probe = SketchEngine({**opts, "join": "probe"}) if probe else None
        if self.probe is not None:
            self.probe.maintain(read)
        self.duck = duck if duck is not None else duckdb.connect()
        self.duck.execute("SET threads TO 2")
        if duck_load is not None:
            duck_load(self.duck, self)
        for name, table in self.engine.tables.items():
            if duck_load is not None:
                continue
            typed = zip(table.sql_columns, table.types, strict=True)
            cols = ", ".join(f"{c} {duck_type(t)}" for c, t in typed)
            self.duck.execute(f"CREATE TABLE __p_{name} ({cols}, {FRAG} BIGINT)")
            self._insert(name, [r for r, n in data.get(name, {}).items() for _ in range(n)])
        columns = {n: t.sql_columns for n, t in self.engine.tables.items()}
        self.capture_queries = [
            capture_sql(b, columns, "duckdb")
            for b in branches(sqlglot.parse_one(opts["query"]))  # type: ignore[arg-type]
        ]

    def batch(self, table: str, size: int, make: Callable[[tuple[Any, ...], int], tuple[Any, ...]]) -> dict:
        return {table: self.updates[table].batch(size, make)}

    def imp(self, batch: Mapping[str, Mapping[tuple[Any, ...], int]]) -> float:
        return timed(lambda: self.engine.maintain(batch))

    def imp_probe(self, batch: Mapping[str, Mapping[tuple[Any, ...], int]]) -> float:
        probe = self.probe
        assert probe is not None
        return timed(lambda: probe.maintain(batch))

    def series(
        self, table: str, delta: int, repeats: int, make: Callable[[tuple[Any, ...], int], tuple[Any, ...]]
    ) -> dict[str, Any]:
        """``repeats`` batches of ``delta`` tuples, each maintained by IMP (and the probe-join engine when
        there is one) and then recaptured by DuckDB, so load changes hit both alike: medians of wall and
        CPU seconds, every batch's wall seconds, the speed-ups."""
        imp, duck, moved, probe, imp_cpu, duck_cpu = [], [], [], [], [], []
        for _ in range(repeats):
            batch = self.batch(table, delta, make)
            imp.append(self.imp(batch))
            imp_cpu.append(CPU[0])
            if self.probe is not None:
                probe.append(self.imp_probe(batch))
            capture_s, apply_s = self.full_duckdb(batch)
            duck_cpu.append(CPU[0])
            duck.append(capture_s)
            moved.append(apply_s)
        rec: dict[str, Any] = {
            "delta": delta,
            "imp_s": median(imp),
            "full_duckdb_s": median(duck),
            "duckdb_apply_batch_s": median(moved),
            "imp_all_s": imp,
            "duckdb_all_s": duck,
        }
        if probe:
            rec["imp_probe_s"] = median(probe)
        rec["speedup_duckdb"] = rec["full_duckdb_s"] / rec["imp_s"]
        return rec | cpu_ratio(imp_cpu, duck_cpu)

    def full_python(self) -> float:
        return timed(lambda: P.capture_sketch(self.engine.compiled.root, self.engine.view(None)))

    def _insert(self, name: str, rows: Sequence[tuple[Any, ...]], table: str | None = None) -> None:
        """Rows of ``name`` with their fragment id (a stored column, as a fragment-clustered table keeps)."""
        spec = self.engine.specs.get(name)
        frag = (lambda r: spec.offset + spec.fragment(r[spec.position])) if spec else (lambda r: -1)
        cols = [*self.engine.tables[name].sql_columns, FRAG]
        _insert(self.duck, table or f"__p_{name}", cols, [(*r, frag(r)) for r in rows])

    def duck_apply(self, batch: Mapping[str, Mapping[tuple[Any, ...], int]]) -> None:
        """Deletes by the row's key columns (all but the fragment), then inserts."""
        for name, delta in batch.items():
            cols = self.engine.tables[name].sql_columns
            dels = [r for r, n in delta.items() if n < 0]
            if dels:
                self.duck.execute(f"CREATE OR REPLACE TEMP TABLE __del AS SELECT * FROM __p_{name} LIMIT 0")
                self._insert(name, dels, "__del")
                keys = " AND ".join(f"__p_{name}.{c} IS NOT DISTINCT FROM __del.{c}" for c in cols)
                self.duck.execute(f"DELETE FROM __p_{name} USING __del WHERE {keys}")
            self._insert(name, [r for r, n in delta.items() for _ in range(max(n, 0))])

    def duck_capture(self) -> int:
        sketch = 0
        for q in self.capture_queries:
            for row in self.duck.execute(q).fetchall():
                for v in row:
                    if v is not None and v >= 0:
                        sketch |= 1 << int(v)
        return sketch

    def full_duckdb(self, batch: Mapping[str, Mapping[tuple[Any, ...], int]]) -> tuple[float, float]:
        """(seconds of the recapture, seconds spent moving the batch into DuckDB). Only the recapture
        counts as the baseline's time: the updates reach the database whatever keeps the sketch, and
        the Python baseline's time does not include its store update either."""
        apply_s = timed(lambda: self.duck_apply(batch))
        return timed(self.duck_capture), apply_s

    def check(self, python: bool = True) -> None:
        """IMP's sketch against both captures (``python=False``: against DuckDB's alone, for inputs whose
        Python capture does not fit the time); the Python capture's time is kept (``check_python_s``)."""
        if not python:
            if self.engine.sketch() != self.duck_capture():
                raise AssertionError("IMP and the DuckDB capture disagree on the sketch")
            return
        want = 0

        def capture() -> None:
            nonlocal want
            want = P.capture_sketch(self.engine.compiled.root, self.engine.view(None))

        self.check_python_s = timed(capture)
        if self.engine.sketch() != want or self.duck_capture() != want:
            raise AssertionError("IMP, Python capture and DuckDB capture disagree on the sketch")
        if self.probe is not None and self.probe.sketch() != want:
            raise AssertionError("IMP with probe joins disagrees with the capture")


def duck_type(t: str) -> str:
    return {"int": "BIGINT", "exact": "DECIMAL(18,4)", "decimal": "DECIMAL(18,4)", "str": "VARCHAR"}.get(
        t, "DOUBLE"
    )


def _insert(con: Any, table: str, cols: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    if not rows:
        return
    df = pd.DataFrame(
        [[float(v) if type(v).__name__ == "Decimal" else v for v in r] for r in rows], columns=cols
    )
    con.register("__rows", df)
    con.execute(f"INSERT INTO {table} SELECT * FROM __rows")
    con.unregister("__rows")


def cpu_ratio(imp_cpu: Sequence[float], duck_cpu: Sequence[float]) -> dict[str, float]:
    """CPU seconds (median) and a load-independent speed-up: DuckDB's CPU over its 2 threads (its wall
    time with perfect parallelism, a lower bound) against IMP's single-threaded CPU."""
    imp, duck = median(imp_cpu), median(duck_cpu)
    return {"imp_cpu_s": imp, "duckdb_cpu_s": duck, "speedup_duckdb_cpu": duck / 2 / max(imp, 1e-9)}


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)
