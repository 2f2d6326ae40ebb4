"""The Retailer database for the F-IVM benchmark: the real dimension tables and generated fact tables.

The F-IVM paper's Retailer is a snowflake, Inventory ⋈ Location on locn ⋈ Census on zip, ⋈ Item on ksn,
⋈ Weather on (locn, dateid), 43 variables. Location (1,317 rows), Census (1,302) and Item (5,618) are
public (the F-IVM authors publish them, not this repository) and read here unchanged from
``--retailer-dims`` or the directory ``IVMSTREAM_RETAILER_DIMS`` names. Weather (1,159,457 rows)
and Inventory (84,055,817 rows) are not public; they are generated, seeded, over the real
dimensions with the published cardinalities:

* Weather holds one row per (location, date): 1,159,457 / 1,317 = 880 dates per location in the
  original; here ``dates`` of them (the scale), for every real location.
* Inventory holds 84,055,817 / 1,159,457 = 72.5 (locn, dateid, ksn) triples per Weather row on average;
  here the same ratio (``per_weather``), each triple a distinct item of a (location, date) drawn
  uniformly, so every Inventory tuple joins exactly one Weather, Location, Census and Item tuple (the
  key-foreign-key join of the paper).
* The item skew is not published as a number; the items are drawn Zipf(``zipf``) over a seeded
  permutation of the real ksn values (the substitute the design spec names), inventoryunits geometric.

Other values: Weather's rain, snow and thunder are 0/1, its temperatures whole degrees, meanwind a
float; the real dimensions keep their values (ints and floats as in the files).
"""

from __future__ import annotations

import bisect
import itertools
import random
from pathlib import Path
from typing import Any

Row = dict[str, Any]

# Where the authors' dimension tables are (they are not in the repository): --retailer-dims, or this.
DIMS_ENV = "IVMSTREAM_RETAILER_DIMS"
PUBLISHED = {"Inventory": 84_055_817, "Weather": 1_159_457, "Location": 1_317, "Census": 1_302, "Item": 5_618}
PER_WEATHER = PUBLISHED["Inventory"] / PUBLISHED["Weather"]  # 72.5 Inventory rows per (locn, dateid)

# The authors' column order (as their files give it); int columns by name, the rest floats.
COLUMNS: dict[str, tuple[str, ...]] = {
    "Inventory": ("locn", "dateid", "ksn", "inventoryunits"),
    "Location": (
        "locn",
        "zip",
        "rgn_cd",
        "clim_zn_nbr",
        "tot_area_sq_ft",
        "sell_area_sq_ft",
        "avghhi",
        "supertargetdistance",
        "supertargetdrivetime",
        "targetdistance",
        "targetdrivetime",
        "walmartdistance",
        "walmartdrivetime",
        "walmartsupercenterdistance",
        "walmartsupercenterdrivetime",
    ),
    "Census": (
        "zip",
        "population",
        "white",
        "asian",
        "pacific",
        "blackafrican",
        "medianage",
        "occupiedhouseunits",
        "houseunits",
        "families",
        "households",
        "husbwife",
        "males",
        "females",
        "householdschildren",
        "hispanic",
    ),
    "Item": ("ksn", "subcategory", "category", "categoryCluster", "prize"),
    "Weather": ("locn", "dateid", "rain", "snow", "maxtemp", "mintemp", "meanwind", "thunder"),
}
FLOATS = {
    *COLUMNS["Location"][7:],
    "medianage",
    "prize",
    "meanwind",
}
# The paper's variable order: location { date { product id }, zip }.
ORDER: dict[str, Any] = {"locn": {"dateid": {"ksn": {}}, "zip": {}}}
VARIABLES = tuple(dict.fromkeys(c for cols in COLUMNS.values() for c in cols))  # 43


def read_table(path: Path, columns: tuple[str, ...]) -> list[Row]:
    """A headerless ``|``-separated table (trailing ``|``), typed by ``FLOATS``."""
    rows = []
    for line in path.read_text().splitlines():
        fields = line.rstrip("|").split("|")
        rows.append({c: (float(v) if c in FLOATS else int(v)) for c, v in zip(columns, fields, strict=True)})
    return rows


def retailer(
    dates: int,
    dims: Path,
    per_weather: float = PER_WEATHER,
    zipf: float = 1.1,
    seed: int = 0,
    dim_rows: int | None = None,
    inventory: int | None = None,
) -> dict[str, list[Row]]:
    """Retailer over the real dimensions with ``dates`` dates of Weather and Inventory (see above).
    Smoke runs: ``dim_rows`` keeps the first rows of Location and Item (and the Census rows those
    locations reference, so every join stays key-foreign-key), ``inventory`` generates only that many
    Inventory rows (the prefix of the full generation over the same dimensions)."""
    if not dims.is_dir():
        raise FileNotFoundError(f"the Retailer dimension tables are not at {dims} (--retailer-dims)")
    rng = random.Random(seed)
    db = {name: read_table(dims / f"{name}.tbl", COLUMNS[name]) for name in ("Location", "Census", "Item")}
    if dim_rows is not None:
        db["Location"], db["Item"] = db["Location"][:dim_rows], db["Item"][:dim_rows]
        zips = {r["zip"] for r in db["Location"]}
        db["Census"] = [r for r in db["Census"] if r["zip"] in zips]
    locations = [r["locn"] for r in db["Location"]]
    weather = []
    for locn in locations:
        for d in range(1, dates + 1):
            maxtemp = rng.randint(-5, 38)
            weather.append(
                {
                    "locn": locn,
                    "dateid": d,
                    "rain": int(rng.random() < 0.3),
                    "snow": int(rng.random() < 0.05),
                    "maxtemp": maxtemp,
                    "mintemp": maxtemp - rng.randint(2, 15),
                    "meanwind": round(rng.uniform(0.0, 25.0), 2),
                    "thunder": int(rng.random() < 0.05),
                }
            )
    db["Weather"] = weather
    ksns = [r["ksn"] for r in db["Item"]]
    rng.shuffle(ksns)  # which real items are popular: a seeded choice
    cum = list(itertools.accumulate(1.0 / (k + 1) ** zipf for k in range(len(ksns))))
    total = round(per_weather * len(weather))
    if inventory is not None:
        total = min(total, inventory)
    seen: set[tuple[int, int, int]] = set()
    inventory = []
    while len(inventory) < total:
        w = weather[rng.randrange(len(weather))]
        ksn = ksns[bisect.bisect_left(cum, rng.random() * cum[-1])]
        key = (w["locn"], w["dateid"], ksn)
        if key in seen:
            continue
        seen.add(key)
        units = 1 + int(rng.expovariate(1 / 6))
        inventory.append({"locn": key[0], "dateid": key[1], "ksn": ksn, "inventoryunits": units})
    db["Inventory"] = inventory
    return db


def retailer_config(ring: str, **extra: Any) -> dict[str, Any]:
    """A fivm config over Retailer with the paper's variable order (column types as generated)."""
    relations = {
        name: [{c: "float" if c in FLOATS else "int"} for c in cols] for name, cols in COLUMNS.items()
    }
    return {"relations": relations, "ring": ring, "variable_order": ORDER} | extra


def skew(db: dict[str, list[Row]]) -> dict[str, float]:
    """The generated Inventory's item skew: the share of the most common item and of the top 1%."""
    counts: dict[int, int] = {}
    for r in db["Inventory"]:
        counts[r["ksn"]] = counts.get(r["ksn"], 0) + 1
    ranked = sorted(counts.values(), reverse=True)
    n = len(db["Inventory"])
    top = max(1, len(db["Item"]) // 100)
    return {
        "top_item_share": ranked[0] / n,
        "top_1pct_items_share": sum(ranked[:top]) / n,
        "items_used": len(ranked),
    }
