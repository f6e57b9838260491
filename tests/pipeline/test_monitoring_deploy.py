"""The Grafana dashboard and the Prometheus alert rules in deploy/ against the exporter: both
files load (JSON, YAML), and every metric and label they query is one the exporter really
exposes for a real store (the seed scenario diagnosed, GPUs sampled, a shipper's position)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from advisor.core.payloads import GpuProcess, GpuSampled
from advisor.fleet.ship import checkpoint_name, ship
from advisor.pipeline.heartbeat import Heartbeat
from advisor.pipeline.metrics import METRICS, registry_for
from advisor.store import EventStore, open_store
from advisor.store.types import Checkpoint
from ingest.gpu import sample_live
from tests.conftest import ROOT

DASHBOARD = ROOT / "deploy/grafana/advisor-dashboard.json"
RULES = ROOT / "deploy/prometheus/advisor-rules.yml"
_METRIC = re.compile(r"\b(advisor_[a-z_]+)(\{[^}]*\})?")
_MATCHER = re.compile(r"([a-z_]+)\s*(?:=~|!~|!=|=)")
_BY = re.compile(r"\bby\s*\(([^)]*)\)")
_LEGEND = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")
_HISTOGRAM = ("_bucket", "_count", "_sum", "_total")  # and a counter's samples
SCRAPE_LABELS = {"instance", "job"}  # added by Prometheus when it scrapes


class _OneGpu:
    host = "gpu-node-07"

    def sample(self, time_us: int | None = None) -> tuple[int, list[GpuSampled]]:
        worker = GpuProcess(pid=7, used_bytes=2**30, unit="vllm-minimax-m25.service")
        return time.time_ns() // 1000, [
            GpuSampled(
                origin="nvml",
                host=self.host,
                index=0,
                memory_total_bytes=2**36,
                memory_used_bytes=2**31,
                memory_free_bytes=2**36 - 2**31,
                processes=(worker,),
            )
        ]

    def faults(self, time_us: int) -> list[dict[str, Any]]:
        """An Xid from NVML's event API, as `NvmlSampler.faults` gives it."""
        fault = {"type": "gpu.fault", "origin": "nvml", "kind": "xid", "host": self.host}
        fault |= {"gpu": 0, "xid": 79, "severity": "hardware", "action": "RESTART_BM"}
        return [
            {
                "stream": f"{self.host}/gpu0",
                "time_us": time_us,
                "source": f"nvml-health:{self.host}",
                "key": 1,
                "payload": fault,
            }
        ]


@pytest.fixture
def exposed(diagnosed: EventStore, sqlite_url: str, tmp_path: Path) -> dict[str, set[str]]:
    """Each metric the exporter serves for a real store → the labels it carries. The store
    is a central one too: another host shipped its heartbeat to it."""
    sample_live(diagnosed, _OneGpu(), interval_s=0.01, count=1)  # type: ignore[arg-type]
    Heartbeat(diagnosed, "gpu-node-07", 60.0).beat()
    other = open_store(f"sqlite:///{tmp_path / 'other.db'}")
    Heartbeat(other, "gpu-node-08", 60.0).beat()
    ship(other, diagnosed, "gpu-node-08")
    other.close()
    ship_to = "postgresql+psycopg://central/fleet"
    diagnosed.append_prepared([], Checkpoint(checkpoint_name(ship_to), {"seq": 1}))
    registry = registry_for(lambda: open_store(sqlite_url, read_only=True), ship_to)
    text = generate_latest(registry).decode()
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def _check_expr(expr: str, exposed: dict[str, set[str]], legend: str = "") -> set[str]:
    """The metrics `expr` uses (histogram parts by their family), each checked: exposed,
    and every label it is matched on, grouped by or shown by, one it carries."""
    used = set()
    labels: set[str] = set()
    for m in _METRIC.finditer(expr):
        name = m.group(1)
        assert name in exposed, f"{name} (in {expr!r}) is not exposed"
        used.add(next((name.removesuffix(s) for s in _HISTOGRAM if name.endswith(s)), name))
        labels |= exposed[name]
        for matcher in _MATCHER.findall(m.group(2) or ""):
            assert matcher in exposed[name] | SCRAPE_LABELS, f"{name} has no label {matcher}"
    assert used, f"{expr!r} uses no advisor metric"
    for group in _BY.findall(expr):
        for label in (g.strip() for g in group.split(",")):
            assert label in labels | SCRAPE_LABELS, f"{expr!r}: no label {label}"
    for label in _LEGEND.findall(legend):
        assert label in labels | SCRAPE_LABELS, f"{legend!r}: no label {label}"
    return used


def test_the_dashboard_queries_only_what_the_exporter_serves(
    exposed: dict[str, set[str]],
) -> None:
    dashboard: dict[str, Any] = orjson.loads(DASHBOARD.read_bytes())
    assert dashboard["uid"] and dashboard["panels"]
    used: set[str] = set()
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used |= _check_expr(target["expr"], exposed, target.get("legendFormat", ""))
    assert used == set(METRICS)  # every metric is on the dashboard
    variable = dashboard["templating"]["list"][1]["definition"]
    _check_expr(variable, exposed)


def test_the_alert_rules_load_and_query_only_what_the_exporter_serves(
    exposed: dict[str, set[str]],
) -> None:
    loaded = yaml.safe_load(RULES.read_text())
    rules = [rule for group in loaded["groups"] for rule in group["rules"]]
    assert len({r["alert"] for r in rules}) == len(rules) >= 5
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        _check_expr(rule["expr"], exposed)
        for text in rule["annotations"].values():
            for label in re.findall(r"\$labels\.([a-z_]+)", text):
                assert label in set().union(*exposed.values()) | SCRAPE_LABELS, label


def test_the_files_are_where_the_docs_say(tmp_path: Path) -> None:
    docs = (ROOT / "docs/metrics.md").read_text()
    assert "deploy/grafana/advisor-dashboard.json" in docs
    assert "deploy/prometheus/advisor-rules.yml" in docs
    for name in METRICS:
        assert f"`{name}`" in docs, f"{name} is not in docs/metrics.md"
