"""Snapshots and incremental entries for every baseline strategy (docs/fivm/baselines.md §2.2).

Restoring mid-stream, from a snapshot or from the entries in shuffled order, gives an engine that
continues exactly like the original: same results and the same snapshot bytes, also for float sums
whose value depends on the order of additions; the folded ``changed_entries()`` log equals
``all_entries()`` at every checkpoint, including when static relations finish loading.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.engine import FivmEngine
from tests.unit.fivm.fivm_oracle import acyclic_schema, event_batches, occurrences, relation_columns
from tests.unit.fivm.state_checks import check_checkpoints_fold, check_restore_mid_stream

TRIANGLE = {
    "R": [{"A": "int"}, {"B": "int"}],
    "S": [{"B": "int"}, {"C": "int"}],
    "T": [{"C": "int"}, {"A": "int"}],
}
AGGREGATES = ["1-ivm", "1-ivm-ring", "dbt", "dbt-ring", "f-re", "dbt-re", "sql-opt"]
LISTINGS = ["list-keys", "list-payloads", "fact-payloads"]


@st.composite
def scenario(draw: st.DrawFn) -> tuple[dict[str, Any], list[list[UpdateEvent]]]:
    """A baseline strategy with a query it computes, and a stream with non-dyadic float values; for
    the aggregate strategies sometimes one updatable relation with static relations loading first."""
    strategy = draw(st.sampled_from([*AGGREGATES, *LISTINGS, "reeval"]))
    if strategy == "reeval":
        rels = {"A1": [{"I": "int"}, {"J": "int"}], "A2": [{"J": "int"}, {"K": "int"}]}
        config: dict[str, Any] = {"relations": rels, "ring": "matrix", "free": ["I", "K"]}
        return dict(config, strategy=strategy), draw(event_batches(config, max_batches=6))
    schema = draw(st.sampled_from([None, {"relations": TRIANGLE}]))
    if schema is None:
        schema = draw(acyclic_schema(components=draw(st.integers(1, 2))))
    config = dict(schema, strategy=strategy)
    types = {c: t for _, _, cols, ts in occurrences(config) for c, t in zip(cols, ts, strict=True)}
    numeric = sorted(v for v, t in types.items() if t != "str")
    if strategy in LISTINGS:
        config.update(ring="listing", free=draw(st.lists(st.sampled_from(sorted(types)), unique=True)))
    elif strategy == "sql-opt" or (numeric and draw(st.booleans())):
        if not numeric:
            config.update(strategy="f-re", ring="count")
        else:
            config.update(
                ring="covariance", features=draw(st.lists(st.sampled_from(numeric), min_size=1, unique=True))
            )
    elif numeric:
        config.update(ring="sum", sum=[draw(st.sampled_from(numeric))])
    lifted = set(config.get("features", [])) | set(config.get("sum", []))
    keys = sorted(set(types) - lifted)
    if config.get("ring") != "listing" and keys:
        config["free"] = draw(st.lists(st.sampled_from(keys), max_size=1))
    rels = list(relation_columns(config))
    batches: list[list[UpdateEvent]] = []
    if strategy in AGGREGATES and len(rels) > 1 and draw(st.booleans()):
        big = draw(st.sampled_from(rels))
        config["updatable"] = [big]
        static = [r for r in rels if r != big]
        batches += draw(event_batches(config, relations=static, max_batches=3, float_step=0.1))
        batches += draw(event_batches(config, relations=[big], float_step=0.1))
    else:
        batches += draw(event_batches(config, max_batches=8, float_step=0.1))
    return config, batches


@settings(max_examples=200, deadline=None)
@given(case=scenario(), data=st.data())
def test_restore_mid_stream_continues_identically(case: tuple[dict[str, Any], list[Any]], data: Any) -> None:
    config, batches = case
    cut = data.draw(st.integers(0, len(batches)))
    check_restore_mid_stream(config, batches, cut, data.draw(st.integers(0, 2**32)))


@settings(max_examples=200, deadline=None)
@given(case=scenario(), data=st.data())
def test_changed_entries_fold_into_all_entries(case: tuple[dict[str, Any], list[Any]], data: Any) -> None:
    config, batches = case
    check_checkpoints_fold(config, batches, [data.draw(st.booleans()) for _ in batches])


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(), strategy=st.sampled_from(["1-ivm", "1-ivm-ring", "dbt", "dbt-ring", "dbt-re", "sql-opt"])
)
def test_covariance_payloads_restore_exactly(data: Any, strategy: str) -> None:
    """Every kind of stored covariance payload (full-width cofactors, degree maps, one float per
    aggregate) survives a restore: sums and cross products of several features, non-dyadic values."""
    rels = {
        "R": [{"a": "int"}, {"x": "float"}],
        "S": [{"a": "int"}, {"b": "int"}, {"y": "float"}],
        "T": [{"b": "int"}, {"z": "int"}],
    }
    config = {"relations": rels, "ring": "covariance", "features": ["x", "y", "z", "b"], "strategy": strategy}
    batches = data.draw(event_batches(config, domain=4, float_step=0.1))
    cut = data.draw(st.integers(0, len(batches)))
    live = FivmEngine(config)
    for batch in batches[:cut]:
        live.apply(batch)
    restored = FivmEngine(config)
    restored.restore_entries(list(live.all_entries()))
    assert restored.result() == live.result()
    for batch in batches[cut:]:
        live.apply(batch)
        restored.apply(batch)
        assert restored.result() == live.result()
        assert restored.snapshot() == live.snapshot()
