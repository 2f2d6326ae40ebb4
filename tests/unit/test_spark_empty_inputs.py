"""Bootstrap and reconcile over input topics: a relation whose topics were read but held no records is
an empty relation (the job proceeds), while a relation neither a snapshot nor a topic could have given
is refused. The rule is checked on the function that decides, without a Spark session; the empty frame
it leads to is checked in tests/integration/test_sql_bootstrap_topics.py."""

from __future__ import annotations

from typing import Any

import pytest

from ivmstream.spark.inputs import unread_relations
from ivmstream.spark.jobs import BatchError

FRAME: Any = object()  # stands for a relation's frame of rows: only its presence matters here


def test_a_relation_of_empty_topics_is_empty() -> None:
    parts: dict[str, list[Any]] = {"bids": [FRAME], "asks": [], "trades": []}
    assert unread_relations(parts, topics_read=True) == ["asks", "trades"]


def test_every_relation_with_rows_needs_nothing() -> None:
    assert unread_relations({"bids": [FRAME]}, topics_read=True) == []
    assert unread_relations({"bids": [FRAME]}, topics_read=False) == []


def test_without_topics_a_missing_relation_is_refused() -> None:
    with pytest.raises(BatchError, match="no input for relation 'asks': the snapshot lacks it"):
        unread_relations({"bids": [FRAME], "asks": []}, topics_read=False)
