"""A small deterministic TPC-H-like generator for the Q17/Q18 benchmark (docs/vwap/algorithm.md §8.3).

This is a SUBSTITUTE for the paper's "augmented" TPC-H generator, whose details are not given. It
writes ``part``, ``customer``, ``orders`` and ``lineitem`` as ``|``-separated ``.tbl`` files in standard
column order with dbgen's trailing ``|``, readable by ``ivmstream.events.tpch.read_tpch``. Reports must say
which generator (and which ``--skew``) produced their numbers.

Sizes follow TPC-H at scale factor SF: 200 000·SF parts, 150 000·SF customers, 1 500 000·SF orders with
1-7 lineitems each (about 6 000 000·SF lineitems; SF 0.01 gives ~60k lineitems, 2k parts, 15k orders,
1.5k customers). Value distributions imitate dbgen (brands ``Brand#MN``, containers such as ``WRAP BOX``,
retail prices from the partkey, extended price = quantity * retail price, orders' total price from their
lineitems, dates in 1992-1998, orderkeys sparse as in dbgen, no orders for customers with custkey ≡ 0
mod 3), but text columns are short random words and nothing else of the TPC-H specification is promised.

Variants:

- ``uniform``: l_partkey uniform over the parts; quantities the integers 1..50 (TPC-H).
- ``skewed`` (docs/vwap/algorithm.md §8.3): l_partkey Zipf(s) over the parts (s = 1 by default; partkey k has
  weight 1/k, so partkey 1 is the hottest) AND a widened quantity domain: 2-decimal quantities in
  [1.00, 50.00]. With integer quantities a partkey has at most 50 distinct quantities, which caps the
  DBToaster-style Q17 loop at 50; the wider domain lets the hot partkeys grow thousands.

Everything derives from ``random.Random(seed)``: the same arguments always give the same bytes.

    python -m bench.tpch_gen --sf 0.01 --skew skewed --seed 7 --out /tmp/tpch-skewed
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TABLES = ("part", "customer", "orders", "lineitem")
SKEWS = ("uniform", "skewed")

_START = dt.date(1992, 1, 1)
_END_ORDER = dt.date(1998, 8, 2)  # dbgen: last order date is 151 days before 1998-12-31
_CURRENT = dt.date(1995, 6, 17)  # dbgen's CURRENTDATE: decides returnflag / linestatus

_WORDS_TEXT = (
    "almond antique aquamarine azure beige bisque black blanched blue blush brown burlywood "
    "chartreuse chiffon chocolate coral cornflower cream cyan dark deep dim dodger drab firebrick "
    "floral forest frosted gainsboro ghost goldenrod green grey honeydew hot indian ivory khaki lace "
    "lavender lawn lemon light lime linen magenta maroon medium metallic midnight mint misty moccasin "
    "navajo navy olive orange orchid pale papaya peach peru pink plum powder puff purple red rose "
    "rosy royal saddle salmon sandy seashell sienna sky slate smoke snow spring steel tan thistle "
    "tomato turquoise violet wheat white yellow "
)
_WORDS = tuple(_WORDS_TEXT.split())
_COMMENT_WORDS_TEXT = (
    "furiously carefully quickly slyly blithely ironic regular express final pending special bold "
    "even silent unusual requests deposits accounts packages foxes ideas theodolites pinto beans "
    "instructions dependencies excuses platelets asymptotes courts dolphins sleep wake haggle nag use "
    "cajole detect integrate boost affix among above across after against along "
)
_COMMENT_WORDS = tuple(_COMMENT_WORDS_TEXT.split())
_TYPE1 = ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
_TYPE2 = ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
_TYPE3 = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")
_CONT1 = ("SM", "LG", "MED", "JUMBO", "WRAP")
_CONT2 = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")
_SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")
_PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
_INSTRUCT = ("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN")
_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")


@dataclass(frozen=True)
class Sizes:
    parts: int
    customers: int
    orders: int
    suppliers: int

    @classmethod
    def at(cls, sf: float) -> Sizes:
        if not sf > 0:
            raise ValueError(f"scale factor must be > 0, got {sf}")
        return cls(
            parts=max(1, round(200_000 * sf)),
            customers=max(3, round(150_000 * sf)),
            orders=max(1, round(1_500_000 * sf)),
            suppliers=max(1, round(10_000 * sf)),
        )


def _cents(c: int) -> str:
    """An exact 2-decimal string from integer cents (no floats anywhere)."""
    sign = "-" if c < 0 else ""
    c = abs(c)
    return f"{sign}{c // 100}.{c % 100:02d}"


def _round_half_even(n: int, d: int) -> int:
    q, r = divmod(n, d)
    if 2 * r > d or (2 * r == d and q % 2 == 1):
        q += 1
    return q


def retail_cents(partkey: int) -> int:
    """dbgen's P_RETAILPRICE formula, in cents."""
    return 90_000 + ((partkey // 10) % 20_001) + 100 * (partkey % 1_000)


def orderkey_of(i: int) -> int:
    """dbgen's sparse orderkeys: the first 8 of every 32 (i = 0, 1, 2, ...)."""
    return (i // 8) * 32 + (i % 8) + 1


def _comment(rng: random.Random, lo: int = 2, hi: int = 8) -> str:
    return " ".join(rng.choice(_COMMENT_WORDS) for _ in range(rng.randint(lo, hi)))


def _phone(rng: random.Random, nation: int) -> str:
    return f"{nation + 10}-{rng.randint(100, 999)}-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"


def _address(rng: random.Random) -> str:
    return "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,") for _ in range(16)
    )


def _line(fields: list[object]) -> str:
    return "|".join(str(f) for f in fields) + "|\n"


def part_rows(sizes: Sizes, rng: random.Random) -> Iterator[str]:
    for pk in range(1, sizes.parts + 1):
        m = rng.randint(1, 5)
        yield _line(
            [
                pk,
                " ".join(rng.sample(_WORDS, 5)),
                f"Manufacturer#{m}",
                f"Brand#{m}{rng.randint(1, 5)}",
                f"{rng.choice(_TYPE1)} {rng.choice(_TYPE2)} {rng.choice(_TYPE3)}",
                rng.randint(1, 50),
                f"{rng.choice(_CONT1)} {rng.choice(_CONT2)}",
                _cents(retail_cents(pk)),
                _comment(rng, 1, 4),
            ]
        )


def customer_rows(sizes: Sizes, rng: random.Random) -> Iterator[str]:
    for ck in range(1, sizes.customers + 1):
        nation = rng.randint(0, 24)
        yield _line(
            [
                ck,
                f"Customer#{ck:09d}",
                _address(rng),
                nation,
                _phone(rng, nation),
                _cents(rng.randint(-99_999, 999_999)),
                rng.choice(_SEGMENTS),
                _comment(rng),
            ]
        )


class _PartkeyPicker:
    """Uniform, or Zipf(s) by rank with rank k = partkey k (weight 1/k^s)."""

    def __init__(self, parts: int, skew: str, zipf_s: float, rng: random.Random) -> None:
        self.parts = parts
        self.rng = rng
        self.cum: list[float] | None = None
        if skew == "skewed":
            self.cum = list(itertools.accumulate(1.0 / (k**zipf_s) for k in range(1, parts + 1)))
            self.keys = range(1, parts + 1)

    def __call__(self) -> int:
        if self.cum is None:
            return self.rng.randint(1, self.parts)
        return self.rng.choices(self.keys, cum_weights=self.cum)[0]


def order_and_lineitem_rows(
    sizes: Sizes, rng: random.Random, skew: str, zipf_s: float
) -> Iterator[tuple[str, list[str]]]:
    """(orders line, its lineitem lines) per order."""
    pick = _PartkeyPicker(sizes.parts, skew, zipf_s, rng)
    span = (_END_ORDER - _START).days
    for i in range(sizes.orders):
        ok = orderkey_of(i)
        ck = rng.randint(1, sizes.customers)
        while ck % 3 == 0:  # dbgen: a third of the customers never order
            ck = rng.randint(1, sizes.customers)
        odate = _START + dt.timedelta(days=rng.randint(0, span))
        total_units = 0  # Σ extprice·(1+tax)·(1-disc), in 1e-6 units
        statuses = set()
        lines = []
        for ln in range(1, rng.randint(1, 7) + 1):
            pk = pick()
            # skewed: 2-decimal quantities 1.00 .. 50.00; uniform: TPC-H's integers 1 .. 50
            q_cents = rng.randint(100, 5_000) if skew == "skewed" else 100 * rng.randint(1, 50)
            ext = _round_half_even(q_cents * retail_cents(pk), 100)  # cents
            disc = rng.randint(0, 10)  # hundredths
            tax = rng.randint(0, 8)
            total_units += ext * (100 + tax) * (100 - disc)
            ship = odate + dt.timedelta(days=rng.randint(1, 121))
            commit = odate + dt.timedelta(days=rng.randint(30, 90))
            receipt = ship + dt.timedelta(days=rng.randint(1, 30))
            rflag = rng.choice("RA") if receipt <= _CURRENT else "N"
            lstatus = "O" if ship > _CURRENT else "F"
            statuses.add(lstatus)
            lines.append(
                _line(
                    [
                        ok,
                        pk,
                        rng.randint(1, sizes.suppliers),
                        ln,
                        _cents(q_cents) if skew == "skewed" else q_cents // 100,
                        _cents(ext),
                        _cents(disc),
                        _cents(tax),
                        rflag,
                        lstatus,
                        ship.isoformat(),
                        commit.isoformat(),
                        receipt.isoformat(),
                        rng.choice(_INSTRUCT),
                        rng.choice(_MODES),
                        _comment(rng, 1, 5),
                    ]
                )
            )
        status = "F" if statuses == {"F"} else "O" if statuses == {"O"} else "P"
        order = _line(
            [
                ok,
                ck,
                status,
                _cents(_round_half_even(total_units, 10_000)),
                odate.isoformat(),
                rng.choice(_PRIORITIES),
                f"Clerk#{rng.randint(1, max(1, sizes.orders // 1500)):09d}",
                0,
                _comment(rng),
            ]
        )
        yield order, lines


def generate(
    out: str | Path, sf: float = 0.01, skew: str = "uniform", seed: int = 1, zipf_s: float = 1.0
) -> dict[str, Path]:
    """Write ``{table}.tbl`` for part, customer, orders, lineitem into ``out``; returns their paths.

    Each table has its own ``Random`` stream derived from ``seed``, so a table's content does not depend
    on which other tables exist or on the order they are written in."""
    if skew not in SKEWS:
        raise ValueError(f"skew must be one of {', '.join(SKEWS)}, got {skew!r}")
    if not zipf_s > 0:
        raise ValueError(f"zipf exponent must be > 0, got {zipf_s}")
    sizes = Sizes.at(sf)
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    paths = {t: d / f"{t}.tbl" for t in TABLES}

    def rng_for(table: str) -> random.Random:
        return random.Random(f"tpch-gen/{seed}/{skew}/{zipf_s}/{table}")

    with open(paths["part"], "w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(part_rows(sizes, rng_for("part")))
    with open(paths["customer"], "w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(customer_rows(sizes, rng_for("customer")))
    with (
        open(paths["orders"], "w", encoding="utf-8", newline="\n") as fo,
        open(paths["lineitem"], "w", encoding="utf-8", newline="\n") as fl,
    ):
        for order, lines in order_and_lineitem_rows(sizes, rng_for("orders"), skew, zipf_s):
            fo.write(order)
            fl.writelines(lines)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.tpch_gen",
        description="Deterministic TPC-H-like tables (part, customer, orders, lineitem) for the Q17/Q18 "
        "benchmark; a substitute for the paper's unspecified 'augmented' generator.",
    )
    ap.add_argument("--sf", type=float, default=0.01, help="scale factor (0.01: ~60k lineitems)")
    ap.add_argument(
        "--skew",
        choices=SKEWS,
        nargs="?",
        const="skewed",
        default="uniform",
        help="uniform (TPC-H) or skewed: Zipf l_partkey + 2-decimal quantities (bare --skew: skewed)",
    )
    ap.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent s of the skewed variant")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True, help="output directory")
    args = ap.parse_args(argv)
    try:
        paths = generate(args.out, args.sf, args.skew, args.seed, args.zipf)
    except ValueError as exc:
        ap.error(str(exc))
    for table, p in paths.items():
        with open(p, "rb") as fh:
            n = sum(1 for _ in fh)
        print(f"{table}: {n} rows -> {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
