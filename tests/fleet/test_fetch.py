"""Fetching the lines a host kept, for a central post-mortem (advisor.fleet.fetch): the
post-mortem says they are on the host, `advisor fetch` asks, the host's shipper answers, the
central store takes a range only whole and only as the events the host kept, the fold merges
them into their runs, and `advisor verify` checks them against the hashes the host shipped —
on SQLite and PostgreSQL, and through a host's own role."""

from __future__ import annotations

import html
import json
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result
from sqlalchemy import text

from advisor.cli.main import cli
from advisor.core.errors import IntegrityError
from advisor.fleet import selection as selection_module
from advisor.fleet.fetch import FetchReport, answer_requests
from advisor.fleet.selection import Selection
from advisor.fleet.ship import ship, ship_forever
from advisor.reports.keptlines import window
from advisor.reports.postmortem import incident_runs
from advisor.store import EventStore, open_store
from advisor.store.chain import RawEvent
from advisor.store.integrity.central import writer_for
from advisor.store.integrity.held import HELD_TYPE
from advisor.store.integrity.hostchain import verify_host
from advisor.store.integrity.kept import kept_ranges
from tests.conftest import advisor_argv, seed_on_host
from tests.console.serving import served
from tests.fleet.test_central_roles import shipper_role
from tests.fleet.test_selection import HOST, OK, UNIT, _line
from tests.fleet.test_ship import _tamper
from tests.waiting import wait

SERVICE = f"{HOST}/{UNIT}"
SERVED = 300


def _serving_host(tmp_path: Path, seed_journal: Path) -> EventStore:
    """The seed scenario on HOST, diagnosed, with SERVED request lines inside the incident's
    run (routine: the host keeps them)."""
    host = seed_on_host(tmp_path, seed_journal, HOST, diagnose=True)
    _, runs = incident_runs(host, SERVICE)
    start, end = window(runs)
    step = (end - start) // (SERVED + 2)
    host.append(
        [
            _line(i, OK.format(i=i)).model_copy(update={"time_us": start + (i + 1) * step})
            for i in range(SERVED)
        ]
    )
    return host


def _shipped(
    tmp_path: Path, seed_journal: Path, opener: Callable[[str], EventStore]
) -> tuple[EventStore, str, EventStore]:
    """The serving host, shipped with the fleet selection to a SQLite central store: the
    host's store, the central store's URL and the central store."""
    host = _serving_host(tmp_path, seed_journal)
    url = f"sqlite:///{tmp_path / 'central.db'}"
    central = opener(url)
    ship(host, central, HOST, selection=Selection(held_every_s=0))
    return host, url, central


def _cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _explain_kept(url: str) -> dict[str, object]:
    result = _cli("explain", SERVICE, "--json", "--db", url)
    assert result.exit_code == 0, result.output
    kept = json.loads(result.output)["kept"]
    assert isinstance(kept, dict)
    return kept


def _without_lag(output: str) -> list[dict[str, object]]:
    return [{k: v for k, v in h.items() if k != "ship_lag_s"} for h in json.loads(output)]


def _run_lines(store: EventStore, run_id: str) -> int:
    with store.connect() as conn:
        return int(
            conn.execute(
                text("SELECT lines FROM runs WHERE run_id = :r"), {"r": run_id}
            ).scalar_one()
        )


def test_a_central_post_mortem_fetches_the_lines_the_host_kept(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    host = _serving_host(tmp_path, seed_journal)
    central = opener(store_url)
    shipped = ship(host, central, HOST, batch=97, selection=Selection(held_every_s=0))
    assert shipped.held >= SERVED and shipped.fetch.ranges == 0
    _, runs = incident_runs(host, SERVICE)
    run_id = runs[-1].run_id
    assert _run_lines(central, run_id) < _run_lines(host, run_id) - SERVED + 1

    # The central post-mortem says the lines are on the host, and how to bring them.
    kept = _explain_kept(store_url)
    assert (kept["on_host"], kept["fetched"], kept["last_lines"]) == (SERVED, 0, [])
    assert str(kept["command"]).startswith(f"advisor fetch {SERVICE} --incident ")
    text_form = _cli("explain", SERVICE, "--db", store_url).output
    assert (
        f"{SERVED:,} routine lines of the last 10 minutes before the end are on {HOST} only"
        in text_form
    )
    hosts_before = _without_lag(_cli("hosts", "--json", "--db", store_url).output)

    # Asked, not answered yet: exit 75, the ranges waiting.
    asked = _cli("fetch", SERVICE, "--wait", "0", "--json", "--db", store_url)
    assert asked.exit_code == 75, asked.output
    asked_json = json.loads(asked.output)
    assert asked_json["asked"] == asked_json["ranges"] >= 1
    assert asked_json["lines_on_host"] == SERVED and asked_json["fetched_lines"] == 0
    assert len(asked_json["waiting"]) == asked_json["ranges"]

    # The host's next round of shipping answers every request, whole and checked.
    answered = ship(host, central, HOST, selection=Selection(held_every_s=0))
    ranges = kept_ranges(central, HOST, *window(runs))
    assert answered.fetch.ranges == asked_json["ranges"] and not answered.fetch.declined
    assert answered.fetch.events == sum(r.events for r in ranges)
    done = _cli("fetch", SERVICE, "--wait", "0", "--json", "--db", store_url)
    assert done.exit_code == 0, done.output
    done_json = json.loads(done.output)
    assert (done_json["fetched_lines"], done_json["lines_on_host"], done_json["asked"]) == (
        SERVED,
        0,
        0,
    )
    assert done_json["waiting"] == [] and done_json["declined"] == {}

    # Folded into their run: it has the host's lines now; the post-mortem shows the last.
    assert _run_lines(central, run_id) == _run_lines(host, run_id)
    kept = _explain_kept(store_url)
    assert (kept["on_host"], kept["fetched"]) == (0, SERVED)
    assert [line["text"] for line in kept["last_lines"]] == [  # type: ignore[attr-defined]
        OK.format(i=i) for i in range(SERVED - 10, SERVED)
    ]
    # Old lines are not news: the hosts view reads the same (its lag is "now minus").
    assert _without_lag(_cli("hosts", "--json", "--db", store_url).output) == hosts_before
    # Checked against the hashes the host shipped, by `advisor verify` too.
    chain = verify_host(central, f"ship:{HOST}")
    assert chain.ok and chain.kept == answered.fetch.events
    verified = _cli("verify", "--db", store_url)
    assert verified.exit_code == 0, verified.output
    assert f"and {chain.kept} kept events fetched from it" in verified.output
    # Asked again: nothing to ask, nothing sent.
    assert json.loads(_cli("fetch", SERVICE, "--json", "--db", store_url).output)["asked"] == 0
    assert ship(host, central, HOST, selection=Selection(held_every_s=0)).fetch.ranges == 0

    # A fetched event altered in the central store is found by verify.
    _tamper(
        central,
        "UPDATE events SET payload = replace(payload, '200 OK', '500 ERR') WHERE seq = "
        "(SELECT max(e.seq) FROM events e JOIN sources s ON s.id = e.source_id "
        f"WHERE s.name = 'kept:{HOST}')",
    )
    broken = verify_host(central, f"ship:{HOST}")
    assert not broken.ok and "kept range fetched from the host" in (broken.reason or "")
    host.close()


def _range_events(host: EventStore, central: EventStore) -> tuple[int, list[RawEvent]]:
    """The first kept range the central store holds a digest of, and its events on the host."""
    with central.connect() as conn:
        key, payload = conn.execute(
            text("SELECT idem_key, payload FROM events WHERE type = :t ORDER BY seq LIMIT 1"),
            {"t": HELD_TYPE},
        ).one()
    first = orjson.loads(payload)["first_seq"]
    return int(key), [e for e in host.read_raw() if first <= e.seq <= key]


def _kept_count(central: EventStore) -> int:
    with central.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM events e JOIN sources s ON s.id = e.source_id "
                    "WHERE s.name = :s"
                ),
                {"s": f"kept:{HOST}"},
            ).scalar_one()
        )


def test_the_central_store_takes_only_the_events_the_host_kept(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    """A range is taken whole, each event extending the host's chain from the range's
    starting hash and the last at the closing hash the host shipped: one left out, one
    altered, or all of them forged with their hashes recomputed are refused, and nothing is
    stored; the right events are stored once."""
    host = _serving_host(tmp_path, seed_journal)
    central = opener(store_url)
    ship(host, central, HOST, selection=Selection(held_every_s=0))
    key, got = _range_events(host, central)
    writer = writer_for(central)
    assert len(got) > 2

    with pytest.raises(IntegrityError) as refused:
        writer.ship_kept(HOST, key, got[:1] + got[2:], "")
    assert refused.value.first_bad_seq == got[1].seq
    altered = [*got]
    altered[1] = RawEvent(**{**vars(got[1]), "payload": got[1].payload.replace("200", "500")})
    with pytest.raises(IntegrityError, match="does not extend") as refused:
        writer.ship_kept(HOST, key, altered, "")
    assert refused.value.first_bad_seq == got[1].seq
    forged: list[RawEvent] = []
    prev = b"\x01" * 32  # a chain from elsewhere
    for e in altered:
        h = e.recomputed_hash(prev)
        forged.append(RawEvent(**{**vars(e), "hash": h}))
        prev = h
    with pytest.raises(IntegrityError):
        writer.ship_kept(HOST, key, forged, "")
    with pytest.raises(IntegrityError, match="kept no range"):
        writer.ship_kept(HOST, key - 1, got, "")
    assert _kept_count(central) == 0

    assert writer.ship_kept(HOST, key, got, "") == len(got)
    assert writer.ship_kept(HOST, key, got, "") == 0  # sent twice: a duplicate
    assert _kept_count(central) == len(got)
    assert verify_host(central, f"ship:{HOST}").ok
    host.close()


def test_a_host_that_no_longer_has_a_range_says_why(
    tmp_path: Path, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    host, url, central = _shipped(tmp_path, seed_journal, opener)
    assert _cli("fetch", SERVICE, "--wait", "0", "--db", url).exit_code == 75
    restored = opener(f"sqlite:///{tmp_path / 'restored.db'}")  # a host store without them
    report = answer_requests(restored, writer_for(central), HOST, lambda attempt: attempt())
    assert report.ranges >= 1 and report.events == 0
    assert all(f"host {HOST} no longer holds its events" in n for n in report.declined)
    result = _cli("fetch", SERVICE, "--wait", "0", "--db", url)
    assert result.exit_code == 1, result.output
    assert "no longer holds its events" in result.stderr
    host.close()


def test_a_full_run_of_kept_events_is_closed_so_a_range_fetches_in_one_piece(
    tmp_path: Path, seed_journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(selection_module, "HELD_MAX", 7)
    host = _serving_host(tmp_path, seed_journal)
    central = open_store(f"sqlite:///{tmp_path / 'central.db'}")
    try:
        ship(host, central, HOST, batch=50, selection=Selection(held_every_s=0))
        with central.connect() as conn:
            sizes = [
                orjson.loads(p)["last_seq"] - orjson.loads(p)["first_seq"] + 1
                for (p,) in conn.execute(
                    text("SELECT payload FROM events WHERE type = :t"), {"t": HELD_TYPE}
                )
            ]
        assert max(sizes) == 7 and sum(sizes) >= SERVED
        assert verify_host(central, f"ship:{HOST}").ok
        # `--last`: only the ranges of the last seconds before the end are asked for.
        _, runs = incident_runs(central, SERVICE)
        start, end = window(runs, 0)
        url = central.url
        last = json.loads(
            _cli("fetch", SERVICE, "--last", "20", "--wait", "0", "--json", "--db", url).output
        )
        everything = kept_ranges(central, HOST, start, end)
        recent = kept_ranges(central, HOST, end - 20_000_000, end)
        assert 0 < last["ranges"] == len(recent) < len(everything)
        whole = json.loads(
            _cli("fetch", SERVICE, "--last", "0", "--wait", "0", "--json", "--db", url).output
        )
        assert whole["ranges"] == len(everything) and whole["asked"] == len(everything) - len(
            recent
        )
    finally:
        central.close()
        host.close()


def test_a_hosts_own_role_answers_and_may_only_read_the_requests(
    tmp_path: Path, seed_journal: Path, pg_url: str, opener: Callable[[str], EventStore]
) -> None:
    """docs/fleet.md's grants: the role reads its requests and answers through
    `advisor_ship_kept`, for its own host only; it cannot write a request. A role granted
    before (no SELECT on the requests) still ships, and says why it cannot answer."""
    central = opener(pg_url)
    host = _serving_host(tmp_path, seed_journal)
    with shipper_role(central, pg_url, HOST) as url:
        as_role = open_store(url)
        try:
            ship(host, as_role, HOST, selection=Selection(held_every_s=0))
            assert _cli("fetch", SERVICE, "--wait", "0", "--db", pg_url).exit_code == 75
            answered = ship(host, as_role, HOST, selection=Selection(held_every_s=0))
            assert answered.fetch.ranges >= 1 and answered.fetch.events >= SERVED
            assert not answered.fetch.declined and answered.fetch.cannot is None
            key, got = _range_events(host, central)
            with pytest.raises(Exception, match="ships for host"), as_role.begin() as conn:
                from advisor.store.integrity.kept import kept_call

                kept_call(conn, "gpu-node-08", key, got, "")
            with pytest.raises(Exception, match="permission denied"), as_role.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO fetch_requests (host, held_key, first_seq, requested_us, "
                        "requested_by) VALUES (:h, 1, 1, 0, 'x')"
                    ),
                    {"h": HOST},
                )
            role = url.split("//", 1)[1].split("@", 1)[0].split("+", 1)[-1]
            with central.begin() as conn:
                conn.execute(text(f'REVOKE SELECT ON fetch_requests FROM "{role}"'))
            later = ship(host, as_role, HOST, selection=Selection(held_every_s=0))
            assert later.fetch.cannot is not None and "permission denied" in later.fetch.cannot
        finally:
            as_role.close()
    assert _cli("fetch", SERVICE, "--wait", "0", "--db", pg_url).exit_code == 0
    assert verify_host(central, f"ship:{HOST}").ok
    host.close()


def test_the_console_incident_page_says_what_is_on_the_host_and_shows_what_came(
    tmp_path: Path, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    host, url, central = _shipped(tmp_path, seed_journal, opener)
    incident, _ = incident_runs(central, SERVICE)
    page = "/incident/" + urllib.parse.quote(incident.incident_id)
    with served(url) as base:
        body = urllib.request.urlopen(base + page, timeout=30).read().decode()
    assert "Lines kept on the host" in body
    assert (
        f"{SERVED:,} routine lines of the last 10 minutes before the end are on {HOST} only" in body
    )
    assert html.escape(f"advisor fetch {SERVICE} --incident") in body
    _cli("fetch", SERVICE, "--wait", "0", "--db", url)
    ship(host, central, HOST, selection=Selection(held_every_s=0))
    assert _cli("fetch", SERVICE, "--wait", "0", "--db", url).exit_code == 0
    with served(url) as base:
        body = urllib.request.urlopen(base + page, timeout=30).read().decode()
    assert f"{SERVED:,} fetched from {HOST}; the last before the end" in body
    assert f"10.0.0.{SERVED - 1}:4{SERVED - 1} - " in body
    assert "are on gpu-node-07 only" not in body
    host.close()


def test_advisor_fetch_waits_for_the_agent_that_answers_on_its_round(
    tmp_path: Path, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    """`advisor fetch` as a process asks and waits; the host's `watch --ship-to` loop
    (`ship_forever`) answers on its next round and says so; the fetch then returns 0 with
    every line here."""
    host, url, central = _shipped(tmp_path, seed_journal, opener)
    proc = subprocess.Popen(
        advisor_argv("fetch", SERVICE, "--wait", "60", "--json", "--db", url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stop, notes = threading.Event(), list[str]()
    agent = threading.Thread(
        target=ship_forever,
        args=(host, url, HOST, stop),
        kwargs={"interval_s": 0.1, "on_note": notes.append, "selection": Selection()},
    )
    try:
        wait("the fetch's requests", lambda: _requests(central) > 0, proc)
        agent.start()
        out, err = proc.communicate(timeout=90)
    finally:
        stop.set()
        if agent.is_alive():
            agent.join(timeout=30)
        proc.kill()
        host.close()
    assert proc.returncode == 0, err
    answer = json.loads(out)
    assert (answer["fetched_lines"], answer["lines_on_host"], answer["waiting"]) == (SERVED, 0, [])
    assert any(n.startswith("sent ") and "range(s) the central store asked for" in n for n in notes)


def _requests(central: EventStore) -> int:
    with central.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM fetch_requests")).scalar_one())


def test_the_agent_says_it_cannot_read_the_requests_once() -> None:
    cannot = "cannot read the central store's requests for kept lines: permission denied"
    report = FetchReport(ranges=2, events=10, declined=["host h no longer holds it"], cannot=cannot)
    assert report.words() == [
        "sent 10 kept events of 2 range(s) the central store asked for",
        "host h no longer holds it",
        cannot,
    ]
    assert FetchReport(cannot=cannot).words(said=cannot) == []  # said last round: not again
    assert FetchReport().words(said=cannot) == []
