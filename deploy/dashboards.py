"""Grafana dashboards as code (grafana-foundation-sdk, generated for Grafana 11.6): an overview of every
service, one dashboard per service with its engine's own gauges and its results, and a views dashboard
of every service's results. Heavy queries read the recording rules of charts/ivmstream/rules/recording.yaml;
every expression uses only the metrics the workers export (shared/metrics.py), which tests/deploy checks.
The results come from the PostgreSQL sink (deploy/views.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh, VariableSort

from deploy.services import Deployable
from deploy.views import POSTGRES_TYPE, result_panels

DASHBOARDS = "charts/ivmstream/dashboards"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"


def _query(expr: str, legend: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).datasource(DATASOURCE)


def _series(title: str, unit: str, targets: list[tuple[str, str]], description: str, span: int = 12):
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .span(span)
        .height(8)
        .legend(
            common_builders.VizLegendOptions()
            .show_legend(True)
            .placement(LegendPlacement.BOTTOM)
            .display_mode(LegendDisplayMode.TABLE)
        )
    )
    for expr, legend in targets:
        panel = panel.with_target(_query(expr, legend))
    return panel


def _stat(title: str, unit: str, expr: str, legend: str, description: str, span: int = 8):
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .span(span)
        .height(5)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .with_target(_query(expr, legend))
    )


def _base(title: str, uid: str, tags: list[str]) -> dash.Dashboard:
    return (
        dash.Dashboard(title)
        .uid(uid)
        .tags(["ivmstream", *tags])
        .refresh("10s")
        .time("now-1h", "now")
        .timezone("browser")
        .readonly()
        .with_variable(dash.DatasourceVariable("datasource").label("Data source").type("prometheus"))
    )


def _results_variable() -> dash.DatasourceVariable:
    return dash.DatasourceVariable("results").label("Results (PostgreSQL)").type(POSTGRES_TYPE)


def _view_variable(service: str) -> dash.TextBoxVariable:
    return (
        dash.TextBoxVariable("view")
        .label("View")
        .description("the name the results are kept under: the output topic without .results")
        .default_value(service)
    )


def views(services: list[Deployable]) -> dash.Dashboard:
    """Every service's results, one row each, from the PostgreSQL sink."""
    board = (
        dash.Dashboard("ivmstream / views")
        .uid("ivmstream-views")
        .tags(["ivmstream", "views"])
        .refresh("10s")
        .time("now-1h", "now")
        .timezone("browser")
        .readonly()
        .with_variable(_results_variable())
    )
    for d in services:
        board = board.with_row(dash.Row(d.name))
        for panel in result_panels(d.name, d.name):
            board = board.with_panel(panel)
    return board


def _service_variable() -> dash.QueryVariable:
    return (
        dash.QueryVariable("service")
        .label("Service")
        .datasource(DATASOURCE)
        .query("label_values(ivmstream_assigned_partitions, service)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
    )


def overview() -> dash.Dashboard:
    sel = 'service=~"$service"'
    return (
        _base("ivmstream / overview", "ivmstream-overview", ["overview"])
        .with_variable(_service_variable())
        .with_row(dash.Row("Throughput"))
        .with_panel(
            _series(
                "Events in / applied / results out",
                "ops",
                [
                    (f"service:ivmstream_events_in:rate1m{{{sel}}}", "{{service}} in"),
                    (f"service:ivmstream_events_applied:rate1m{{{sel}}}", "{{service}} applied"),
                    (f"service:ivmstream_results_out:rate1m{{{sel}}}", "{{service}} results"),
                ],
                "Input records consumed, updates applied and results published per second.",
            )
        )
        .with_panel(
            _series(
                "Rejected (dead-lettered) by reason",
                "ops",
                [(f"service_reason:ivmstream_events_rejected:rate1m{{{sel}}}", "{{service}} {{reason}}")],
                "Input records sent to the dead-letter topic per second; the reason says why.",
            )
        )
        .with_panel(
            _series(
                "Events per relation",
                "ops",
                [
                    (
                        "sum by (service, relation) "
                        f"(rate(ivmstream_relation_events_total{{{sel}}}[{RATE}]))",
                        "{{service}} {{relation}}",
                    )
                ],
                "Valid input events per declared relation: a flat zero is a relation nothing arrives for.",
            )
        )
        .with_row(dash.Row("Lag and assignment"))
        .with_panel(
            _series(
                "Consumer lag per partition",
                "short",
                [(f"ivmstream_consumer_lag{{{sel}}}", "{{service}} {{topic}}:{{partition}}")],
                "Records behind each input partition's high watermark.",
            )
        )
        .with_panel(
            _series(
                "Assigned partitions and keys",
                "short",
                [
                    (f"sum by (service) (ivmstream_assigned_partitions{{{sel}}})", "{{service}} partitions"),
                    (f"sum by (service) (ivmstream_state_keys{{{sel}}})", "{{service}} keys"),
                    (
                        f"sum by (service) (ivmstream_resident_engines{{{sel}}})",
                        "{{service}} resident engines",
                    ),
                ],
                "Input partitions owned by the service's workers, the partition keys with state, and the "
                "engines of those held in memory (resident_keys bounds them).",
            )
        )
        .with_row(dash.Row("Latency and checkpoints"))
        .with_panel(
            _series(
                "Batch latency p50 / p99",
                "s",
                [
                    (f"service:ivmstream_batch_seconds:p50_5m{{{sel}}}", "{{service}} p50"),
                    (f"service:ivmstream_batch_seconds:p99_5m{{{sel}}}", "{{service}} p99"),
                ],
                "Time to decode, apply and publish one batch (quantiles of the histogram over 5 minutes).",
                span=8,
            )
        )
        .with_panel(
            _series(
                "Checkpoint duration p99",
                "s",
                [(f"service:ivmstream_checkpoint_seconds:p99_5m{{{sel}}}", "{{service}}")],
                "Flushing outputs and atomically committing state and offsets.",
                span=8,
            )
        )
        .with_panel(
            _series(
                "Checkpoint size and rate",
                "bytes",
                [
                    (
                        f"service:ivmstream_checkpoint_bytes:mean_5m{{{sel}}}",
                        "{{service}} bytes per checkpoint",
                    ),
                    (
                        f"sum by (service) (rate(ivmstream_checkpoints_total{{{sel}}}[{RATE}]))",
                        "{{service}} per s",
                    ),
                ],
                "State bytes written per checkpoint, and checkpoints per second.",
                span=8,
            )
        )
        .with_row(dash.Row("State and reconciliation"))
        .with_panel(
            _series(
                "State size",
                "bytes",
                [(f"sum by (service) (ivmstream_state_bytes{{{sel}}})", "{{service}}")],
                "Stored state of the owned partitions, as the state backend estimates it.",
            )
        )
        .with_panel(
            _stat(
                "Last reconciliation verdict (1 = match)",
                "none",
                f"ivmstream_reconcile_ok{{{sel}}}",
                "{{service}}",
                "The Spark reconciliation's verdict as the workers serve it from Redis.",
            )
        )
        .with_panel(
            _stat(
                "Mismatched keys",
                "short",
                f"ivmstream_reconcile_mismatched_keys{{{sel}}}",
                "{{service}}",
                "Keys whose published result differed from the recomputation.",
            )
        )
        .with_panel(
            _stat(
                "Since the last reconciliation",
                "s",
                f"time() - ivmstream_reconcile_timestamp_seconds{{{sel}}}",
                "{{service}}",
                "Age of the verdict; the reconcile CronJob's schedule bounds it.",
            )
        )
    )


def stat_groups(stats: Mapping[str, float]) -> dict[str, list[str]]:
    """The engine's gauges grouped by the word before their first underscore (one panel per group of two
    or more); the gauges left alone share one panel."""
    groups: dict[str, list[str]] = {}
    for name in sorted(stats):
        groups.setdefault(name.split("_", 1)[0], []).append(name)
    shared = [name for names in groups.values() if len(names) == 1 for name in names]
    panels = {f"{prefix}_*": names for prefix, names in groups.items() if len(names) > 1}
    if shared:
        panels["other gauges"] = shared
    return panels


def _one_of(names: list[str]) -> str:
    """A PromQL regex matching exactly these label values (RE2 metacharacters escaped, backslashes doubled
    for the PromQL string)."""
    return "|".join(re.escape(name).replace("\\", "\\\\") for name in names)


def service_dashboard(d: Deployable, stats: Mapping[str, float]) -> dash.Dashboard:
    sel = f'service="{d.name}"'
    board = (
        _base(f"ivmstream / {d.name}", f"ivmstream-{d.name}", [d.name])
        .description(d.summary)
        .with_row(dash.Row("Stream"))
        .with_panel(
            _series(
                "Events in / applied / rejected",
                "ops",
                [
                    (f"service:ivmstream_events_in:rate1m{{{sel}}}", "in"),
                    (f"service:ivmstream_events_applied:rate1m{{{sel}}}", "applied"),
                    (f"sum(service_reason:ivmstream_events_rejected:rate1m{{{sel}}})", "rejected"),
                ],
                f"{d.name}: input records consumed, applied and dead-lettered per second.",
                span=8,
            )
        )
        .with_panel(
            _series(
                "Consumer lag per partition",
                "short",
                [(f"ivmstream_consumer_lag{{{sel}}}", "{{topic}}:{{partition}}")],
                f"Records behind each partition of {d.input_topic}.",
                span=8,
            )
        )
        .with_panel(
            _series(
                "Batch latency p50 / p99",
                "s",
                [
                    (f"service:ivmstream_batch_seconds:p50_5m{{{sel}}}", "p50"),
                    (f"service:ivmstream_batch_seconds:p99_5m{{{sel}}}", "p99"),
                ],
                "Time to decode, apply and publish one batch.",
                span=8,
            )
        )
        .with_row(dash.Row("Engine"))
    )
    board = board.with_variable(_results_variable()).with_variable(_view_variable(d.name))
    for group, names in stat_groups(stats).items():
        pattern = _one_of(names)
        board = board.with_panel(
            _series(
                f"engine: {group}",
                "short",
                [(f'sum by (stat) (ivmstream_engine_stat{{{sel}, stat=~"{pattern}"}})', "{{stat}}")],
                f"The engine's own gauges ({', '.join(names)}), summed over its keys.",
                span=8,
            )
        )
    board = board.with_row(dash.Row("Results"))
    for panel in result_panels(d.name, "$view"):
        board = board.with_panel(panel)
    return board


def to_json(board: dash.Dashboard) -> str:
    """The dashboard's JSON model, with the panel ids and query refIds Grafana keys its state by."""
    model = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    for number, panel in enumerate(model["panels"], start=1):
        panel["id"] = number
        for i, target in enumerate(panel.get("targets", [])):
            target["refId"] = chr(ord("A") + i)
    return json.dumps(model, sort_keys=True, indent=2) + "\n"


def engine_stats(d: Deployable) -> dict[str, float]:
    """The gauges a fresh engine of the deployed configuration reports (its ``stats()``, if any)."""
    from ivmstream.config import build_config
    from ivmstream.service import load_service

    service = load_service(d.name)
    engine = service.engine(build_config(service, d.config).options)
    stats = getattr(engine, "stats", None)
    return dict(stats()) if stats is not None else {}


def dashboard_files(services: list[Deployable]) -> dict[str, str]:
    files = {
        f"{DASHBOARDS}/overview.json": to_json(overview()),
        f"{DASHBOARDS}/views.json": to_json(views(services)),
    }
    for d in services:
        files[f"{DASHBOARDS}/{d.name}.json"] = to_json(service_dashboard(d, engine_stats(d)))
    return files
