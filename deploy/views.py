"""Grafana panels of the views themselves, from the PostgreSQL results sink (ivmstream_results: each key's
latest result; ivmstream_result_history: numeric results over time). Each service gets the panels its
results call for (VWAP and the other vwap queries per key, triangle counts per graph, fivm's aggregates,
the reservoir's sample as a table, sketches' fragment counts and answer sizes), beside a table of the
latest result of every key. tests/deploy runs every query against a real PostgreSQL holding a demo run's
rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import table, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement
from grafana_foundation_sdk.models.dashboard import DataSourceRef

POSTGRES_TYPE = "grafana-postgresql-datasource"
POSTGRES_UID = "ivmstream-results"  # the provisioned datasource (compose, chart)
RESULTS = DataSourceRef(type_val=POSTGRES_TYPE, uid="${results}")

RESULTS_TABLE = "ivmstream_results"  # as ivmstream.runtime.postgres creates them
HISTORY_TABLE = "ivmstream_result_history"


@dataclass(frozen=True)
class SqlQuery(cogvariants.Dataquery):
    """A Grafana SQL target (the SDK has no builder for the PostgreSQL datasource)."""

    sql: str
    format: str  # "time_series" or "table"

    def to_json(self) -> dict[str, Any]:
        return {
            "datasource": {"type": POSTGRES_TYPE, "uid": RESULTS.uid},
            "editorMode": "code",
            "format": self.format,
            "rawQuery": True,
            "rawSql": self.sql,
        }


class Sql(cogbuilder.Builder[SqlQuery]):
    def __init__(self, sql: str, format: str) -> None:
        self.query = SqlQuery(" ".join(sql.split()), format)

    def build(self) -> SqlQuery:
        return self.query


def _history(view: str, where: str, label: str = "key || ' ' || path") -> str:
    """Numeric leaves of ``view``'s results over the dashboard's time range, one series per ``label``."""
    return f"""
        SELECT at AS time, CASE WHEN key = '' THEN path ELSE {label} END AS metric, value
        FROM {HISTORY_TABLE}
        WHERE service = '{view}' AND $__timeFilter(at) AND ({where})
        ORDER BY at"""


def _series(title: str, description: str, sql: str, span: int = 12) -> timeseries.Panel:
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(RESULTS)
        .span(span)
        .height(8)
        .legend(
            common_builders.VizLegendOptions()
            .show_legend(True)
            .placement(LegendPlacement.BOTTOM)
            .display_mode(LegendDisplayMode.TABLE)
        )
        .with_target(Sql(sql, "time_series"))
    )


def _table(title: str, description: str, sql: str, span: int = 12) -> table.Panel:
    return (
        table.Panel()
        .title(title)
        .description(description)
        .datasource(RESULTS)
        .span(span)
        .height(8)
        .with_target(Sql(sql, "table"))
    )


def latest(view: str) -> table.Panel:
    return _table(
        "Latest result per key",
        "Each key's latest result (ivmstream_results) and the input offsets it reflects.",
        f"""SELECT key, updated_at, offsets::text AS offsets, left(result::text, 300) AS result
            FROM {RESULTS_TABLE} WHERE service = '{view}' ORDER BY key LIMIT 500""",
        span=24,
    )


def _vwap(view: str) -> list[Any]:
    return [
        _series(
            "Query results over time",
            "The vwap query's results (VWAP, MST, PSP, Q17, Q18 ...) per key, as published.",
            _history(view, "path NOT LIKE '/stats/%'"),
        )
    ]


def _triangles(view: str) -> list[Any]:
    return [
        _series(
            "Triangles per graph",
            "Triangles (and the ordered 3-cycle count) of each graph over time.",
            _history(view, "path IN ('/count', '/triangles')"),
        )
    ]


def _fivm(view: str) -> list[Any]:
    return [
        _series(
            "Aggregates over time",
            "Each key's COUNT and SUMs of the query's variables (the regression's sufficient statistics).",
            _history(view, "path = '/count' OR path LIKE '/sum/%'"),
        ),
        _table(
            "Sums and cofactors per key",
            "The latest count, variables, sums and sums of products (the cofactor matrix a regression "
            "model's coefficients are solved from).",
            f"""SELECT key, (result->>'count')::numeric AS count, (result->'variables')::text AS variables,
                       (result->'sum')::text AS sums, left((result->'sumprod')::text, 500) AS cofactors
                FROM {RESULTS_TABLE} WHERE service = '{view}' ORDER BY key LIMIT 500""",
        ),
    ]


def _reservoir(view: str) -> list[Any]:
    return [
        _table(
            "Sample",
            "The reservoir's uniform sample of the join results, one tuple per row.",
            f"""SELECT r.key, s.n AS position, s.tuple::text AS tuple
                FROM {RESULTS_TABLE} r,
                     jsonb_array_elements(r.result->'sample') WITH ORDINALITY AS s(tuple, n)
                WHERE r.service = '{view}' ORDER BY r.key, s.n LIMIT 1000""",
        ),
        _series(
            "Sample size and statistics over time",
            "The sample's size bound k and the sampler's counters per key.",
            _history(view, "path NOT LIKE '/sample/%'"),
        ),
    ]


def _sketches(view: str) -> list[Any]:
    return [
        _series(
            "Sketch fragments and rows scanned",
            "Fragments in each relation's provenance sketch, and the rows the sketch lets a query scan "
            "out of all rows.",
            _history(
                view,
                "path LIKE '/fragments/%' "
                "OR path IN ('/rows_scanned', '/rows_total', '/stats/sketch_fragments')",
            ),
        ),
        _table(
            "Answer sizes",
            "Rows in each key's latest answer, and the rows its sketch scanned.",
            f"""SELECT key, jsonb_array_length(result->'answer') AS answer_rows,
                       (result->>'rows_scanned')::bigint AS rows_scanned,
                       (result->>'rows_total')::bigint AS rows_total, (result->'sketch')::text AS sketch
                FROM {RESULTS_TABLE} WHERE service = '{view}' AND jsonb_typeof(result->'answer') = 'array'
                ORDER BY key LIMIT 500""",
        ),
    ]


def _reference(view: str) -> list[Any]:
    return [
        _series(
            "Counts over time",
            "Each key's bag size and the counts per relation.",
            _history(view, "path = '/count' OR path LIKE '/relations/%/count'"),
        )
    ]


_PANELS = {
    "vwap": _vwap,
    "triangles": _triangles,
    "fivm": _fivm,
    "reservoir": _reservoir,
    "sketches": _sketches,
    "reference": _reference,
}


def result_panels(service: str, view: str) -> list[Any]:
    """The panels of ``view``'s results (``view``: the name its rows are kept under, or a variable);
    a service without its own gets its numeric results over time."""
    own = _PANELS.get(service)
    panels = (
        own(view)
        if own
        else [_series("Results over time", "Numeric results per key.", _history(view, "true"))]
    )
    return [*panels, latest(view)]
