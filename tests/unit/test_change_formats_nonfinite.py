"""Change formats refuse values that would put a non-finite float in an event: Canal's text read as a
float or number column ("NaN", "inf", "1e999": Python's float() accepts them, JSON has no such numbers)
and a Connect decimal too large for a double in a float column. Each is a refused record with its
reason; finite values of the same records decode."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ivmstream.events import EventError, Relation, Schema
from ivmstream.events.change_formats import ChangeCodec
from ivmstream.events.changes import ChangeSpec
from tests.unit.test_change_formats import _b64, _wrapped


def _canal(amount: str, typ: str) -> Any:
    codec = ChangeCodec(ChangeSpec("canal-json"), Schema.of(Relation.of("orders", id="int", amount=typ)))
    record = {"table": "orders", "type": "INSERT", "isDdl": False, "data": [{"id": "1", "amount": amount}]}
    return codec.decode(None, orjson.dumps(record))


@pytest.mark.parametrize("typ", ["float", "number"])
@pytest.mark.parametrize("text", ["NaN", "nan", "inf", "-Infinity", "1e999", "-1e999"])
def test_canal_text_that_is_not_a_finite_number_is_refused(text: str, typ: str) -> None:
    err = _canal(text, typ)
    assert isinstance(err, EventError) and err.code == "wrong-type"
    assert repr(text) in str(err)


@pytest.mark.parametrize(("text", "value"), [("12.5", 12.5), ("-0.0", -0.0), ("1e308", 1e308)])
def test_canal_finite_floats_decode(text: str, value: float) -> None:
    [event] = _canal(text, "float")
    assert event.row == {"id": 1, "amount": value} and str(event.row["amount"]) == str(value)


def test_a_connect_decimal_beyond_a_double_is_refused_in_a_float_column() -> None:
    schema = Schema.of(Relation.of("orders", id="int", amount="float", day="str", note="str"))
    codec = ChangeCodec(ChangeSpec("debezium-json", relation="orders"), schema)
    after = {"id": 2, "amount": _b64(-1250), "day": 19723, "note": "y"}
    [event] = codec.decode(None, _wrapped("c", after, scale="2"))  # type: ignore[misc]
    assert event.row["amount"] == -12.5
    err = codec.decode(None, _wrapped("c", after, scale="-400"))  # -1250 * 10**400
    assert isinstance(err, EventError) and err.code == "wrong-type" and "beyond a double" in str(err)
