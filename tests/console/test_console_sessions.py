"""The console's sessions and the ids it takes, over real HTTP (`advisor serve` a real
process): logging out ends the session on the server too, failed logins from one address
are slowed down, a position out of range is 404, and every id a page or form takes may be
a prefix or a short id, as the command line takes it."""

from __future__ import annotations

import copy
import urllib.parse
from pathlib import Path

from advisor.core.ids import short_id
from advisor.store import EventFilter, EventStore
from tests.console.serving import Answer, Client, served

TOKEN = "correct horse battery staple"
UNIT = "vllm-minimax-m25.service"
SAMPLER = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
WEDGE = f"gpu-node-07/{UNIT}@2026-02-21T00:33:27.400000Z"


def _approved(store: EventStore) -> list[str]:
    return [e.payload.action_id for e in store.read(EventFilter(type="action.approved"))]


def test_a_cookie_replayed_after_logout_approves_nothing(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        assert client.login(TOKEN).status == 303
        kept = [copy.copy(c) for c in client.jar]  # what an eavesdropper copied
        assert client.post("/logout", {"csrftoken": client.csrf()}).status == 303
        replay = Client(base)
        for cookie in kept:
            replay.jar.set_cookie(cookie)
        answer = replay.post("/approve", {"csrftoken": replay.csrf(), "id": f"{SAMPLER}#0"})
        assert answer.status == 401, answer.body
        assert client.login(TOKEN).status == 303  # a new login works again
        done = client.post("/approve", {"csrftoken": client.csrf(), "id": f"{SAMPLER}#0"})
        assert done.status == 303
    assert _approved(diagnosed) == [f"{SAMPLER}#0"]


def _header(answer: Answer, name: str) -> str:
    return next(v for k, v in answer.headers.items() if k.lower() == name)


def test_failed_logins_from_one_address_are_slowed_down(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        assert [client.login(f"guess {n}").status for n in range(5)] == [401] * 5
        slowed = client.login("guess 5")
        assert slowed.status == 429 and int(_header(slowed, "retry-after")) >= 1
        assert client.login(TOKEN).status == 429  # the token is not even looked at
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert Client(base).post("/approve", {"id": SAMPLER}, bearer).status == 429  # nor here
    assert _approved(diagnosed) == []


def test_a_position_out_of_range_is_not_found(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, log=tmp_path / "serve.log") as base:
        client = Client(base)
        for given in ("99999999999999999999999", "9223372036854775808", "0", "-1", "1e3", "x"):
            answer = client.get(f"/event/{given}")
            assert answer.status == 404, (given, answer.status, answer.body[:200])
        assert client.get("/event/1").status == 200


def _page(ident: str) -> str:
    return "/incident/" + urllib.parse.quote(ident)


def test_pages_and_forms_take_short_ids_and_prefixes(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    args = ("--token", TOKEN, "--backend", "dry-run")
    with served(sqlite_url, *args, log=tmp_path / "serve.log") as base:
        client = Client(base)
        for given in (short_id(SAMPLER), short_id(SAMPLER)[:6], SAMPLER[:-4]):
            page = client.get(_page(given))
            assert page.status == 200 and "set --max-num-seqs 256" in page.body, given
        ambiguous = client.get(_page("gpu-node-07/"))
        assert ambiguous.status == 404 and "ambiguous" in ambiguous.body
        assert client.get(_page("ffffffffffff")).status == 404
        assert client.login(TOKEN).status == 303
        here = _page(SAMPLER)
        for path, ident, said in (
            ("/run", short_id(SAMPLER)[:8], "dry run (nothing changed or recorded)"),
            ("/approve", short_id(f"{SAMPLER}#0"), "approved 1 action(s)"),
            ("/reject", short_id(f"{WEDGE}#0"), "rejected"),
            ("/rollback", short_id(f"{SAMPLER}#1"), "nothing is changed"),
        ):
            fields = {"csrftoken": client.csrf(), "id": ident, "next": here}
            assert client.post(path, fields).status == 303
            note = client.get(here).body
            assert said in note and "no such" not in note, (path, note)
        if_run = "hold restarts of vllm-minimax-m25.service"
        fields = {"csrftoken": client.csrf(), "id": short_id(SAMPLER), "next": here}
        client.post("/run", fields)
        assert if_run in client.get(here).body
    assert _approved(diagnosed) == [f"{SAMPLER}#0"]
    rejected = [e.payload.action_id for e in diagnosed.read(EventFilter(type="action.rejected"))]
    assert rejected == [f"{WEDGE}#0"]
