"""A journal entry's event is serialised without validating it again
(`ingest.journal.journal_prepared`): it must be valid by construction. For entries whose
fields are anything at all (the hostile entries' strategies), and for the same as the `-o export`
stream gives them (bytes), every event `entry_event` builds is one the models accept, and the
unvalidated path stores exactly the bytes the validated one does."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.core.events import Prepared, prepare
from advisor.core.payloads import MAX_KEY
from advisor.store.types import AppendResult
from ingest.batches import Ingester
from ingest.journal import EntryError, JournalEvent, entry_event, journal_prepared, json_line_record
from tests.ingest.test_hostile_entries import BASE, NAMES, json_values


def _same_as_validated(event: dict[str, Any] | None) -> None:
    if event is None:
        return
    assert isinstance(event, JournalEvent)
    assert 0 <= event["time_us"] <= MAX_KEY and 0 <= event["key"] <= MAX_KEY
    # prepare validates a plain copy: an InvalidEventError here is the claim broken
    assert journal_prepared(event) == prepare([dict(event)])[0]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(NAMES), json_values, max_size=6))
def test_a_json_lines_event_is_valid_by_construction(changes: dict[str, Any]) -> None:
    try:
        line = orjson.dumps({**BASE, **changes})
    except orjson.JSONEncodeError:
        return
    _same_as_validated(json_line_record(line, 1).event)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(NAMES),
        st.one_of(st.binary(max_size=40), st.lists(st.binary(max_size=8), max_size=3)),
        max_size=6,
    )
)
def test_an_export_streams_event_is_valid_by_construction(changes: dict[str, Any]) -> None:
    fields: dict[str, Any] = {k: v.encode() for k, v in BASE.items()} | changes
    try:
        event = entry_event(fields, identity=b"entry")
    except EntryError:
        return
    _same_as_validated(event)


def test_a_batch_with_another_event_is_validated_whole() -> None:
    """A kernel line that reports an Xid brings a `gpu.fault` event (not a JournalEvent): the
    batch goes through `prepare`, and stores what it stored before."""
    kernel = {
        **BASE,
        "_TRANSPORT": "kernel",
        "MESSAGE": "NVRM: Xid (PCI:0000:3b:00): 79, pid=123, GPU has fallen off the bus.",
    }
    lines = [orjson.dumps(BASE), orjson.dumps(kernel)]
    records = [json_line_record(line, n) for n, line in enumerate(lines, start=1)]
    got: list[Prepared] = []

    def keep(batch: list[Prepared], _cp: object) -> AppendResult:
        got.extend(batch)
        return AppendResult()

    Ingester(None, "t", sink=keep).feed(records)
    expected = prepare([dict(r.event) for r in records if r.event is not None][:1])
    assert got[0] == expected[0]
    assert [p[1] for p in got] == ["log.recorded", "log.recorded", "gpu.fault"]
