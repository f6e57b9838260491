"""Who may change anything through the console: a person who gave the token (the `[console]`
token of the settings) at the login form, or a client that sends it as
`Authorization: Bearer TOKEN`. Every form also carries a CSRF token (asgi-csrf, wrapped around
the whole app in `advisor.console.app`).

A login opens a session: a random id kept in the signed session cookie *and* in `Sessions`,
in the memory of the console's process. A request is authorised only while its id is there:
logging out takes it away, so the cookie replayed afterwards approves nothing (and a restart
of the console logs everyone out). Failed logins are counted per client address: after
`FREE_TRIES` of them each further try waits twice as long as the last (up to
`LONGEST_WAIT_S`), and one made sooner gets 429 with `Retry-After` without the token being
looked at (a wrong `Authorization: Bearer` token counts as a failed login too). Tokens are
compared in constant time (`hmac.compare_digest`)."""

from __future__ import annotations

import hmac
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Final

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")  # a name given at the login
FREE_TRIES: Final = 5  # failed logins from one address before each further one must wait
LONGEST_WAIT_S: Final = 300.0
_REMEMBERED: Final = 10_000  # addresses whose failures are kept (the oldest forgotten first)


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0

    def wait_s(self) -> float:
        """How long after the last failure the next try may come."""
        if self.count < FREE_TRIES:
            return 0.0
        return float(min(LONGEST_WAIT_S, 2.0 ** (self.count - FREE_TRIES)))


@dataclass
class Sessions:
    """The console's live sessions and the failed logins per client address (in memory:
    see the module's docstring)."""

    live: set[str] = field(default_factory=set)
    failures: dict[str, _Failures] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def open(self) -> str:
        ident = secrets.token_urlsafe(24)
        with self.lock:
            self.live.add(ident)
        return ident

    def close(self, ident: object) -> None:
        with self.lock:
            self.live.discard(str(ident))

    def is_live(self, ident: object) -> bool:
        with self.lock:
            return isinstance(ident, str) and ident in self.live

    def retry_after(self, address: str) -> float:
        """Seconds before `address` may try to log in again (0: now)."""
        with self.lock:
            failed = self.failures.get(address)
            if failed is None:
                return 0.0
            return max(0.0, failed.last + failed.wait_s() - time.monotonic())

    def failed(self, address: str) -> None:
        with self.lock:
            failed = self.failures.pop(address, None) or _Failures()
            failed.count += 1
            failed.last = time.monotonic()
            self.failures[address] = failed  # the newest last: the oldest go first
            while len(self.failures) > _REMEMBERED:
                del self.failures[next(iter(self.failures))]

    def succeeded(self, address: str) -> None:
        with self.lock:
            self.failures.pop(address, None)


def sessions_of(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.console.sessions
    return sessions


def address_of(request: Request) -> str:
    return request.client.host if request.client is not None else "?"


def _token_of(request: Request) -> str | None:
    token: str | None = request.app.state.console.token
    return token


def token_matches(given: str, token: str) -> bool:
    """`given` is the token (compared in constant time)."""
    return hmac.compare_digest(given.encode(), token.encode())


def authorised(request: Request) -> bool:
    """The request comes from someone who gave the token (a live session, or the bearer
    header)."""
    token = _token_of(request)
    if token is None:
        return False
    header = request.headers.get("authorization", "")
    if header.startswith("Bearer "):
        return token_matches(header[7:], token)
    return sessions_of(request).is_live(request.session.get("sid"))


def refusal(request: Request) -> Response | None:
    """Why this state-changing request is refused (401/403), or None: it may go on."""
    if _token_of(request) is None:
        return PlainTextResponse(
            "this console changes nothing: no token is set ([console] token in the settings "
            "file, ADVISOR_CONSOLE__TOKEN, or advisor serve --token)",
            status_code=403,
        )
    bearer = request.headers.get("authorization", "").startswith("Bearer ")
    sessions, address = sessions_of(request), address_of(request)
    if bearer and (wait := sessions.retry_after(address)) > 0:
        return too_many(wait)
    if not authorised(request):
        if bearer:  # a wrong token tried: counted as a failed login
            sessions.failed(address)
        return PlainTextResponse("log in with the console's token first", status_code=401)
    return None


def too_many(wait_s: float) -> Response:
    """429: too many failed logins from this address; try after `wait_s`."""
    seconds = max(1, int(wait_s + 0.999))
    return PlainTextResponse(
        f"too many failed logins from this address: try again in {seconds} s",
        status_code=429,
        headers={"Retry-After": str(seconds)},
    )


def who(request: Request) -> str:
    """Who decides, as the actions record it (`human:NAME`, NAME given at the login)."""
    return f"human:{request.session.get('name') or 'console'}"
