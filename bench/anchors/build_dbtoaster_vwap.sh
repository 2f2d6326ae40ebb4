#!/bin/sh
# Builds the DBToaster anchor of bench/native_vwap.py from public sources, outside this repository.
#
#   bench/anchors/build_dbtoaster_vwap.sh THETA_DB_CHECKOUT OUT_DIR
#
# THETA_DB_CHECKOUT is a checkout of github.com/sachinbjohn/theta-db, which holds DBToaster-generated
# batch C++ for a VWAP query (srccpp/queries/VWAP1_DBT.h) and the DBToaster C++ runtime headers it was
# generated against (srccpp/dbtoasterlib). That query is DBToaster's finance VWAP with both comparisons
# mirrored (0.25·Σvolume < Σ volume of lower prices); the build copies the header into OUT_DIR and
# turns its two comparisons round, which gives the program DBToaster generates for finance/vwap.sql
# (0.25·Σvolume > Σ volume of higher prices): same maps, same triggers, same per-batch loops.
# The driver is compiled with DBToaster's own C++ flags (-std=c++14 -O3). Prints the binary's path.
set -eu
src="$1/srccpp"
out="$2"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
sed -e 's/(b1_price > b2_price) ? agg1 += v7/(b1_price < b2_price) ? agg1 += v7/' \
    -e 's/if (l2 > l1) {/if (l1 > l2) {/' \
    "$src/queries/VWAP1_DBT.h" > "$out/vwap_dbt.h"
test "$(grep -c -e '(b1_price < b2_price) ? agg1 += v7' -e 'if (l1 > l2) {' "$out/vwap_dbt.h")" = 2 || {
    echo "the generated header does not have the expected comparisons" >&2
    exit 1
}
g++ -std=c++14 -O3 -I"$out" -I"$src/dbtoasterlib" "$here/dbtoaster_vwap.cpp" -o "$out/dbtoaster_vwap"
echo "$out/dbtoaster_vwap"
