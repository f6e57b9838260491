"""A console page is rendered once per store position and kept (`load.Pages`): requests that
find the store where it was are answered from that rendering — each with its own CSRF token
in the forms, never another visitor's — and a write by any process (a new position) is on
the next page read once /api/changes has seen it."""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner
from starlette.responses import HTMLResponse, Response

from advisor.cli.main import cli
from advisor.console.load import Busy, Pages
from advisor.store import EventStore
from tests.console.serving import Client, served
from tests.waiting import wait

TOKEN = "correct horse battery staple"
UNIT = "vllm-minimax-m25.service"
SAMPLER = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
PAGE = "/incident/" + urllib.parse.quote(SAMPLER)
KEY = ("/incident/x", "", False)


def _renderer(calls: list[int], body: str = "page") -> Callable[[], object]:
    async def render() -> Response:
        calls.append(1)
        await anyio.wait_all_tasks_blocked()  # the others asking meanwhile wait for it
        return HTMLResponse(body)

    return render


def test_requests_at_one_position_share_one_rendering() -> None:
    pages, calls = Pages(), list[int]()

    async def main() -> list[tuple[str, int]]:
        answers: list[tuple[str, int]] = []

        async def ask() -> None:
            answers.append(await pages.get(KEY, 7, _renderer(calls)))  # type: ignore[arg-type]

        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(ask)
        return answers

    assert anyio.run(main) == [("page", 200)] * 50 and len(calls) == 1
    anyio.run(pages.get, KEY, 7, _renderer(calls))  # the same position: still kept
    assert len(calls) == 1
    anyio.run(pages.get, KEY, 8, _renderer(calls, "newer"))  # the store moved: read anew
    assert len(calls) == 2
    assert anyio.run(pages.get, KEY, 8, _renderer(calls)) == ("newer", 200)


def test_while_a_page_is_rendered_anew_the_last_rendering_is_answered_at_once() -> None:
    pages, calls = Pages(), list[int]()
    anyio.run(pages.get, KEY, 7, _renderer(calls, "old"))

    async def main() -> list[tuple[str, int]]:
        release = anyio.Event()

        async def slow() -> Response:
            await release.wait()
            return HTMLResponse("new")

        answers: list[tuple[str, int]] = []

        async def ask(render: Callable[[], Any]) -> None:
            answers.append(await pages.get(KEY, 8, render))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, slow)  # the store moved: rendered anew, slowly
            await anyio.wait_all_tasks_blocked()
            await ask(_renderer(calls, "never"))  # meanwhile: the last rendering, at once
            release.set()
        await ask(_renderer(calls, "never"))
        return answers

    assert anyio.run(main) == [("old", 200), ("new", 200), ("new", 200)]
    assert len(calls) == 1


def test_a_failed_rendering_reaches_its_waiters_and_is_not_kept() -> None:
    pages, calls = Pages(), list[int]()

    async def busy() -> Response:
        calls.append(1)
        await anyio.wait_all_tasks_blocked()
        raise Busy

    async def main() -> list[str]:
        heard: list[str] = []

        async def ask() -> None:
            try:
                await pages.get(KEY, 3, busy)
            except Busy:
                heard.append("busy")

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(ask)
        return heard

    assert anyio.run(main) == ["busy"] * 5 and len(calls) == 1
    assert anyio.run(pages.get, KEY, 3, _renderer(calls)) == ("page", 200)
    assert len(calls) == 2


def test_the_pages_kept_are_bounded() -> None:
    pages, calls = Pages(kept=3), list[int]()
    for n in range(5):
        anyio.run(pages.get, (f"/p{n}", "", False), 1, _renderer(calls))
    anyio.run(pages.get, ("/p0", "", False), 1, _renderer(calls))  # forgotten: rendered again
    assert len(calls) == 6
    anyio.run(pages.get, ("/p4", "", False), 1, _renderer(calls))  # among the newest: kept
    assert len(calls) == 6


def _tokens(body: str) -> set[str]:
    return set(re.findall(r'name="csrftoken" value="([^"]*)"', body))


def _status(body: str, action_id: str) -> str:
    found = re.search(
        r'class="step (\w+)[^"]*" data-action="' + re.escape(html.escape(action_id)), body
    )
    assert found, f"no step {action_id} on the page"
    return found.group(1)


def test_each_visitor_gets_its_own_token_and_another_process_write_shows(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        anna, ben = Client(base), Client(base)
        for client, name in ((anna, "anna"), (ben, "ben")):
            assert client.login(TOKEN, name).status == 303
            client.get(PAGE)  # the page after the login carries its note: rendered alone
        pages = [client.get(PAGE).body for client in (anna, ben)]  # one rendering, kept
        assert _tokens(pages[0]) == {anna.csrf()} and _tokens(pages[1]) == {ben.csrf()}
        assert anna.csrf() != ben.csrf()
        assert not re.search(r"csrf-[0-9a-f]{32}", pages[0] + pages[1])  # no marker left
        assert _status(pages[1], f"{SAMPLER}#0") == "proposed"

        seen = json.loads(ben.get("/api/changes").body)["seq"]
        result = CliRunner().invoke(cli, ["approve", f"{SAMPLER}#0", "--db", sqlite_url])
        assert result.exit_code == 0, result.output
        # /api/changes reads the store again at most every half second
        wait("the write", lambda: json.loads(ben.get("/api/changes").body)["seq"] != seen)
        assert _status(ben.get(PAGE).body, f"{SAMPLER}#0") == "approved"

        fields = {"csrftoken": anna.csrf(), "id": f"{SAMPLER}#1", "next": PAGE}
        assert anna.post("/reject", fields).status == 303  # a kept page's token acts
        assert _status(anna.get(PAGE).body, f"{SAMPLER}#1") == "rejected"
        assert _status(ben.get(PAGE).body, f"{SAMPLER}#1") == "rejected"


def test_the_bytes_kept_are_bounded_too() -> None:
    pages, calls = Pages(kept_bytes=10), list[int]()
    for n in range(3):  # 4 bytes each: the third pushes the first out
        anyio.run(pages.get, (f"/p{n}", "", False), 1, _renderer(calls, "abcd"))
    anyio.run(pages.get, ("/p2", "", False), 1, _renderer(calls))
    assert len(calls) == 3
    anyio.run(pages.get, ("/p0", "", False), 1, _renderer(calls))
    assert len(calls) == 4


def test_a_rendering_whose_client_went_away_is_rendered_again_for_its_waiters() -> None:
    pages, calls = Pages(), list[int]()

    async def main() -> list[tuple[str, int]]:
        started, answers, first = anyio.Event(), list[tuple[str, int]](), anyio.CancelScope()

        async def hangs() -> Response:
            started.set()
            await anyio.sleep_forever()
            raise AssertionError("never")

        async def first_client() -> None:
            with first:
                await pages.get(KEY, 1, hangs)

        async def second_client() -> None:
            answers.append(await pages.get(KEY, 1, _renderer(calls, "again")))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first_client)
                await started.wait()
                tg.start_soon(second_client)
                await anyio.wait_all_tasks_blocked()  # waiting for the first rendering
                first.cancel()  # the first client leaves mid-rendering
        return answers

    assert anyio.run(main) == [("again", 200)] and len(calls) == 1
