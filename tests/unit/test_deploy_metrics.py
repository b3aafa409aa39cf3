"""deploy/prometheus and deploy/grafana: valid, and naming only metrics kstream serves."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kstream.infra.metrics import ProcessMetrics
from kstream.runtime.runner.metrics import RUNNER_METRICS
from kstream.runtime.worker.metrics import WORKER_METRICS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "kstream-dashboard.json"

#: Labels the endpoints put on their series, and those Prometheus adds to every one.
LABELS = {"job", "worker", "subtask", "topic", "partition", "reason", "cause", "kind", "le"}
LABELS |= {"instance", "role"}

#: PromQL words that look like metric names: functions, aggregations, keywords.
PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "rate", "increase", "irate", "time", "by",
    "without", "histogram_quantile", "label_values", "on", "ignoring", "offset",
}  # fmt: skip


def served_names() -> set[str]:
    """Every sample name the worker and runner endpoints can serve."""
    names: set[str] = set()
    for table in (WORKER_METRICS, RUNNER_METRICS):
        for name, (kind, _) in table.items():
            if kind == "counter":
                names.add(f"{name}_total")
            elif kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            else:
                names.add(name)
    reg = CollectorRegistry()
    ProcessMetrics({"job": "j", "worker": "w0"}, reg)
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        names |= {s.name for s in fam.samples}
    return names


def expressions(node: Any) -> list[str]:
    """Every PromQL expression of a Grafana dashboard: targets' and variables' queries."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                found.append(value)
            else:
                found += expressions(value)
    elif isinstance(node, list):
        for item in node:
            found += expressions(item)
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names `expr` selects (identifiers not in braces, strings or by-lists)."""
    bare = re.sub(r'"[^"]*"', '""', expr)  # strings: label values, legends
    bare = re.sub(r"label_values\(([^,)]+),\s*\w+\s*\)", r"\1", bare)  # Grafana's
    bare = re.sub(r"\{[^}]*\}", "{}", bare)  # label matchers
    bare = re.sub(r"\b(by|without)\s*\([^)]*\)", "", bare)  # grouping labels
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # range durations
    words = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare))
    return {w for w in words if w not in PROMQL_WORDS and not re.fullmatch(r"[0-9.e]+", w)}


def label_names(expr: str) -> set[str]:
    """Labels `expr` matches on or groups by."""
    names: set[str] = set()
    for inside in re.findall(r"\{([^}]*)\}", re.sub(r'"[^"]*"', '""', expr)):
        names |= set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", inside))
    names |= set(re.findall(r"label_values\([^,)]+,\s*(\w+)\s*\)", expr))
    for grouped in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        names |= {n.strip() for n in grouped.split(",") if n.strip()}
    return names


def test_dashboard_is_a_grafana_dashboard() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"]
    assert dash["title"]
    assert isinstance(dash["schemaVersion"], int)
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids are unique"
    for p in panels:
        assert p["type"] in {"timeseries", "stat"}, p["title"]
        assert set(p["gridPos"]) == {"x", "y", "w", "h"}, p["title"]
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs), p["title"]
    variables = {v["name"] for v in dash["templating"]["list"]}
    for expr in expressions(dash):
        for var in re.findall(r"\$(\w+)", expr):
            assert var in variables, f"{expr}: no variable ${var}"


def test_dashboard_names_only_metrics_that_are_served() -> None:
    served = served_names()
    exprs = expressions(json.loads(DASHBOARD.read_text()))
    assert len(exprs) >= 15
    used: set[str] = set()
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"{expr}: names no metric"
        assert names <= served, f"{expr}: not served: {sorted(names - served)}"
        assert label_names(expr) <= LABELS, f"{expr}: unknown labels"
        used |= names
    # The most important ones are on the dashboard.
    assert {
        "kstream_records_in_total",
        "kstream_consumer_lag",
        "kstream_checkpoint_duration_seconds_bucket",
        "kstream_recoveries_total",
        "kstream_checkpoints_aborted_total",
    } <= used


def test_the_checker_itself_catches_an_unknown_name() -> None:
    assert metric_names('sum by (job) (rate(kstream_nope_total{job=~"$job"}[1m]))') == {
        "kstream_nope_total"
    }
    assert "kstream_nope_total" not in served_names()
    assert label_names('sum by (le, worker) (x{job=~"a", subtask!="b"})') == {
        "le", "worker", "job", "subtask",
    }  # fmt: skip


def test_prometheus_scrapes_the_ports_kstream_serves() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = [
        t
        for job in config["scrape_configs"]
        for static in job["static_configs"]
        for t in static["targets"]
    ]
    for job in config["scrape_configs"]:
        assert job.get("metrics_path", "/metrics") == "/metrics"
        assert job["honor_labels"] is True, "kstream's own job label is kept"
    # The runner on P = 9400, worker i on P + 1 + i (the comment says --workers 2).
    assert sorted(int(t.rsplit(":", 1)[1]) for t in targets) == [9400, 9401, 9402]
