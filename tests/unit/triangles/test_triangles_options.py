"""The triangles service's options, their validation, its relations and the engine factory."""

from __future__ import annotations

import pytest

from ivmstream.config import ConfigError, build_config
from ivmstream.events import EventCodec, EventError, Schema
from ivmstream.service import ServiceDefinition
from ivmstream.services.triangles.baselines import FirstOrderEngine, RecomputeEngine
from ivmstream.services.triangles.engine import make_engine
from ivmstream.services.triangles.ivm_eps import IvmEpsEngine
from ivmstream.services.triangles.options import OPTIONS, relations, validate

SERVICE = ServiceDefinition(
    name="triangles-test",
    summary="test double of the lead's declaration",
    options=OPTIONS,
    relations=relations,
    engine=make_engine,
    validate=validate,
)


def config(**raw):
    return build_config(SERVICE, raw).options


def test_defaults_are_graph_mode_auto_and_ivm_eps_at_one_half():
    opts = config()
    assert opts == {
        "mode": "graph",
        "strategy": "auto",
        "epsilon": None,
        "always_iterate_s": False,
        "id_type": "int",
    }
    assert make_engine(opts).strategy == "auto"
    engine = make_engine(config(strategy="ivm-eps"))
    assert isinstance(engine, IvmEpsEngine) and engine.graph and [str(e) for e in engine.eps] == ["1/2"]


def test_epsilon_forms_are_canonicalized():
    assert config(strategy="ivm-eps", epsilon="1/3")["epsilon"] == "1/3"
    assert config(strategy="ivm-eps", epsilon=0.25)["epsilon"] == "1/4"
    assert config(strategy="ivm-eps", epsilon=1)["epsilon"] == "1"
    per = config(mode="relations", strategy="ivm-eps", epsilon={"R": 0, "S": "0", "T": 1.0})
    assert per["epsilon"] == {"R": "0", "S": "0", "T": "1"}
    engine = make_engine(per)
    assert [str(e) for e in engine.eps] == ["0", "0", "1"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"mode": "directed"}, "'mode' must be one of graph, relations"),
        ({"strategy": "dbtoaster"}, "'strategy' must be one of"),
        ({"epsilon": "3/2"}, r"'epsilon' epsilon must lie in \[0, 1\]"),
        ({"epsilon": "x"}, "rational like"),
        ({"mode": "relations", "epsilon": {"R": "1/2", "S": "1/2"}}, "exactly R, S and T"),
        ({"mode": "relations", "epsilon": {"R": "1/2", "S": "1/2", "T": "2"}}, r"for T: epsilon must lie"),
        ({"always_iterate_s": "yes"}, "must be true or false"),
        ({"id_type": "float"}, "must be one of int, str"),
        (
            {"strategy": "ivm-eps", "epsilon": {"R": "1/2", "S": "1/2", "T": "1/2"}},
            "per-relation 'epsilon' needs mode 'relations'",
        ),
        ({"epsilon": "1/3"}, "'epsilon' applies only to strategy 'ivm-eps', but strategy is 'auto'"),
        ({"strategy": "first-order", "epsilon": "1/2"}, "'epsilon' applies only to strategy 'ivm-eps'"),
        ({"always_iterate_s": True}, "'always_iterate_s' applies only to strategy 'first-order'"),
    ],
)
def test_invalid_options_and_combinations_are_refused(raw, message):
    with pytest.raises(ConfigError, match=message):
        config(**raw)


def test_factory_builds_every_strategy_in_both_modes():
    for mode in ("graph", "relations"):
        for strategy in ("ivm-eps", "first-order", "factorized", "recursive", "recompute"):
            engine = make_engine(config(mode=mode, strategy=strategy))
            assert engine.strategy == strategy and engine.mode == mode
    fo = make_engine(config(strategy="first-order", always_iterate_s=True))
    assert isinstance(fo, FirstOrderEngine) and fo.always_iterate_s
    assert isinstance(make_engine(config(strategy="recompute")), RecomputeEngine)


def test_relations_per_mode_and_id_type():
    graph = relations(config())
    assert [(r.name, r.columns) for r in graph] == [("edges", (("src", "int"), ("dst", "int")))]
    rel = relations(config(mode="relations", id_type="str"))
    assert [(r.name, r.column_names) for r in rel] == [
        ("R", ("a", "b")),
        ("S", ("b", "c")),
        ("T", ("c", "a")),
    ]
    assert {typ for r in rel for _, typ in r.columns} == {"str"}


def test_codec_and_engine_together():
    opts = config()
    codec = EventCodec(Schema.of(*relations(opts)))
    engine = make_engine(opts)
    events = [
        codec.decode(b'{"relation":"edges","row":{"src":%d,"dst":%d},"delta":1}' % e)
        for e in ((1, 2), (2, 3))
    ]
    events.append(codec.decode(b'{"relation":"edges","row":{"src":3,"dst":1},"delta":1}'))
    assert engine.apply(events) == []
    assert engine.result()["triangles"] == 1
    with pytest.raises(EventError):
        codec.decode(b'{"relation":"edges","row":{"src":"a","dst":1},"delta":1}')  # int ids declared
