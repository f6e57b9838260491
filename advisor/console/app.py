"""The console as an ASGI app: its settings (`Console`), routes, templates and the middleware
around them — signed sessions for who logged in, asgi-csrf for every form; plotly.js for the
charts and Prometheus' /metrics beside the pages."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import jinja2
from asgi_csrf import asgi_csrf
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from advisor.console import forms, pages
from advisor.console.auth import Sessions
from advisor.console.charts import PATH as PLOTLY_PATH
from advisor.console.charts import plotly_script
from advisor.console.load import Gate, Pages, Recent, gated, shared
from advisor.console.shape import duration, when
from advisor.reports.render import safe_text

if TYPE_CHECKING:
    from advisor.execution.backends import Backend
    from advisor.execution.notices import Notices
    from advisor.front import Advisor
    from advisor.store import EventStore

HERE = Path(__file__).parent
log = logging.getLogger("advisor.console")
# Every answer's Content-Security-Policy: scripts, styles and requests of the console's own
# origin only (plotly.js at /plotly.js; no page carries an inline script). plotly.js builds
# some functions at run time ('unsafe-eval') and styles its plots inline ('unsafe-inline').
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


@dataclass
class Console:
    """What the console serves and how it acts: the store (and its URL, for the fleet's
    figures), the token (None: nothing may be changed), the backend steps run through
    (`systemd`, or `dry-run`: say what would be done) and whom its `notify` steps tell (the
    settings' `[notify]` targets, as for `advisor remediate`); the live sessions."""

    store: EventStore
    db_url: str
    token: str | None
    backend_name: str = "systemd"
    systemd_root: Path = Path("/etc/systemd/system")
    gpu_twin: Path | None = None
    host: str | None = None
    notices: Notices | None = None
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    sessions: Sessions = field(default_factory=Sessions)
    templates: jinja2.Environment = field(init=False)

    def __post_init__(self) -> None:
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # log lines and unit names are hostile data
        )
        self.templates.filters.update(when=when, duration=duration)

    def front(self) -> Advisor:
        """The front door on the console's store: what its decisions and pages go through."""
        from advisor.front import Advisor

        return Advisor(self.store)

    def backend(self) -> Backend | None:
        """The backend to act through (None for a dry run), as `advisor remediate` builds it."""
        from advisor.front import backend_for

        return backend_for(
            self.backend_name, self.systemd_root, self.gpu_twin, self.host, notices=self.notices
        )


def routes() -> list[Any]:
    return [
        Route("/", shared(pages.incidents_page)),
        Route("/incident/{incident_id:path}", shared(pages.incident_page)),
        Route("/event/{seq}", shared(pages.event_page)),
        Route("/fleet", shared(pages.fleet_page)),
        Route("/hosts", gated(pages.hosts_page)),  # silence depends on the time too
        Route("/api/changes", pages.changes),
        Route(PLOTLY_PATH, plotly_script),
        Route("/login", gated(pages.login_page)),
        Route("/login", forms.login, methods=["POST"]),
        Route("/logout", forms.logout, methods=["POST"]),
        Route("/approve", forms.approve, methods=["POST"]),
        Route("/reject", forms.reject, methods=["POST"]),
        Route("/rollback", forms.rollback, methods=["POST"]),
        Route("/run", forms.run, methods=["POST"]),
        Route("/label", forms.label, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


def _metrics_text(db_url: str) -> Callable[[], bytes]:
    """The metrics `advisor watch --metrics` serves, read from the console's store on its
    own read-only connection."""
    from prometheus_client import generate_latest

    from advisor.front import metrics_registry

    registry = metrics_registry(db_url)
    return lambda: generate_latest(registry)


async def metrics(request: Request) -> Response:
    """/metrics: read once for all the scrapes within half a second, off the event loop."""
    from prometheus_client import CONTENT_TYPE_LATEST

    return Response(await request.app.state.metrics.get(), media_type=CONTENT_TYPE_LATEST)


def _with_policy(app: Any) -> Any:
    """`app` with the console's Content-Security-Policy on every HTTP answer."""

    async def policed(scope: Any, receive: Any, send: Any) -> None:
        async def send_with_policy(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"content-security-policy", CSP.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_with_policy if scope["type"] == "http" else send)

    return policed


def _warm(console: Console) -> None:
    """What the first pages would otherwise wait for: the modules they import (the
    post-mortem, plotly) and the templates compiled."""
    import advisor.reports.incident_charts
    import advisor.reports.postmortem  # noqa: F401
    from advisor.console.charts import warm

    for name in console.templates.list_templates():
        console.templates.get_template(name)
    warm()


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    """While the console starts answering, it gets ready for its first pages in the
    background: the modules and templates (`_warm`), the store's position and the metrics;
    a request that comes first is answered as it would be without."""

    async def warm() -> None:
        try:
            await anyio.to_thread.run_sync(_warm, app.state.console, abandon_on_cancel=True)
            await app.state.newest.get()
            await app.state.metrics.get()
        except Exception as e:  # the pages will say what is wrong when they are asked for
            log.warning("getting ready for the first pages: %s", safe_text(str(e)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(warm)
        yield
        tg.cancel_scope.cancel()


def build_app(console: Console) -> Any:
    """The ASGI app: every POST needs the CSRF cookie's token in its form (or the
    `x-csrftoken` header); a state-changing one needs the console's token too. /metrics
    reads like the pages: no login."""
    app = Starlette(
        routes=[Route("/metrics", metrics), *routes()],
        lifespan=_lifespan,
        middleware=[
            Middleware(
                SessionMiddleware,
                secret_key=console.secret,
                session_cookie="advisor_console",
                same_site="strict",
            )
        ],
    )
    app.state.console = console
    app.state.gate = Gate()
    app.state.pages = Pages()
    app.state.newest = Recent(lambda: console.front().position())
    app.state.metrics = Recent(_metrics_text(console.db_url))
    protected = {r.path for r in routes() if isinstance(r, Route) and "POST" in (r.methods or ())}
    return _with_policy(
        asgi_csrf(
            app,
            signing_secret=console.secret,
            always_protect=protected,
            cookie_samesite="Strict",
        )
    )
