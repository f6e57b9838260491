"""The typed rows the views hand the stages: every column of the table, JSON decoded once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from advisor.execution.backends import DryRunBackend
from advisor.execution.recovery import current_plan, open_incident_view, replan
from advisor.pipeline.processing import Processor
from advisor.store import EventStore
from advisor.views.read.actions import all_actions
from advisor.views.read.incidents import incident_rows
from advisor.views.read.reading import read_rows
from advisor.views.read.rows import IncidentView, RunView
from advisor.views.read.runs import run_row, runs_to_diagnose, unit_runs
from ingest.journal_sources import ingest_json_file

UNIT = "vllm-minimax-m25.service"


@pytest.fixture
def seeded(store_url: str, opener: Callable[[str], EventStore], seed_journal: Path) -> EventStore:
    """The seed scenario, ingested and diagnosed, on SQLite and on PostgreSQL."""
    store = opener(store_url)
    ingest_json_file(store, seed_journal)
    Processor(store).run(final=True)
    return store


def test_run_views_hold_every_column_decoded(seeded: EventStore) -> None:
    table = read_rows(seeded, "runs")
    assert table
    views = unit_runs(seeded, UNIT)
    assert [v.run_id for v in views] == [r["run_id"] for r in table]
    for row, view in zip(table, views, strict=True):
        assert isinstance(view, RunView) and run_row(seeded, row["run_id"]) == view
        assert view.config == orjson.loads(row["config"])
        assert view.phases == orjson.loads(row["phases"])
        assert view.lifecycle == tuple(orjson.loads(row["lifecycle"]))
        for name in ("run_id", "host", "unit", "started_us", "ended_us", "label", "outcome"):
            assert getattr(view, name) == row[name]
        assert (view.ended, view.died) == (bool(row["ended"]), bool(row["died"]))
    assert unit_runs(seeded, UNIT, "no-such-host") == [] and run_row(seeded, "nope") is None
    assert runs_to_diagnose(seeded, final=True) == []  # all of it diagnosed


def test_incident_views_hold_every_column_decoded(seeded: EventStore) -> None:
    table = read_rows(seeded, "incidents")
    views = incident_rows(seeded, unit=UNIT)
    assert views and [v.incident_id for v in views] == [r["incident_id"] for r in table]
    for row, view in zip(table, views, strict=True):
        assert isinstance(view, IncidentView)
        assert view.facts == orjson.loads(row["facts"])
        assert view.evidence == orjson.loads(row["evidence"])
        assert view.candidates == orjson.loads(row["candidates"])
        assert (view.label, view.status, view.runs) == (row["label"], row["status"], row["runs"])
    assert incident_rows(seeded, unit="other.service") == []
    assert incident_rows(seeded, host="gpu-node-07") == views


def test_replan_proposes_from_the_open_incident_view(seeded: EventStore) -> None:
    incident = open_incident_view(seeded, None, UNIT)
    first = current_plan(seeded, incident.incident_id)
    result = replan(seeded, DryRunBackend(), None, UNIT)
    assert (result.incident_id, result.old_plan) == (incident.incident_id, first)
    assert current_plan(seeded, incident.incident_id) == result.new_plan != first
    new = [r for r in all_actions(seeded) if r.plan_id == result.new_plan]
    assert new and {r.host for r in new} == {incident.host}
