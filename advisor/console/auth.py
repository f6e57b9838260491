"""Who may change anything through the console: a person who gave the token (the `[console]`
token of the settings) at the login form, kept in a signed session cookie, or a client that
sends it as `Authorization: Bearer TOKEN`. Every form also carries a CSRF token (asgi-csrf,
wrapped around the whole app in `advisor.console.app`)."""

from __future__ import annotations

import hmac
import re
from typing import Final

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")  # a name given at the login


def _token_of(request: Request) -> str | None:
    token: str | None = request.app.state.console.token
    return token


def authorised(request: Request) -> bool:
    """The request comes from someone who gave the token (session or bearer header)."""
    token = _token_of(request)
    if token is None:
        return False
    header = request.headers.get("authorization", "")
    if header.startswith("Bearer "):
        return hmac.compare_digest(header[7:].encode(), token.encode())
    return bool(request.session.get("authorised"))


def refusal(request: Request) -> Response | None:
    """Why this state-changing request is refused (401/403), or None: it may go on."""
    if _token_of(request) is None:
        return PlainTextResponse(
            "this console changes nothing: no token is set ([console] token in the settings "
            "file, ADVISOR_CONSOLE__TOKEN, or advisor serve --token)",
            status_code=403,
        )
    if not authorised(request):
        return PlainTextResponse("log in with the console's token first", status_code=401)
    return None


def who(request: Request) -> str:
    """Who decides, as the actions record it (`human:NAME`, NAME given at the login)."""
    return f"human:{request.session.get('name') or 'console'}"
