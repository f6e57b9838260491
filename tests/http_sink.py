"""A real HTTP server on 127.0.0.1 that records what is posted to it: the notification tests'
sink (an Apprise JSON webhook, an Alertmanager)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson


@dataclass
class Sink:
    port: int
    posts: list[tuple[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)  # each post's Authorization
    status: int = 200  # what the sink answers
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bodies(self, path: str) -> list[Any]:
        with self.lock:
            return [body for p, body in self.posts if p.split("?")[0] == path]


def serve_sink() -> Iterator[Sink]:
    sink = Sink(0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = orjson.loads(self.rfile.read(length) or b"null")
            with sink.lock:
                sink.posts.append((self.path, body))
                sink.auth.append(self.headers.get("Authorization"))
            self.send_response(sink.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
