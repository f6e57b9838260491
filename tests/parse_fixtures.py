"""Record producers for the parser process tests (a module of their own: the parser process
imports them by name, as `tests.parse_fixtures`)."""

from __future__ import annotations

from collections.abc import Iterator

from advisor.core.records import Record


def numbered(n: int) -> Iterator[Record]:
    for i in range(1, n + 1):
        event = {
            "stream": "h/u.service",
            "time_us": i,
            "source": "parallel-test",
            "key": i,
            "payload": {"type": "log.recorded", "origin": "text", "message": f"line {i}"},
        }
        yield Record(i, event, None, {"offset": i}, 10)
    yield Record(n + 1, None, "not a log line", {"offset": n + 1}, 10)


def crashing() -> Iterator[Record]:
    yield from numbered(3)
    raise RuntimeError("boom in the parser")
