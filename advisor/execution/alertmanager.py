"""Alertmanager as a notification target: advisor posts its alerts to Alertmanager's API
(`POST BASE/api/v2/alerts`), the way Prometheus does, and Alertmanager routes them to its
receivers, groups and silences them.

One alert per incident, named `AdvisorIncident`, labelled with the incident, host, unit and
failure label (the same labels every time, so each notice updates the one alert); its
annotations carry the latest notice. A plan done resolves it (`endsAt` now).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import orjson

from advisor.core.errors import AdvisorError

if TYPE_CHECKING:
    from advisor.execution.notices import Notice

ALERT_NAME: Final = "AdvisorIncident"
PATH: Final = "/api/v2/alerts"


class AlertmanagerError(AdvisorError):
    """Alertmanager refused the alerts or could not be reached."""


def _iso(time_us: int) -> str:
    return datetime.fromtimestamp(time_us / 1e6, UTC).isoformat().replace("+00:00", "Z")


def alert_for(notice: Notice, now_us: int) -> dict[str, Any]:
    """The alert a notice becomes (Alertmanager API v2 `postableAlert`)."""
    labels = {
        "alertname": ALERT_NAME,
        "severity": "info" if notice.resolved else "critical",
        "incident": notice.incident_id or "",
        "host": notice.host or "",
        "unit": notice.unit or "",
        "label": notice.label or "",
    }
    alert: dict[str, Any] = {
        "labels": {k: v for k, v in labels.items() if v},
        "annotations": {"summary": notice.title, "description": notice.body, "kind": notice.kind},
        "startsAt": _iso(notice.started_us or now_us),
    }
    if notice.resolved:
        alert["endsAt"] = _iso(now_us)
    return alert


def post_alerts(base_url: str, alerts: list[dict[str, Any]], timeout_s: float) -> None:
    """POST the alerts to Alertmanager at `base_url`; AlertmanagerError if it fails."""
    url = base_url.rstrip("/") + PATH
    request = urllib.request.Request(
        url,
        data=orjson.dumps(alerts),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
    except urllib.error.HTTPError as e:
        raise AlertmanagerError(f"Alertmanager {base_url}: HTTP {e.code}") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise AlertmanagerError(f"Alertmanager {base_url}: {reason}") from e
