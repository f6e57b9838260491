"""The alert rules in deploy/prometheus/ under Prometheus's own tool: every rule has
`promtool test rules` fixtures (deploy/prometheus/tests/*.yml) in which it fires where it
should and stays quiet where it should not, and they pass; the rules file passes `promtool
check rules`; and the exposition of a real store (heartbeats, a shipped host) passes
`promtool check metrics`. promtool comes with Debian's `prometheus` package (.ci/run installs
it); without it these tests skip, saying so."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest

from advisor.fleet.ship import ship
from advisor.pipeline.heartbeat import Heartbeat
from advisor.pipeline.metrics import registry_for
from advisor.store import EventStore, open_store
from tests.conftest import ROOT

RULES = ROOT / "deploy/prometheus/advisor-rules.yml"
FIXTURES = sorted((ROOT / "deploy/prometheus/tests").glob("*.yml"))
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed: apt-get install prometheus (.ci/run installs it)",
)


def _promtool(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], input=stdin, capture_output=True, timeout=120, check=False
    )


def test_every_rule_has_a_firing_and_a_quiet_case() -> None:
    alerts = {
        rule["alert"]
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for rule in group["rules"]
    }
    fires: set[str] = set()
    quiet: set[str] = set()
    for path in FIXTURES:
        loaded = yaml.safe_load(path.read_text())
        assert loaded["rule_files"] == ["../advisor-rules.yml"], path.name
        for test in loaded["tests"]:
            for case in test["alert_rule_test"]:
                (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    assert len(alerts) == 10
    assert fires == alerts, f"no firing case for {sorted(alerts - fires)}"
    assert quiet == alerts, f"no quiet case for {sorted(alerts - quiet)}"


@needs_promtool
def test_the_rules_pass_promtool_check_and_their_fixtures() -> None:
    checked = _promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules = sum(len(g["rules"]) for g in yaml.safe_load(RULES.read_text())["groups"])
    assert rules == 10 and f"SUCCESS: {rules} rules found".encode() in checked.stdout, (
        checked.stdout
    )
    tested = _promtool("test", "rules", *map(str, FIXTURES))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.count(b"SUCCESS") == len(FIXTURES) == 4, tested.stdout


@needs_promtool
def test_a_broken_rule_fails_its_fixture(tmp_path: Path) -> None:
    """The fixtures can fail: the ship-stuck threshold raised tenfold, it never fires."""
    (tmp_path / "tests").mkdir()
    text = RULES.read_text().replace("ship_lag_seconds > 600", "ship_lag_seconds > 6000")
    assert text != RULES.read_text()
    (tmp_path / "advisor-rules.yml").write_text(text)
    fleet = tmp_path / "tests/fleet.yml"
    shutil.copy(ROOT / "deploy/prometheus/tests/fleet.yml", fleet)
    tested = _promtool("test", "rules", str(fleet))
    assert tested.returncode == 1
    said = tested.stdout + tested.stderr
    assert b"alertname: AdvisorShipStuck, time: 30m" in said, said


@needs_promtool
def test_the_exposition_passes_promtool_check_metrics(
    diagnosed: EventStore, sqlite_url: str, tmp_path: Path
) -> None:
    Heartbeat(diagnosed, "gpu-node-07", 60.0).beat()
    other = open_store(f"sqlite:///{tmp_path / 'other.db'}")
    Heartbeat(other, "gpu-node-08", 60.0).beat()
    ship(other, diagnosed, "gpu-node-08")
    other.close()
    registry = registry_for(lambda: open_store(sqlite_url, read_only=True), "sqlite:///c.db")
    text = generate_latest(registry)
    assert b'advisor_host_ship_lag_seconds{host="gpu-node-08"}' in text
    checked = _promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
