"""The console's pages (GET): incidents, one incident, one raw event, the fleet, the hosts;
and the small endpoint the pages poll to refresh when events arrive."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from advisor.console.auth import authorised
from advisor.console.charts import fleet_charts, incident_charts, plotly_src
from advisor.console.shape import bare_report, headline_fix, incident_filter
from advisor.core.errors import AdvisorError, InputError
from advisor.core.payloads import MAX_KEY
from advisor.core.taxonomy import LABELS
from advisor.reports.render import event_json

LIST_LIMIT = 200


def position(given: str) -> int | None:
    """The event position `given` names (decimal digits, 1 to MAX_KEY: a signed 64-bit
    integer in either engine), else None."""
    if not given.isascii() or not given.isdigit() or len(given) > 19:
        return None
    seq = int(given)
    return seq if 1 <= seq <= MAX_KEY else None


def render(
    request: Request,
    name: str,
    context: dict[str, Any],
    status_code: int = 200,
    seq: int | None = None,
) -> HTMLResponse:
    """A template, autoescaped, with what every page shows (the store's position to poll
    from, the CSRF token for its forms, whether the visitor may change anything). `seq`: the
    store's position taken *before* the page's data was read, so that an event arriving
    meanwhile still makes the page refresh."""
    console = request.app.state.console
    csrf = request.scope.get("csrftoken")
    marker = getattr(request.state, "marker", None)  # a page rendered for all who ask
    if marker is not None:  # (load.Pages): the position it is kept for, its token put in later
        seq = request.state.position
    base = {
        "request": request,
        "seq": console.front().position() if seq is None else seq,
        "csrftoken": marker or (csrf() if csrf is not None else ""),
        "can_act": authorised(request),
        "store_url": console.store.display_url,
        "note": request.session.pop("note", None),
        "plotly_src": plotly_src(),
    }
    html = console.templates.get_template(name).render({**base, **context})
    return HTMLResponse(html, status_code=status_code)


async def changes(request: Request) -> Response:
    """The store's newest position: a page refreshes itself when it moves (read once for
    all the pages polling within half a second, off the event loop: `load.Recent`)."""
    return JSONResponse({"seq": await request.app.state.newest.get()})


def incidents_page(request: Request) -> Response:
    front = request.app.state.console.front()
    seq = front.position()
    flt, problems = incident_filter(request.query_params)
    lines, total = front.incident_list(flt, limit=LIST_LIMIT)
    context = {
        "lines": lines,
        "total": total,
        "pending": sum(1 for line in lines if line.pending),
        "choices": front.incident_choices(),
        "query": request.query_params,
        "problems": problems,
    }
    return render(request, "incidents.html", context, seq=seq)


def incident_page(request: Request) -> Response:
    console = request.app.state.console
    front = console.front()
    seq = front.position()
    given = request.path_params["incident_id"]
    try:
        incident_id = front.resolve_incident(given)
    except InputError as e:  # no incident, or a prefix that fits several
        return render(request, "missing.html", {"what": str(e)}, 404)
    incident = front.incident(incident_id)
    if incident is None:
        return render(request, "missing.html", {"what": f"incident {given}"}, 404)
    service = f"{incident.host}/{incident.unit}"
    problem = None
    samples: dict[str, list[tuple[int, float]]] = {}  # the GPU series `explain` draws too
    try:
        report = front.postmortem(service, incident_id, samples)
    except AdvisorError as e:  # shown from its own row: the page must not hide an incident
        problem = f"the post-mortem cannot be built: {e}"
        report = bare_report(incident, front.incident_plan(incident_id))
    context = {
        "problem": problem,
        "incident": incident,
        "report": report,
        "service": service,
        "fix": headline_fix(report["plan"], service),
        "backend": request.app.state.console.backend_name,
        "charts": incident_charts(report, samples),
        "labels": LABELS,  # what an operator may say it was (the correction form)
    }
    return render(request, "incident.html", context, seq=seq)


def event_page(request: Request) -> Response:
    given = request.path_params["seq"]
    seq = position(given)
    event = request.app.state.console.front().event(seq) if seq is not None else None
    if event is None:
        return render(request, "missing.html", {"what": f"event {given[:40]}"}, 404)
    return render(request, "event.html", {"event": event_json(event)})


def login_page(request: Request) -> Response:
    return render(
        request, "login.html", {"problem": None, "next": request.query_params.get("next")}
    )


def fleet_page(request: Request) -> Response:
    from advisor.console.fleet import figures, stats_report

    console = request.app.state.console
    front = console.front()
    seq = front.position()
    front.refresh()  # the figures are read from the projections
    try:
        report = stats_report(console.db_url)
    except AdvisorError as e:
        return render(request, "missing.html", {"what": f"the fleet's figures: {e}"}, 503)
    context = {"figures": figures(report), "charts": fleet_charts(report)}
    return render(request, "fleet.html", context, seq=seq)


def hosts_page(request: Request) -> Response:
    """Every host of the store with its heartbeat, GPUs and whether it is silent (as
    `advisor hosts`); rendered for each request, since a host falls silent with time alone."""
    from advisor.console.fleet import host_rows

    console = request.app.state.console
    front = console.front()
    seq = front.position()
    front.refresh()  # open incidents and GPU faults are read from the projections
    rows = host_rows(front.hosts())
    silent = sum(1 for r in rows if r["silent"])
    return render(request, "hosts.html", {"hosts": rows, "silent": silent}, seq=seq)
