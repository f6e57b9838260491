"""What the console's templates show, shaped from the views: times, durations, filters read
from a query string. Nothing here writes; the templates escape everything they are given."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from advisor.core.errors import InputError
from advisor.core.timefmt import format_us, parse_time_us
from advisor.execution.subject import headline_step
from advisor.views.read.console import IncidentFilter

if TYPE_CHECKING:
    from advisor.views.read.rows import ActionRow, IncidentView

STEP_KEYS: Final = ("flag", "value", "option", "seconds", "why", "arithmetic")


def when(us: int | None) -> str:
    """A time as the console prints it (ISO 8601 UTC to the millisecond; '—' for none)."""
    return "—" if us is None else format_us(us)


def duration(us: int | None) -> str:
    """A length of time as people read it: 42 s, 3 min 05 s, 2 h 07 min, 3 d 4 h."""
    if us is None:
        return "—"
    s = max(0, us) // 1_000_000
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86_400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86_400} d {s % 86_400 // 3600} h"


def incident_filter(query: Mapping[str, str]) -> tuple[IncidentFilter, list[str]]:
    """The list's filter from the page's query string (host, service as UNIT or HOST/UNIT,
    label, since, until as `advisor events --since` takes them), and what could not be read."""
    problems: list[str] = []
    values: dict[str, Any] = {}
    for key in ("host", "label"):
        if query.get(key):
            values[key] = query[key]
    service = query.get("service", "")
    if service:
        host, _, unit = service.rpartition("/")
        values["unit"] = unit
        if host:
            values["host"] = host
    for key in ("since", "until"):
        text = query.get(key, "")
        if not text:
            continue
        try:
            values[f"{key}_us"] = parse_time_us(text)
        except InputError as e:
            problems.append(f"{key}: {e}")
    return IncidentFilter(**values), problems


def headline_fix(plan: list[dict[str, Any]], service: str) -> tuple[str, str] | None:
    """The plan's one-line fix and the exact command that carries the plan out at a terminal:
    its headline step (`headline_step`: its first change of a setting, or, with none, its
    first main step)."""
    step = headline_step(plan, lambda s: str(s["kind"]), lambda s: bool(s["alternative"]))
    if step is None:
        return None
    what = step["kind"]
    if step.get("flag"):
        what = f"set {step['flag']} {step.get('value')}"
    elif step.get("option"):
        what = f"set {step['option']}={step.get('value')}"
    return f"{what}: {step.get('why', '')}", f"advisor remediate {shlex.quote(service)}"


def bare_report(incident: IncidentView, plan: list[ActionRow]) -> dict[str, Any]:
    """The incident page's report from the incident's own row and plan, for an incident whose
    post-mortem cannot be built (its unit is no unit name `advisor explain` takes, say):
    no timeline, no GPU memory, the evidence without times."""
    keys = ("incident_id", "host", "unit", "label", "confidence", "phase", "runs", "status")
    return {
        "incident": {k: getattr(incident, k) for k in keys},
        "opened": when(incident.opened_us),
        "facts": {k: v for k, v in (incident.facts or {}).items() if v is not None},
        "evidence": [
            {"time": None, "seq": e["seq"], "text": e["text"]} for e in incident.evidence or []
        ],
        "timeline": [],
        "plan": [
            {
                "action_id": r.action_id,
                "kind": r.kind,
                "status": r.status,
                "alternative": r.alternative,
                "detail": r.detail,
                **{k: v for k, v in r.spec.items() if k in STEP_KEYS},
            }
            for r in plan
        ],
        "gpu_memory": {},
        "gpu_faults": [],
        "similar": [],
    }
