"""The console's forms (POST): logging in and out, the decisions on a plan — approve a step
or the whole plan, reject a step, choose an alternative, roll back a step's drop-in, run what
is approved — and an operator's correction of an incident's label. Each goes through the
front door (`advisor.front.Advisor`: `decide`, `run`, `label`) to the very function the
command line calls (`advisor approve`, `reject`, `rollback`, `remediate`, `label`),
through the same backend (`backend_for`, telling the `[notify]` targets of the settings) and
taking ids as it does (the whole id, a prefix, a prefix of the short id); a plan runs in the
background and the page follows its events as they arrive. The store work runs off the event
loop, through the console's Gate. The note a decision leaves names ids by their short ids."""

from __future__ import annotations

import logging
from typing import Any

from starlette.background import BackgroundTask
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from advisor.console.auth import (
    NAME,
    address_of,
    refusal,
    sessions_of,
    token_matches,
    too_many,
    who,
)
from advisor.console.load import Busy, busy, gate_of
from advisor.console.pages import render
from advisor.core.errors import AdvisorError
from advisor.core.ids import shorten_ids
from advisor.reports.render import safe_text

log = logging.getLogger("advisor.console")


async def _page(request: Request, name: str, context: dict[str, Any], status: int) -> Response:
    """A page rendered off the event loop (it reads the store's position)."""
    try:
        return await gate_of(request).run(render, request, name, context, status)
    except Busy:
        return busy()


async def login(request: Request) -> Response:
    """A new session for the token's bearer; a failure counts against the address."""
    sessions, address = sessions_of(request), address_of(request)
    wait = sessions.retry_after(address)
    if wait > 0:
        return too_many(wait)
    form = await request.form()
    token = request.app.state.console.token
    name = str(form.get("name", "")).strip()
    ok = token is not None and token_matches(str(form.get("token", "")), token)
    if not ok:
        sessions.failed(address)
    if not ok or (name and not NAME.fullmatch(name)):
        problem = "wrong token" if not ok else "a name is letters, digits, . _ - (64 at most)"
        context = {"problem": problem, "next": form.get("next")}
        return await _page(request, "login.html", context, 401)
    sessions.succeeded(address)
    sessions.close(request.session.get("sid"))  # a session id is never reused
    request.session.clear()
    request.session["sid"] = sessions.open()
    request.session["name"] = name or "console"
    return RedirectResponse(_back(form), status_code=303)


async def logout(request: Request) -> Response:
    """End the session here and on the server: the cookie replayed approves nothing."""
    sessions_of(request).close(request.session.get("sid"))
    request.session.clear()
    return RedirectResponse("/", status_code=303)


def _back(form: FormData) -> str:
    """Where to go after a form: the page it came from, only ever inside the console."""
    target = str(form.get("next") or "/")
    elsewhere = not target.startswith("/") or target.startswith("//") or "\\" in target
    return "/" if elsewhere or any(ord(c) < 32 for c in target) else target


def _field(form: FormData, name: str) -> str:
    return str(form.get(name, "")).strip()


async def _decide(request: Request, kind: str) -> Response:
    """Check who asks, then record the decision `kind` as the command line would."""
    refused = refusal(request)
    if refused is not None:
        return refused
    form = await request.form()
    ident, why = _field(form, "id"), _field(form, "why")
    if not ident:
        return await _page(request, "missing.html", {"what": "which step (no id given)"}, 400)
    console = request.app.state.console
    task = None
    try:
        if kind == "run":
            note, task = await gate_of(request).run(_run_in_background, console, ident)
        else:
            chosen = _field(form, "label")
            note = await gate_of(request).run(
                _record, console, kind, ident, why, who(request), chosen
            )
    except Busy:
        return busy()
    except AdvisorError as e:
        note = f"{kind} {ident}: {e}"
    request.app.state.newest.expire()  # the pages show what was just written at once
    request.session["note"] = safe_text(shorten_ids(note))  # short ids, as people read them
    return RedirectResponse(_back(form), status_code=303, background=task)


def _record(console: Any, kind: str, ident: str, why: str, by: str, label: str = "") -> str:
    if kind == "label":
        done = console.front().label(ident, label, why, by).payload
        return f"labelled {done.incident_id} {done.label} (was {done.replaces or 'no label'})"
    return str(
        console.front().decide(
            kind, ident, by=by, why=why, backend=console.backend, systemd_root=console.systemd_root
        )
    )


def _run_in_background(console: Any, ident: str) -> tuple[str, BackgroundTask | None]:
    front = console.front()
    plan_id = front.plan_of(ident)
    backend = console.backend()
    if backend is None:
        lines = front.preview(plan_id, console.systemd_root, console.gpu_twin, console.host)
        return "dry run (nothing changed or recorded): " + "; ".join(lines), None
    return f"running the approved steps of {plan_id}", BackgroundTask(_carry_out, console, plan_id)


def _carry_out(console: Any, plan_id: str) -> None:
    """Run the plan (in the background: the page follows its events)."""
    try:
        outcome = console.front().run(console.backend(), plan_id)
    except AdvisorError as e:  # the executor recorded what it could; say the rest
        log.warning("running %s: %s", safe_text(plan_id), safe_text(str(e)))
        return
    log.info("plan %s: %s", safe_text(plan_id), outcome.report.state)


async def approve(request: Request) -> Response:
    return await _decide(request, "approve")


async def reject(request: Request) -> Response:
    return await _decide(request, "reject")


async def rollback(request: Request) -> Response:
    return await _decide(request, "rollback")


async def run(request: Request) -> Response:
    return await _decide(request, "run")


async def label(request: Request) -> Response:
    """An operator's correction: incident `id` is `label`, because `why`."""
    return await _decide(request, "label")
