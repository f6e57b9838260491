"""The incident page's correction form: an operator says what the incident really was. Over
real HTTP (nobody logged in or no CSRF token: refused; logged in: a `label.corrected` event,
as `advisor label` writes it) and in headless Chromium (the form filled in and sent, the page
showing the operator's label beside the diagnosis)."""

from __future__ import annotations

import html
import re
import urllib.parse
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from advisor.core.ids import short_id
from advisor.core.payloads import LabelCorrected
from advisor.core.taxonomy import KV_CACHE_OOM, SAMPLER_WARMUP_OOM, WEIGHTS_LOAD_OOM
from advisor.store import EventFilter, EventStore
from tests.console.serving import Client, served
from tests.console.test_console_browser import _navigate, browser  # noqa: F401 (a fixture)

TOKEN = "correct horse battery staple"
UNIT = "vllm-minimax-m25.service"
SAMPLER = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
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
