"""Alertmanager as a notification target: advisor posts its alerts to Alertmanager's API
(`POST BASE/api/v2/alerts`), the way Prometheus does, and Alertmanager routes them to its
receivers, groups and silences them.

One alert per incident, named `AdvisorIncident`, labelled with the incident (its id and its
short id), host, unit and failure label (the same labels every time, so each notice — a
`notify` step's too — updates the one alert, and Alertmanager never merges two incidents);
its annotations carry the latest notice. A plan done resolves it (`endsAt` now).
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import orjson

from advisor.core.errors import AdvisorError
from advisor.core.ids import short_id

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
        "short_id": short_id(notice.incident_id) if notice.incident_id else "",
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


def shown(base_url: str) -> str:
    """The URL without a user or password in it, to print."""
    parts = urllib.parse.urlsplit(base_url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def post_alerts(base_url: str, alerts: list[dict[str, Any]], timeout_s: float) -> None:
    """POST the alerts to Alertmanager at `base_url` (`http://USER:PASSWORD@HOST:PORT`: sent
    with basic authentication); AlertmanagerError if it fails."""
    parts = urllib.parse.urlsplit(base_url)
    headers = {"Content-Type": "application/json"}
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    url = shown(base_url).rstrip("/") + PATH
    request = urllib.request.Request(url, data=orjson.dumps(alerts), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
    except urllib.error.HTTPError as e:
        raise AlertmanagerError(f"Alertmanager {shown(base_url)}: HTTP {e.code}") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise AlertmanagerError(f"Alertmanager {shown(base_url)}: {reason}") from e
