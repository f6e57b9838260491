"""Planning as its own stage: the diagnoser classifies, the planner proposes each classified
incident's plan — right after it, once, whatever is run again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from advisor.core.events import NewEvent
from advisor.core.records import stable_key
from advisor.diagnosis.live import Diagnoser
from advisor.diagnosis.model import load_model
from advisor.diagnosis.rules import load_rules
from advisor.pipeline.processing import Processor
from advisor.planning.planner import CHECKPOINT, Planner
from advisor.store import EventFilter, EventStore
from advisor.views.fold.projector import Projector
from advisor.views.read.reading import read_rows
from ingest.journal_sources import ingest_json_file


def _types(store: EventStore) -> list[str]:
    return [e.type for e in store.read(EventFilter()) if e.source == "diagnosis"]


def test_the_diagnoser_proposes_nothing_and_the_planner_plans_each_incident(
    store_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    store = opener(store_url)
    ingest_json_file(store, seed_journal)
    Projector(store).catch_up()
    diagnoser = Diagnoser(store, load_rules(), load_model(None))
    for run in diagnoser.pending(final=True):
        store.append(diagnoser.step(run))
        Projector(store).catch_up()
    assert "incident.classified" in _types(store)
    assert "action.proposed" not in _types(store)  # a crash here: no plan yet

    planner = Planner(store)
    added = planner.catch_up()
    Projector(store).catch_up()
    proposed = [e for e in store.read(EventFilter(type="action.proposed"))]
    assert added == len(proposed) > 0
    incidents = {i["incident_id"] for i in read_rows(store, "incidents")}
    assert {e.payload.plan_id for e in proposed} == incidents  # type: ignore[union-attr]
    for event in proposed:
        action_id = event.payload.action_id  # type: ignore[union-attr]
        assert event.source == "diagnosis"
        assert event.key == stable_key(f"action.proposed:{action_id}".encode())
    assert store.checkpoint(CHECKPOINT) is not None
    assert planner.catch_up() == 0 and planner.pending() == []


def test_a_plan_follows_its_incident_in_the_pipeline_and_a_rerun_adds_nothing(
    store_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    store = opener(store_url)
    ingest_json_file(store, seed_journal)
    report = Processor(store).run(final=True)
    types = _types(store)
    # Each incident's steps come right after its classification, as one diagnosis did.
    for i, kind in enumerate(types):
        if kind == "incident.classified":
            assert types[i + 1] == "action.proposed", types
    assert report.diagnosis_events == len(types)
    before = read_rows(store, "actions")
    assert before
    again = Processor(store).run(final=True)
    assert again.diagnosis_events == 0
    assert read_rows(store, "actions") == before


def test_the_plans_are_made_again_from_the_events_alone_and_only_once(
    sqlite_url: str, opener: Callable[[str], EventStore], seed_journal: Path, tmp_path: Path
) -> None:
    first = opener(sqlite_url)
    ingest_json_file(first, seed_journal)
    Processor(first).run(final=True)
    proposals = [(e.key, e.payload) for e in first.read(EventFilter(type="action.proposed"))]
    other = opener(f"sqlite:///{tmp_path / 'other.db'}")
    other.append(
        [
            NewEvent(
                stream=e.stream, time_us=e.time_us, source=e.source, key=e.key, payload=e.payload
            )
            for e in first.read(EventFilter())
            if e.type != "action.proposed"
        ]
    )
    Projector(other).catch_up()
    assert Planner(other).catch_up() == len(proposals)
    assert Planner(other).catch_up() == 0
    again = [(e.key, e.payload) for e in other.read(EventFilter(type="action.proposed"))]
    assert again == proposals  # the same steps, keys and payloads from the events alone


def test_a_store_planned_by_the_diagnoser_itself_is_not_planned_again(
    store_url: str, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    """A store from before planning was a stage: its proposals came in the batch of their
    classification, and it has no planning checkpoint. What came before its last proposal is
    planned; a classification after it is not."""
    store = opener(store_url)
    ingest_json_file(store, seed_journal)
    Projector(store).catch_up()
    diagnoser = Diagnoser(store, load_rules(), load_model(None))
    planner = Planner(store)
    classified = []
    for run in diagnoser.pending(final=True):
        events = diagnoser.step(run)
        store.append(events)
        Projector(store).catch_up()
        classified += [e for e in planner.pending() if e.seq not in {c.seq for c in classified}]
    assert len(classified) >= 2, "the seed journal has two incidents"
    first, later = classified[0], classified[1:]
    # What the earlier release wrote: the first incident's plan, right after it, by hand.
    proposal = planner.plan_for(first)
    assert proposal
    store.append(proposal[:1])
    assert store.checkpoint(CHECKPOINT) is None
    assert later and all(e.seq < _last_proposal(store) for e in later)
    assert planner.pending() == []  # all of it planned by the diagnoser of the time
    again = NewEvent.model_validate(
        {
            "stream": first.stream,
            "time_us": first.time_us,
            "source": "diagnosis",
            "key": stable_key(b"classified again, after the upgrade"),
            "payload": first.payload.model_dump(),  # type: ignore[union-attr]
        }
    )
    store.append([again])
    assert [e.payload for e in planner.pending()] == [first.payload]


def _last_proposal(store: EventStore) -> int:
    return max(e.seq for e in store.read(EventFilter(type="action.proposed")))
