"""`advisor serve` over real HTTP (the server a real process on 127.0.0.1): nothing changes
without the token and a good CSRF token, decisions are recorded as the command line records
them, hostile text from the logs is escaped, and the pages read SQLite and PostgreSQL alike;
/metrics and plotly.js are served beside them."""

from __future__ import annotations

import gzip
import html
import json
import re
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.ids import short_id
from advisor.pipeline.processing import Processor
from advisor.store import EventFilter, EventStore
from advisor.views.read.actions import all_actions
from ingest.journal_sources import ingest_json_file
from tests.console.serving import Client, served

TOKEN = "correct horse battery staple"
UNIT = "vllm-minimax-m25.service"
SAMPLER = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
WEDGE = f"gpu-node-07/{UNIT}@2026-02-21T00:33:27.400000Z"


def _page(incident_id: str) -> str:
    return "/incident/" + urllib.parse.quote(incident_id)


def _decisions(store: EventStore) -> list[tuple[str, str, str | None]]:
    return [(r.action_id, r.status, r.decided_why) for r in all_actions(store)]


def _approvals(store: EventStore) -> list[Any]:
    return [e.payload for e in store.read(EventFilter(type="action.approved"))]


def test_nothing_changes_without_the_token(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    before = _decisions(diagnosed)
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        page = client.get(_page(SAMPLER))
        assert page.status == 200 and "log in to act" in page.body
        step = {"csrftoken": client.csrf(), "id": f"{SAMPLER}#0", "next": "/"}
        assert client.post("/approve", step).status == 401  # a good form, but nobody logged in
        wrong = {"Authorization": "Bearer not the token"}
        assert Client(base).post("/approve", {"id": SAMPLER}, wrong).status == 401
        assert Client(base).post("/approve", {"id": SAMPLER}).status == 403  # no CSRF cookie
        assert client.login("not the token").status == 401
        assert client.post("/approve", step).status == 401
    assert _decisions(diagnosed) == before and _approvals(diagnosed) == []
    with served(sqlite_url, log=tmp_path / "serve-no-token.log") as base:  # no token set
        client = Client(base)
        assert client.login(TOKEN).status == 401
        refused = Client(base).post(
            "/approve", {"id": SAMPLER}, {"Authorization": f"Bearer {TOKEN}"}
        )
        assert refused.status == 403 and "changes nothing" in refused.body
    assert _approvals(diagnosed) == []


def test_after_a_form_it_goes_back_only_into_the_console(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        client.get("/login")
        for target, location in (
            ("/fleet", "/fleet"),
            ("https://evil.example/", "/"),
            ("//evil.example/", "/"),
            ("/\\evil.example/", "/"),
        ):
            fields = {"csrftoken": client.csrf(), "token": TOKEN, "next": target}
            answer = client.post("/login", fields)
            assert (answer.status, answer.headers["location"]) == (303, location), target


def test_a_bad_csrf_token_is_refused(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        assert client.login(TOKEN).status == 303
        good = client.csrf()
        for token in ("", "forged", good[:-2] + "xx"):
            answer = client.post("/approve", {"csrftoken": token, "id": f"{SAMPLER}#0"})
            assert answer.status == 403, token
            assert "CSRF" in answer.body or "did not match" in answer.body
        assert _approvals(diagnosed) == []
        done = client.post("/approve", {"csrftoken": good, "id": f"{SAMPLER}#0", "next": "/"})
        assert done.status == 303
    assert [p.action_id for p in _approvals(diagnosed)] == [f"{SAMPLER}#0"]


def test_decisions_are_recorded_as_the_command_line_records_them(
    diagnosed: EventStore,
    sqlite_url: str,
    tmp_path: Path,
    opener: Callable[[str], EventStore],
    seed_journal: Path,
) -> None:
    twin_url = f"sqlite:///{tmp_path / 'twin.db'}"
    twin = opener(twin_url)
    ingest_json_file(twin, seed_journal)
    Processor(twin).run(final=True)
    runner = CliRunner()
    for argv in (
        ["approve", f"{SAMPLER}#0"],
        ["approve", f"{SAMPLER}#2"],  # the alternative, chosen instead of #1
        ["reject", f"{WEDGE}#0", "--why", "not now"],
    ):
        assert runner.invoke(cli, [*argv, "--db", twin_url]).exit_code == 0
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        assert client.login(TOKEN, name="ops-anna").status == 303
        page = client.get(_page(SAMPLER))
        assert "Choose this instead" in page.body
        for path, fields in (
            ("/approve", {"id": f"{SAMPLER}#0"}),
            ("/approve", {"id": f"{SAMPLER}#2"}),
            ("/reject", {"id": f"{WEDGE}#0", "why": "not now"}),
        ):
            answer = client.post(
                path, {"csrftoken": client.csrf(), "next": _page(SAMPLER), **fields}
            )
            assert answer.status == 303 and answer.headers["location"] == _page(SAMPLER)
        after = client.get(_page(SAMPLER)).body
        assert "approved 1 action(s)" in after or "rejected" in after  # the note of the last
    assert _decisions(diagnosed) == _decisions(twin)
    assert {p.by for p in _approvals(diagnosed)} == {"human:ops-anna"}
    kinds = [e.type for e in diagnosed.read(EventFilter()) if e.type.startswith("action.")]
    assert kinds == [e.type for e in twin.read(EventFilter()) if e.type.startswith("action.")]


def _hostile_journal(seed: Path, folder: Path) -> Path:
    """The seed journal with a hostile unit name and markup in the failure's log line."""
    out = []
    for line in seed.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("MESSAGE")
        if isinstance(message, list):
            message = bytes(message).decode("utf-8", "replace")
        if isinstance(message, str) and "warming up sampler" in message:
            message += ' <script>alert("pwned")</script><img src=x onerror=alert(1)>'
        entry["MESSAGE"] = message
        hostile = {
            k: v.replace(UNIT, 'vllm-"><i>x</i>.service') if isinstance(v, str) else v
            for k, v in entry.items()
        }
        out.append(json.dumps(hostile))
    path = folder / "hostile.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


def test_hostile_unit_names_and_log_lines_are_escaped(
    sqlite_url: str, tmp_path: Path, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    store = opener(sqlite_url)
    ingest_json_file(store, _hostile_journal(seed_journal, tmp_path))
    Processor(store).run(final=True)
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        listing = client.get("/").body
        links = re.findall(r'href="(/incident/[^"]+)"', listing)
        assert len(links) == 2 and "<i>" not in listing
        # (ingest makes the unit's "/" a "_"; the rest of the name is kept, and escaped here)
        assert "vllm-&#34;&gt;&lt;i&gt;x&lt;_i&gt;.service" in listing
        pages = [client.get(link) for link in links]
        assert all(p.status == 200 for p in pages)
        body = "".join(p.body for p in pages)
        assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in body
        assert "<script>alert" not in body and "<img src=x" not in body and "<i>" not in body


def test_pages_filters_fleet_and_raw_events(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, log=tmp_path / "serve.log") as base:
        client = Client(base)
        listing = client.get("/").body
        table = listing[listing.index('id="incidents"') :]
        assert table.index("wedged_stop") < table.index("sampler_warmup_oom")  # newest first
        assert "5 step(s) to approve" in listing and f"gpu-node-07/{UNIT}" in listing
        only = client.get("/?label=wedged_stop").body
        assert "wedged_stop</a>" in only and "sampler_warmup_oom</a>" not in only
        assert "No incident matches" in client.get("/?host=elsewhere").body
        assert "since:" in client.get("/?since=yesterdayish").body
        page = client.get(_page(SAMPLER)).body
        for text in (
            "confidence 0.99",
            "set --max-num-seqs 256",
            f"advisor remediate gpu-node-07/{UNIT}",
            "fits: 90% × 1.17 GiB / 3.82 MiB = 281 → 256",
            'id="charts"',
            "phase sampler_warmup",
        ):
            assert text in page, text
        raw = re.search(r'href="/event/(\d+)" class="raw-link"', page)
        assert raw is not None
        event = client.get(f"/event/{raw.group(1)}").body
        assert "log.recorded" in event and "CUDA out of memory" in event
        assert client.get("/event/999999").status == 404
        assert client.get("/incident/no-such-incident").status == 404
        fleet = client.get("/fleet").body
        assert "Crashes per week" in fleet and "2026-W08" in fleet and "Restart loops" in fleet
        assert json.loads(client.get("/api/changes").body)["seq"] == max(
            e.seq for e in diagnosed.read(EventFilter())
        )


def test_the_console_reads_the_central_postgresql_store(
    pg_url: str, tmp_path: Path, opener: Callable[[str], EventStore], seed_journal: Path
) -> None:
    store = opener(pg_url)
    ingest_json_file(store, seed_journal)
    Processor(store).run(final=True)
    with served(pg_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        assert "sampler_warmup_oom" in client.get("/").body
        assert "set --max-num-seqs 256" in client.get(_page(SAMPLER)).body
        assert "2026-W08" in client.get("/fleet").body
        assert client.login(TOKEN).status == 303
        fields = {"csrftoken": client.csrf(), "id": f"{SAMPLER}#0"}
        assert client.post("/approve", fields).status == 303
    assert [p.action_id for p in _approvals(store)] == [f"{SAMPLER}#0"]


def test_a_dry_run_console_says_what_it_would_do_and_records_nothing(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    args = ("--token", TOKEN, "--backend", "dry-run")
    with served(sqlite_url, *args, log=tmp_path / "serve.log") as base:
        client = Client(base)
        assert client.login(TOKEN).status == 303
        here = _page(SAMPLER)
        for path, ident in (
            ("/approve", SAMPLER),
            ("/run", SAMPLER),
            ("/rollback", f"{SAMPLER}#1"),
        ):
            fields = {"csrftoken": client.csrf(), "id": ident, "next": here}
            assert client.post(path, fields).status == 303
            if path == "/approve":
                assert "approved 5 action(s)" in client.get(here).body
            elif path == "/run":
                note = client.get(here).body
                assert "dry run (nothing changed or recorded)" in note
                assert "hold restarts of vllm-minimax-m25.service" in note
            else:
                assert "nothing is changed" in client.get(here).body
        assert client.post("/approve", {"csrftoken": client.csrf(), "id": ""}).status == 400
        again = client.post(
            "/approve", {"csrftoken": client.csrf(), "id": f"{SAMPLER}#0", "next": here}
        )
        assert again.status == 303 and "is approved, not proposed" in client.get(here).body
    types = {e.type for e in diagnosed.read(EventFilter()) if e.type.startswith("action.")}
    assert types == {"action.proposed", "action.approved"}  # nothing started, nothing done


def _header(answer: Any, name: str) -> str:
    return next(v for k, v in answer.headers.items() if k.lower() == name)


def test_metrics_and_plotly_js_are_served_and_pages_carry_no_inline_script(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    from advisor.reports.charts import plotly_js, plotly_js_version

    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)  # nobody logged in: /metrics reads like the pages
        metrics = client.get("/metrics")
        assert metrics.status == 200 and _header(metrics, "content-type").startswith("text/plain")
        incidents = [line for line in metrics.body.splitlines() if line.startswith("advisor_")]
        for label in ("sampler_warmup_oom", "wedged_stop"):
            assert any(
                line.startswith("advisor_incidents{") and f'label="{label}"' in line
                for line in incidents
            ), incidents
        assert "advisor_plans_pending 2.0" in incidents, incidents  # both incidents wait
        answer = client.get(_page(SAMPLER))
        policy = _header(answer, "content-security-policy")
        assert "script-src 'self' 'unsafe-eval';" in policy and "default-src 'self'" in policy
        page = answer.body
        # every script is a file of the console's: the charts are data, drawn by console.js
        scripts = re.findall(r"<script[^>]*>", page)
        assert scripts == [
            f'<script src="{scripts[0][13:-8]}" defer>',
            '<script src="/static/console.js" defer>',
        ] and scripts[0].startswith(f'<script src="/plotly.js?v={plotly_js_version()}-basic"')
        figures = [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)]
        assert len(figures) == 1 and figures[0]["config"]["displaylogo"] is False
        assert "phase sampler_warmup" in json.dumps(figures[0]["data"])
        assert len(re.findall(r"data-figure=", client.get("/fleet").body)) == 3
        lib = client.get(scripts[0][13:-8])
        # the vendored basic bundle the HTML post-mortem inlines, not plotly's full one
        assert lib.status == 200 and lib.body == plotly_js(), lib.headers
        assert lib.body.startswith("/**\n* plotly.js (basic - minified) v")
        assert _header(lib, "cache-control") == "public, max-age=31536000, immutable"
        assert _header(lib, "content-type").startswith("text/javascript")
        request = urllib.request.Request(base + "/plotly.js", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert answer.headers["content-encoding"] == "gzip"
            assert gzip.decompress(answer.read()).decode() == plotly_js()


def test_the_plan_comes_right_after_the_headline_fix(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        page = Client(base).get(_page(SAMPLER)).body
    # the plan and its Approve buttons sit under the headline fix, before the long parts
    fix, plan = page.index('id="fix"'), page.index('id="plan"')
    approve = page.index('class="inline approve"')
    assert fix < plan < approve < page.index('id="charts"') < page.index('id="evidence"')


def _note(body: str) -> str:
    """The text of the page's note (what the last decision said)."""
    found = re.search(r'<p class="note" id="note">(.*?)</p>', body, re.S)
    assert found, "no note on the page"
    return html.unescape(found.group(1))


def test_a_decisions_note_names_short_ids(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        assert client.login(TOKEN).status == 303
        step = f"{SAMPLER}#0"
        fields = {"csrftoken": client.csrf(), "id": step, "next": _page(SAMPLER)}
        assert client.post("/approve", fields).status == 303
        note = _note(client.get(_page(SAMPLER)).body)
        assert note == f"approved 1 action(s): {short_id(step)}"
        assert client.post("/approve", fields).status == 303  # again: refused, naming it
        note = _note(client.get(_page(SAMPLER)).body)
        assert short_id(step) in note and SAMPLER not in note, note
        fields = {"csrftoken": client.csrf(), "id": f"{WEDGE}#0", "why": "no", "next": "/"}
        assert client.post("/reject", fields).status == 303
        assert _note(client.get("/").body) == f"rejected {short_id(WEDGE + '#0')}"
