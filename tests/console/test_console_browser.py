"""The console in real headless Chromium (the system's, driven through /usr/bin/chromedriver):
the demo leaves a plan waiting for approval; a person opens its incident, logs in, approves a
step and runs it, and the page follows what the executor records without being reloaded.
Screenshots are kept in the folder the test prints."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from advisor.store import EventStore
from tests.conftest import run_advisor
from tests.console.serving import served
from tests.fleet.test_hosts import CENTRAL, SHIPPED, beat, central_with_a_shipped_host

TOKEN = "s3cret-console-token"
CHROMIUM = Path("/usr/bin/chromium")
DRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 120  # a bound on waiting for the page, not a measurement


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    if not (CHROMIUM.exists() and DRIVER.exists()):
        pytest.skip("needs the chromium and chromium-driver packages (.ci/run installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1800",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # CSP violations show there
    driver = webdriver.Chrome(service=Service(executable_path=str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _shoot(driver: WebDriver, path: Path, action_id: str | None = None) -> None:
    """A screenshot, scrolled to the step `action_id` (else the top of the page)."""
    if action_id is not None:
        step = driver.find_element(By.CSS_SELECTOR, f'li.step[data-action="{action_id}"]')
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", step)
    assert driver.save_screenshot(str(path))


def _navigate(driver: WebDriver, css: str) -> None:
    """Click the link or button `css` selects and wait until the next page has loaded (a mark
    set on this page gone, the new one complete). The page may swap its main part in between
    (it follows the store): the element is then found again."""
    driver.execute_script("window.leaving = true;")
    for _ in range(20):
        try:
            driver.find_element(By.CSS_SELECTOR, css).click()
            break
        except WebDriverException:
            continue  # swapped under the click: find it again
    loaded = "return window.leaving === undefined && document.readyState === 'complete';"
    WebDriverWait(driver, WAIT_S, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script(loaded)
    )


def _until(driver: WebDriver, condition: Callable[[WebDriver], object]) -> None:
    """Wait for `condition`, through the page swapping its main part meanwhile."""
    ignored = (WebDriverException,)  # no such element, stale, or a node of the old main
    WebDriverWait(driver, WAIT_S, ignored_exceptions=ignored).until(condition)


def _status(driver: WebDriver, action_id: str) -> str:
    step = driver.find_element(By.CSS_SELECTOR, f'li.step[data-action="{action_id}"]')
    return str(step.find_element(By.CSS_SELECTOR, ".status").text)


# What plotly drew in the incident page's chart section: its plots, the subplots of the first
# (`xy`, `x2y2`, …: the timeline, then a panel per GPU), the GPU panels' titles, the tick
# labels of its time axes (plotly's `xtick`, `x2tick`, …) and how many shapes it drew (the
# failure and action lines, the phase bands).
DRAWN = """
var section = document.getElementById("charts");
var plots = section ? section.querySelectorAll(".js-plotly-plot") : [];
if (!plots.length || !plots[0].querySelector("g.subplot")) { return null; }
var texts = function (css) {
  return Array.prototype.map.call(plots[0].querySelectorAll(css), function (t) {
    return t.getAttribute("data-unformatted") || t.textContent;
  });
};
return {
  plots: plots.length,
  subplots: Array.prototype.map.call(plots[0].querySelectorAll("g.subplot"), function (g) {
    return g.getAttribute("class").replace("subplot ", "");
  }),
  gpu_titles: texts("text[class$='title']").filter(function (t) { return /^gpu/.test(t); }),
  times: texts("g[class^='x'][class$='tick'] text"),
  shapes: plots[0].querySelectorAll(".shapelayer path").length,
};
"""


def _drawn(driver: WebDriver) -> dict[str, Any]:
    """The incident's chart as plotly drew it (waiting for it to be drawn)."""
    found: list[dict[str, Any]] = []
    _until(driver, lambda d: found.append(d.execute_script(DRAWN)) or found[-1])
    return found[-1]


def _check_chart(drawn: dict[str, Any], gpus: list[str]) -> None:
    """One plot: the timeline, then one panel per GPU with samples, on a time axis."""
    assert drawn["plots"] == 1, drawn
    assert drawn["subplots"] == ["xy", *(f"x{n}y{n}" for n in range(2, len(gpus) + 2))], drawn
    assert [t.split("<br>")[0] for t in drawn["gpu_titles"]] == [f"gpu{g}" for g in gpus]
    assert any(re.fullmatch(r"\d\d:\d\d(:\d\d(\.\d+)?)?", t) for t in drawn["times"]), drawn
    # a failure line through the timeline and each GPU panel at least
    assert drawn["shapes"] >= 1 + len(gpus), drawn


# Where the first Approve button's top is, in CSS pixels from the top of the page.
APPROVE_TOP = """
var button = document.querySelector("form.approve button");
return button ? button.getBoundingClientRect().top + window.scrollY : null;
"""


def _check_plan_in_first_view(driver: WebDriver, action_id: str) -> None:
    """At 1280×900, the page scrolled to its top, the first Approve button is in view (the
    plan sits by the headline fix, above the charts and the post-mortem)."""
    size = driver.get_window_size()
    driver.set_window_size(1280, 900)
    try:
        driver.execute_script("window.scrollTo(0, 0);")
        top = driver.execute_script(APPROVE_TOP)
        inner = driver.execute_script("return window.innerHeight;")
        assert top is not None and top < min(900, inner), (top, inner)
        step = driver.find_element(By.CSS_SELECTOR, "form.approve input[name=id]")
        assert step.get_attribute("value") == action_id
    finally:
        driver.set_window_size(size["width"], size["height"])


def test_approve_a_step_of_the_demo_and_watch_it_run(
    browser: WebDriver, sqlite_url: str, tmp_path: Path
) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"\nscreenshots: {shots}")
    demo = run_advisor("demo", "--db", sqlite_url, input=b"n\n", timeout=300)
    assert b"plan not approved: nothing changed" in demo.stdout, demo.stdout + demo.stderr
    report = run_advisor("explain", "gpu-node-07/vllm-minimax-m25", "--json", "--db", sqlite_url)
    gpus = sorted(json.loads(report.stdout)["gpu_memory"], key=lambda g: (len(g), g))
    assert gpus, "the demo records GPU samples: the chart has a panel for each GPU"
    # The executor acts for the demo's host, through the systemd backend (its drop-ins under
    # tmp_path) on a system bus that is not there, so that the host's own systemd is never
    # touched: the step runs, fails, and says why.
    no_bus = f"unix:path={tmp_path / 'no-system-bus'}"
    env = {"ADVISOR_HOST": "gpu-node-07", "DBUS_SYSTEM_BUS_ADDRESS": no_bus}
    root = tmp_path / "units"
    args = ("--token", TOKEN, "--systemd-root", str(root))
    with served(sqlite_url, *args, env=env, log=tmp_path / "serve.log") as base:
        browser.get(base + "/")
        _shoot(browser, shots / "1-incidents.png")
        pending = browser.find_element(By.CSS_SELECTOR, "tr.pending a.label")
        assert pending.text == "sampler_warmup_oom"
        _navigate(browser, "tr.pending a.label")
        assert "set --max-num-seqs 256" in browser.find_element(By.ID, "fix").text
        _check_chart(_drawn(browser), gpus)
        plan = browser.find_element(By.CSS_SELECTOR, "li.step").get_attribute("data-action")
        assert plan is not None and plan.endswith("#0")
        assert _status(browser, plan) == "proposed"
        _shoot(browser, shots / "2-incident.png")
        _check_plan_in_first_view(browser, plan)

        _navigate(browser, "#login")
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.ID, "name").send_keys("browser-test")
        _navigate(browser, "#login-submit")
        _navigate(browser, f'li.step[data-action="{plan}"] form.approve button')
        assert "approved 1 action(s)" in browser.find_element(By.ID, "note").text
        assert _status(browser, plan) == "approved"
        _shoot(browser, shots / "3-approved.png", plan)

        _navigate(browser, "form.run button")
        browser.execute_script("window.notReloaded = true;")
        _until(browser, lambda d: _status(d, plan) not in ("approved", "started"))
        assert browser.execute_script("return window.notReloaded === true;")  # swapped in place
        assert _status(browser, plan) == "failed"
        detail = browser.find_element(By.CSS_SELECTOR, f'li.step[data-action="{plan}"] .detail')
        assert detail.text.startswith("→ cannot reach systemd at unix:path=")
        _shoot(browser, shots / "4-ran.png", plan)

        # A decision taken elsewhere (the command line) shows up on the open page as well.
        later = plan[:-1] + "3"
        # drawn after the run's refreshes too; kept, to tell the next swap's chart from it
        old_chart = "return (window.oldChart = document.querySelector('#charts .js-plotly-plot'));"
        assert browser.execute_script(old_chart) is not None
        assert run_advisor("approve", later, "--db", sqlite_url).returncode == 0
        _until(browser, lambda d: _status(d, later) == "approved")
        assert browser.execute_script("return window.notReloaded === true;")
        # the chart of the swapped-in main part is a new one, drawn again
        swapped = "return document.querySelector('#charts .js-plotly-plot') !== window.oldChart;"
        assert browser.execute_script(swapped)
        _check_chart(_drawn(browser), gpus)
        _shoot(browser, shots / "5-refreshed.png", later)

        _navigate(browser, 'nav a[href="/fleet"]')
        assert "Crashes per week" in browser.page_source
        for section in ("crashes_by_week", "crashes_by_label", "crashes_by_service"):
            _until(
                browser,
                lambda d, s=section: d.find_element(By.CSS_SELECTOR, f"#chart-{s} .main-svg"),
            )
        headroom = browser.find_element(By.ID, "gpu_headroom_by_service").text
        assert "gpu-node-07" in headroom and re.search(r"\d+\.\d %", headroom), headroom
        _shoot(browser, shots / "6-fleet.png")
        refused = [m for m in browser.get_log("browser") if "Content Security Policy" in str(m)]
        assert refused == []
    assert sorted(p.name for p in shots.iterdir()) == [
        "1-incidents.png",
        "2-incident.png",
        "3-approved.png",
        "4-ran.png",
        "5-refreshed.png",
        "6-fleet.png",
    ]


def test_the_hosts_page_shows_both_hosts_of_a_central_store_and_their_gpus(
    browser: WebDriver, pg_url: str, tmp_path: Path, opener: Callable[[str], EventStore]
) -> None:
    central = opener(pg_url)
    central_with_a_shipped_host(central, tmp_path).close()
    beat(central, "gpu-node-99", [], at_s=time.time() - 600)  # silent for ten minutes
    with served(pg_url, log=tmp_path / "serve.log") as base:
        browser.get(base + "/")
        _navigate(browser, 'nav a[href="/hosts"]')
        rows = {
            r.get_attribute("data-host"): r
            for r in browser.find_elements(By.CSS_SELECTOR, "#hosts tr.host")
        }
        assert sorted(rows) == [CENTRAL, SHIPPED, "gpu-node-99"]
        gpus = {
            h: [g.text for g in r.find_elements(By.CSS_SELECTOR, "li.gpu")] for h, r in rows.items()
        }
        assert gpus == {
            CENTRAL: ["GPU 0: NVIDIA L40S, 48.0 GiB, driver 550.54.15"],
            SHIPPED: [
                f"GPU {i}: NVIDIA H100 80GB HBM3, 80.0 GiB, driver 550.54.15" for i in (0, 1)
            ],
            "gpu-node-99": [],
        }
        state = {h: r.find_element(By.CSS_SELECTOR, "td.state").text for h, r in rows.items()}
        assert state == {CENTRAL: "ok", SHIPPED: "ok", "gpu-node-99": "silent"}
        assert "silent" in (rows["gpu-node-99"].get_attribute("class") or "")
        assert browser.find_element(By.TAG_NAME, "h1").text == "Hosts 3 host(s), 1 silent"
        assert _shoot(browser, tmp_path / "hosts.png") is None
        refused = [m for m in browser.get_log("browser") if "Content Security Policy" in str(m)]
        assert refused == []
