"""`advisor serve` as a real process on a free port of 127.0.0.1, and a small HTTP client
with a cookie jar that does not follow redirects (the tests look at each answer)."""

from __future__ import annotations

import http.cookiejar
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import advisor_argv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(
    db_url: str, *args: str, env: dict[str, str] | None = None, log: Path | None = None
) -> Iterator[str]:
    """Start `advisor serve --db DB_URL ARGS` and yield its base URL once it answers; stop it
    (SIGTERM) at the end. The server's output goes to `log`."""
    with serving(db_url, *args, env=env, log=log) as (_, base):
        yield base


@contextmanager
def serving(
    db_url: str, *args: str, env: dict[str, str] | None = None, log: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`served`, yielding the process too (a test may stop it itself)."""
    port = free_port()
    argv = advisor_argv("serve", "--db", db_url, "--listen", f"127.0.0.1:{port}", *args)
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(400):  # up to ~100 s on a busy machine: it answers, or it died
            if proc.poll() is not None:
                raise AssertionError(f"advisor serve exited {proc.returncode}: see {log}")
            try:
                urllib.request.urlopen(f"{base}/api/changes", timeout=5).close()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.25)
        else:
            raise AssertionError("advisor serve never answered")
        yield proc, base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if log is not None:
            out.close()  # type: ignore[union-attr]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


@dataclass
class Answer:
    status: int
    body: str
    headers: dict[str, str]


@dataclass
class Client:
    """A browser's part without the browser: cookies kept, redirects not followed."""

    base: str
    jar: http.cookiejar.CookieJar = field(default_factory=http.cookiejar.CookieJar)

    def _open(self, request: urllib.request.Request) -> Answer:
        opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect()
        )
        try:
            with opener.open(request, timeout=60) as r:
                return Answer(r.status, r.read().decode(), dict(r.headers))
        except urllib.error.HTTPError as e:
            return Answer(e.code, e.read().decode(), dict(e.headers))

    def get(self, path: str) -> Answer:
        return self._open(urllib.request.Request(self.base + path))

    def post(
        self, path: str, fields: dict[str, str], headers: dict[str, str] | None = None
    ) -> Answer:
        data = urllib.parse.urlencode(fields).encode()
        request = urllib.request.Request(self.base + path, data=data, headers=headers or {})
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
        return self._open(request)

    def csrf(self) -> str:
        """The CSRF token the console's cookie holds (a page must have been read first)."""
        return next(c.value for c in self.jar if c.name == "csrftoken" and c.value)

    def login(self, token: str, name: str = "tester") -> Answer:
        self.get("/login")
        return self.post("/login", {"csrftoken": self.csrf(), "token": token, "name": name})
