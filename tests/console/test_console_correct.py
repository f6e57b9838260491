"""The incident page's correction form: an operator says what the incident really was. Over
real HTTP (nobody logged in or no CSRF token: refused; logged in: a `label.corrected` event,
as `advisor label` writes it) and in headless Chromium (the form filled in and sent, the page
showing the operator's label beside the diagnosis); the list of incidents shows it too, on
SQLite and PostgreSQL, its corrections read at once."""

from __future__ import annotations

import html
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from advisor.core.ids import short_id
from advisor.core.payloads import LabelCorrected
from advisor.core.taxonomy import KV_CACHE_OOM, SAMPLER_WARMUP_OOM, WEIGHTS_LOAD_OOM
from advisor.front import Advisor
from advisor.pipeline.processing import Processor
from advisor.store import EventFilter, EventStore
from advisor.views.read.console import IncidentFilter, incident_list
from ingest.journal_sources import ingest_json_file
from tests.console.serving import Client, served
from tests.console.test_console_browser import _navigate, browser  # noqa: F401 (a fixture)
from tests.diagnosis.test_corrections import counting_reads

TOKEN = "correct horse battery staple"
UNIT = "vllm-minimax-m25.service"
SAMPLER = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
WEDGE = f"gpu-node-07/{UNIT}@2026-02-21T00:33:27.400000Z"
PAGE = "/incident/" + urllib.parse.quote(SAMPLER)


def _corrections(store: EventStore) -> list[LabelCorrected]:
    found = [e.payload for e in store.read(EventFilter(type="label.corrected"))]
    return [p for p in found if isinstance(p, LabelCorrected)]


def test_a_correction_needs_a_login_and_is_recorded_as_the_command_line_does(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        page = client.get(PAGE)
        assert page.status == 200 and 'action="/label"' in page.body
        assert re.search(r'id="correct".*?disabled title="log in to act"', page.body, re.S)
        fields = {"id": SAMPLER, "label": KV_CACHE_OOM, "why": "<i>kv</i>", "next": PAGE}
        assert client.post("/label", {"csrftoken": client.csrf(), **fields}).status == 401
        assert Client(base).post("/label", fields).status == 403  # no CSRF cookie
        assert _corrections(diagnosed) == []
        assert client.login(TOKEN, name="ops-anna").status == 303
        sent = client.post("/label", {"csrftoken": client.csrf(), **fields})
        assert sent.status == 303 and sent.headers["location"] == PAGE
        (said,) = _corrections(diagnosed)
        assert (said.incident_id, said.label, said.by) == (SAMPLER, KV_CACHE_OOM, "human:ops-anna")
        assert said.why == "<i>kv</i>" and said.replaces == SAMPLER_WARMUP_OOM
        after = client.get(PAGE).body
        assert f"labelled {short_id(SAMPLER)} {KV_CACHE_OOM}" in html.unescape(after)
        assert "&lt;i&gt;kv&lt;/i&gt;" in after and "<i>kv</i>" not in after
        bad = client.post("/label", {"csrftoken": client.csrf(), **fields, "label": "bogus"})
        assert bad.status == 303 and len(_corrections(diagnosed)) == 1
        assert "no label &#39;bogus&#39;" in client.get(PAGE).body


def test_an_operator_corrects_the_label_in_the_browser(
    browser: WebDriver,  # noqa: F811 (the fixture)
    diagnosed: EventStore,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    with served(sqlite_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        browser.get(base + PAGE)
        assert browser.find_elements(By.ID, "operator-label") == []
        _navigate(browser, "#login")
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.ID, "name").send_keys("browser-test")
        _navigate(browser, "#login-submit")
        if not browser.current_url.endswith(PAGE):
            browser.get(base + PAGE)
        form = browser.find_element(By.ID, "correct")
        Select(form.find_element(By.NAME, "label")).select_by_value(WEIGHTS_LOAD_OOM)
        form.find_element(By.NAME, "why").send_keys("it never finished loading")
        _navigate(browser, "#correct button")
        shown = browser.find_element(By.ID, "operator-label").text
        assert f"operator label {WEIGHTS_LOAD_OOM}" in shown
        assert "by human:browser-test" in shown and "it never finished loading" in shown
        assert SAMPLER_WARMUP_OOM in browser.find_element(By.CSS_SELECTOR, "h1 .label").text
        assert [c.label for c in _corrections(diagnosed)] == [WEIGHTS_LOAD_OOM]


def _rows(page: str) -> dict[str, str]:
    """The list page's rows, by the label the diagnosis gave (each incident of the seed
    scenario has its own)."""
    rows = re.findall(r"<tr class=.*?</tr>", page, re.S)
    out = {}
    for row in rows:
        for label in (SAMPLER_WARMUP_OOM, "wedged_stop"):
            if label in row:
                out[label] = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]*>", "", row)))
    return out


def test_the_list_shows_the_operators_label(
    store_url: str, opener: Callable[[str], EventStore], seed_journal: Path, tmp_path: Path
) -> None:
    store = opener(store_url)
    ingest_json_file(store, seed_journal)
    Processor(store).run(final=True)
    with served(store_url, "--token", TOKEN, log=tmp_path / "serve.log") as base:
        client = Client(base)
        before = client.get("/").body
        assert "operator label" not in before and set(_rows(before)) == {
            SAMPLER_WARMUP_OOM,
            "wedged_stop",
        }
        assert client.login(TOKEN, name="ops-anna").status == 303
        fields = {"id": SAMPLER, "label": KV_CACHE_OOM, "why": "kv", "next": "/"}
        assert client.post("/label", {"csrftoken": client.csrf(), **fields}).status == 303
        after = client.get("/").body
        assert after.count('class="label operator-label"') == 1
        rows = _rows(after)
        corrected = rows[SAMPLER_WARMUP_OOM]
        assert corrected.strip().startswith(KV_CACHE_OOM)
        words = f"operator label, by human:ops-anna; the diagnosis said {SAMPLER_WARMUP_OOM}, 0.99"
        assert words in corrected
        assert "operator" not in rows["wedged_stop"]


def test_the_lists_corrections_are_read_at_once(
    diagnosed: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    adv = Advisor(diagnosed)
    adv.label(SAMPLER, KV_CACHE_OOM, by="human:ops")
    adv.label(WEDGE, WEIGHTS_LOAD_OOM, by="human:ops")
    adv.label(SAMPLER, WEIGHTS_LOAD_OOM, by="human:anna")  # the latest wins
    asked = counting_reads(diagnosed, monkeypatch)
    lines, total = incident_list(diagnosed, IncidentFilter())
    said = {line.incident.incident_id: line.operator for line in lines}
    assert total == 2 and set(said) == {SAMPLER, WEDGE}
    assert [(c.payload.label, c.payload.by) for c in said.values() if c is not None] == [
        (WEIGHTS_LOAD_OOM, "human:anna" if i == SAMPLER else "human:ops") for i in said
    ]
    assert asked.count("label.corrected") == 1
