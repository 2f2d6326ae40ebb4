"""The fivm service from the command line: replay of the bundled jsonl sample (one query instance per
region) and of the authors' ``|``-separated tables (the relation from the file name, the columns from
the configured query), compared with the engine and with sums computed here from the files."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from helpers import REPO, ivm, replay_result, write_config

from ivmstream.config import build_config
from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.engine import FivmEngine, query_config, shape_result
from ivmstream.services.fivm.options import HOUSING
from ivmstream.services.fivm.service import DEMO_CONFIG, SERVICE

SAMPLE = REPO / "services" / "fivm" / "data" / "housing.jsonl"
SAMPLE_CONFIG = REPO / "services" / "fivm" / "data" / "housing.yaml"
TABLES = REPO / "tests" / "data" / "fivm_housing"


def engine_results(config: dict, path: Path, key_field: str) -> dict:
    """Per key, the shaped result of a bare ``FivmEngine`` given all of that key's events at once."""
    options = build_config(SERVICE, config).options
    events: dict[str, list[UpdateEvent]] = defaultdict(list)
    for line in path.read_bytes().splitlines():
        ev = orjson.loads(line)
        row = dict(ev["row"])
        key = row.pop(key_field)
        events[key].append(UpdateEvent(ev["relation"], row, ev["delta"], key))
    out = {}
    for key, evs in events.items():
        engine = FivmEngine(query_config(options))
        assert engine.apply(evs) == []
        out[key] = orjson.loads(orjson.dumps(shape_result(engine.query, engine.result(), options["model"])))
    return out


def table_rows(name: str) -> list[dict[str, float]]:
    """A table of the authors' format read here, independently of the platform's reader."""
    rows = []
    for line in (TABLES / f"{name}.tbl").read_text().splitlines():
        fields = line.rstrip("|").split("|")
        rows.append(dict(zip(HOUSING[name], map(float, fields), strict=True)))
    return rows


def test_the_sample_config_file_is_the_demo_config():
    assert yaml.safe_load(SAMPLE_CONFIG.read_text()) == DEMO_CONFIG


def test_replay_of_the_sample_gives_each_region_the_engines_result_with_a_model():
    out = replay_result(SAMPLE_CONFIG, SAMPLE, "fivm")
    assert out["events"] == len(SAMPLE.read_bytes().splitlines()) and out["rejected"] == 0
    results = out["result"]
    assert results == engine_results(dict(DEMO_CONFIG), SAMPLE, "region")
    assert set(results) == {"north", "east", "south"}
    for result in results.values():
        assert set(result) == {"count", "variables", "sum", "sumprod", "model", "stats"}
        assert sorted(result["variables"]) == sorted(DEMO_CONFIG["features"])  # in view-tree order
        assert result["model"]["status"] == "ok" and result["model"]["label"] == "price"
        assert result["count"] > 0


def test_the_model_by_gradient_descent_equals_the_closed_form_on_the_sample():
    spec = {"label": "price", "ridge": 1.0, "method": "gradient-descent", "tolerance": 1e-12}
    descent = engine_results(dict(DEMO_CONFIG, model=spec), SAMPLE, "region")
    closed = engine_results(dict(DEMO_CONFIG), SAMPLE, "region")
    for region, result in descent.items():
        got, want = result["model"], closed[region]["model"]
        assert got["status"] == "ok" and got["method"] == "gradient-descent" and got["iterations"] > 0
        for feature, value in want["coefficients"].items():
            assert abs(got["coefficients"][feature] - value) <= 1e-6 * max(1.0, abs(value))


def test_replay_every_n_events_prints_progress_lines(tmp_path):
    proc = ivm("replay", "fivm", "--config", str(SAMPLE_CONFIG), "--input", str(SAMPLE), "--every", "500")
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["events"] for line in lines] == [500, 1000, 1500, len(SAMPLE.read_bytes().splitlines())]


def test_replay_of_an_authors_table_takes_the_relation_from_the_file_name(tmp_path):
    house = table_rows("House")
    cfg = write_config(
        tmp_path / "house.json",
        relations={"House": list(HOUSING["House"])},
        ring="sum",
        sum="price",
        free=["nbbedrooms"],
    )
    out = replay_result(cfg, TABLES / "House.tbl", "fivm", extra=["--format", "tbl"])
    assert out["events"] == len(house) and out["rejected"] == 0
    want: dict[float, float] = defaultdict(float)
    for row in house:
        want[row["nbbedrooms"]] += row["price"]
    groups = out["result"]["groups"]
    assert [g["key"]["nbbedrooms"] for g in groups] == sorted(want)
    for g in groups:
        assert g["value"] == pytest.approx(want[g["key"]["nbbedrooms"]], rel=1e-12)


def test_replay_of_a_table_under_the_housing_query_names_the_relations_left_empty(tmp_path):
    cfg = write_config(tmp_path / "count.json", relations=HOUSING, ring="count", free=["nbbedrooms"])
    proc = ivm("replay", "fivm", "--config", str(cfg), "--input", str(TABLES / "Shop.tbl"))
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["events"] == len(table_rows("Shop")) and out["result"]["groups"] == []  # nothing joins yet
    assert out["result"]["stats"]["views"]["Shop"] == len({r["postcode"] for r in table_rows("Shop")})
    assert "no event for relation(s) House, Institution, Restaurant, Demographics, Transport" in proc.stderr


def test_a_table_of_a_relation_the_query_lacks_is_one_error_line(tmp_path):
    cfg = write_config(tmp_path / "house.json", relations={"House": list(HOUSING["House"])})
    shop = TABLES / "Shop.tbl"
    proc = ivm("replay", "fivm", "--config", str(cfg), "--input", f"{shop}:Shop", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr == (
        f"ivmstream: error: {shop}: relation 'Shop' (--input {shop}:Shop) is not one of the relations of "
        "fivm (House)\n"
    )


def test_a_table_named_for_no_relation_feeds_the_only_one_and_says_so(tmp_path):
    cfg = write_config(tmp_path / "house.json", relations={"House": list(HOUSING["House"])})
    shop = TABLES / "Shop.tbl"
    proc = ivm("replay", "fivm", "--config", str(cfg), "--input", str(shop), check=False)
    lines = proc.stderr.splitlines()
    assert (
        lines[0]
        == f"ivmstream: {shop}: rows of House, the only relation of fivm (another: --input {shop}:RELATION)"
    )
    assert lines[1].startswith(f"{shop}:1: rejected (")  # Shop's rows are not House's
    assert proc.returncode == 1 and lines[-1].startswith(
        "ivmstream: error: 30 of 30 input events were rejected"
    )


def test_a_bad_query_is_one_error_line_naming_the_key(tmp_path):
    cases: list[tuple[dict[str, Any], str]] = [
        ({"ring": "covariance", "model": {"label": "nope"}}, "'model' label 'nope'"),
        ({"ring": "count", "model": {"label": "price"}}, "'model' needs ring covariance"),
        ({"model": {"label": "price", "ridge": -1}}, "'ridge' must be a finite number >= 0"),
        ({"model": {"label": "price", "method": "newton"}}, "'method' must be one of"),
        ({"model": {"label": "price", "tolerance": 1e-6}}, "belong to method gradient-descent"),
        ({"ring": "sum"}, "ring sum needs 'sum'"),
        ({"free": 3}, "config key 'free' must be a variable name or a list of names"),
        ({"ring": "count", "decimals": 4}, "'decimals' applies to rings sum and covariance"),
    ]
    for config, needle in cases:
        cfg = write_config(tmp_path / "bad.json", relations=HOUSING, **config)
        proc = ivm("replay", "fivm", "--config", str(cfg), "--input", str(SAMPLE), check=False)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith("ivmstream: error:") and needle in proc.stderr, (config, proc.stderr)


def test_counts_per_group_over_a_table_are_exact(tmp_path):
    shop = table_rows("Shop")
    cfg = write_config(
        tmp_path / "shop.json", relations={"Shop": list(HOUSING["Shop"])}, ring="count", free=["tesco", "ms"]
    )
    out = replay_result(cfg, TABLES / "Shop.tbl", "fivm")
    want = Counter((r["tesco"], r["ms"]) for r in shop)
    got = {(g["key"]["tesco"], g["key"]["ms"]): g["value"] for g in out["result"]["groups"]}
    assert got == dict(want)


def test_every_query_key_is_a_config_key():
    from ivmstream.services.fivm.query import KEYS

    assert set(KEYS) | {"model", "factorized_updates", "emit_rows"} == set(SERVICE.options)


def test_result_forms_per_ring_from_replay(tmp_path):
    """House and Shop of the authors' first postcodes with multiplicities, deletes included; each ring's
    result form (docs/fivm/algorithm.md §7.2) against the join computed here."""
    house, shop = table_rows("House"), table_rows("Shop")
    lines: list[dict[str, Any]] = [{"relation": "House", "row": r, "delta": 1} for r in house]
    lines += [{"relation": "Shop", "row": r, "delta": 2 if i % 3 == 0 else 1} for i, r in enumerate(shop)]
    lines += [{"relation": "House", "row": r, "delta": -1} for r in house[::4]]
    data = tmp_path / "hs.jsonl"
    data.write_bytes(b"".join(orjson.dumps(ev) + b"\n" for ev in lines))
    mult: dict[str, Counter[float]] = {"House": Counter(), "Shop": Counter()}
    rows: dict[tuple[str, float], dict[str, float]] = {}
    for ev in lines:
        mult[ev["relation"]][ev["row"]["postcode"]] += ev["delta"]
        rows[ev["relation"], ev["row"]["postcode"]] = ev["row"]
    weight = {p: m * mult["Shop"][p] for p, m in mult["House"].items() if m * mult["Shop"][p]}
    join_size = sum(weight.values())
    per_tesco: Counter[float] = Counter()
    for p, w in weight.items():
        per_tesco[rows["Shop", p]["tesco"]] += w
    relations = {"House": list(HOUSING["House"]), "Shop": list(HOUSING["Shop"])}

    def replay(**query: Any) -> dict[str, Any]:
        cfg = write_config(tmp_path / "q.json", relations=relations, **query)
        out = replay_result(cfg, data, "fivm")
        assert out["rejected"] == 0 and "stats" in out["result"]
        return {k: v for k, v in out["result"].items() if k != "stats"}

    assert replay(ring="count") == {"value": join_size}
    assert replay(ring="count", free="tesco") == {
        "groups": [{"key": {"tesco": t}, "value": n} for t, n in sorted(per_tesco.items())]
    }
    listing = replay(ring="listing", free=["postcode"], ring_options={"rows": True})
    assert listing == {
        "join_size": join_size,
        "distinct": len(weight),
        "columns": ["postcode"],
        "rows": [[p, w] for p, w in sorted(weight.items())],
    }
    assert replay(ring="listing", free=["postcode"], emit_rows=True) == listing  # the issue's name for it
    factorized = replay(ring="factorized", free=["postcode"])
    assert factorized["join_size"] == join_size
    assert factorized["values"] == [[p, w] for p, w in sorted(weight.items())]
    grouped = replay(ring="covariance", features=["price"], free=["tesco"], decimals=6)
    assert [(g["key"]["tesco"], g["value"]["count"]) for g in grouped["groups"]] == sorted(per_tesco.items())
    assert set(grouped["groups"][0]["value"]) == {"count", "variables", "sum", "sumprod"}


def test_replay_of_several_tables_reads_them_one_after_another(tmp_path):
    """``--input`` repeated: each table's relation from its file name; the join count over all six
    equals the product of per-postcode row counts computed here from the files."""
    cfg = write_config(tmp_path / "count.json", relations=HOUSING, ring="count")
    names = ["Demographics", "Transport", "House", "Shop", "Institution", "Restaurant"]
    inputs = [arg for name in names for arg in ("--input", str(TABLES / f"{name}.tbl"))]
    proc = ivm("replay", "fivm", "--config", str(cfg), "--format", "tbl", *inputs)
    out = json.loads(proc.stdout.splitlines()[-1])
    per_postcode = {name: Counter(row["postcode"] for row in table_rows(name)) for name in names}
    want = 0
    for postcode, n in per_postcode["House"].items():
        product = n
        for name in names[:2] + names[3:]:
            product *= per_postcode[name][postcode]
        want += product
    assert out["events"] == sum(len(table_rows(name)) for name in names) and out["rejected"] == 0
    assert want > 0 and out["result"]["value"] == want


def test_product_updates_replay_through_the_platform_as_their_expansion(tmp_path):
    """With ``factorized_updates: [A2]`` the platform accepts ``A2:factorized`` events; a rank-1 update
    of A2 gives the result of the same stream with the product written out as tuple events here."""
    base = {
        "relations": {
            "A1": [{"I": "int"}, {"J": "int"}],
            "A2": [{"J": "int"}, {"K": "int"}],
            "A3": [{"K": "int"}, {"L": "int"}],
        },
        "ring": "matrix",
        "free": ["I", "L"],
    }
    tuples = [("A1", {"I": i, "J": j}, i + j + 1) for i in range(3) for j in range(3)]
    tuples += [("A3", {"K": k, "L": c}, 2 * k + c + 1) for k in range(3) for c in range(2)]
    tuples += [("A2", {"J": 0, "K": 1}, 4)]
    u, v = {0: 2, 2: -1}, {1: 3, 2: 5}
    factors = [
        {"columns": ["J"], "entries": [[[j], x] for j, x in u.items()]},
        {"columns": ["K"], "entries": [[[k], y] for k, y in v.items()]},
    ]
    product = {"factors": orjson.dumps(factors).decode()}  # on the wire the column is the factors' JSON
    lines = [{"relation": r, "row": row, "delta": d} for r, row, d in tuples]
    factorized = [*lines, {"relation": "A2:factorized", "row": product, "delta": 1}]
    expanded = [*lines] + [
        {"relation": "A2", "row": {"J": j, "K": k}, "delta": x * y}
        for j, x in u.items()
        for k, y in v.items()
    ]
    outs = {}
    for name, events, extra in (("f", factorized, {"factorized_updates": ["A2"]}), ("e", expanded, {})):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
        cfg = write_config(tmp_path / f"{name}.json", **base, **extra)
        outs[name] = replay_result(cfg, path, "fivm")
    assert outs["f"]["rejected"] == 0 and outs["f"]["events"] == len(factorized), outs["f"]
    assert outs["f"]["result"]["groups"] == outs["e"]["result"]["groups"] != []
