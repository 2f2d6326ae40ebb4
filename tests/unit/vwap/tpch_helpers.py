"""What the TPC-H tests of the vwap service share: the bundled tiny tables and a codec for some of them."""

from __future__ import annotations

from pathlib import Path

from ivmstream.events import EventCodec, Schema
from ivmstream.services.vwap.catalog import tpch_relation

TINY = Path(__file__).resolve().parents[3] / "services/vwap/data/tpch-tiny"  # bundled copy


def codec_for(*tables: str) -> EventCodec:
    return EventCodec(Schema.of(*(tpch_relation(t) for t in tables)))
