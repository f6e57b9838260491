"""The console under load: every page's store work runs off the event loop, in worker
threads, at most `SLOTS` at once — fewer than the store's connection pool holds (SQLAlchemy's
5, and 10 more on overflow), so that the pool is never exhausted — with at most `QUEUE`
requests waiting behind them. A request that finds the queue full, or waits `WAIT_S` without
a turn, is answered 503 with `Retry-After` at once: under any load every request is answered,
and the event loop stays free to accept, answer and shut down.

The figures many clients poll (/api/changes, /metrics) are computed once for all the requests
arriving within `FRESH_S` of each other (`Recent`), each in one worker thread of its own
rather than behind the pages' queue: a page polling for changes is answered at once however
many pages wait (one more store connection: the pool's fifth)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, Generic, TypeVar

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

T = TypeVar("T")

SLOTS: Final = 4  # worker threads on the store at once (the pool holds 5)
QUEUE: Final = 256  # requests waiting for a slot; one more is answered 503 at once
WAIT_S: Final = 10.0  # the longest a request waits for a slot before its 503
RETRY_AFTER_S: Final = 1
FRESH_S: Final = 0.5  # how old a shared figure (/api/changes, /metrics) may be


class Busy(Exception):
    """Every slot is taken and the queue is full, or the wait ran out."""


class Gate:
    """At most `slots` calls in worker threads at once, `queue` more waiting (see above)."""

    def __init__(self, slots: int = SLOTS, queue: int = QUEUE, wait_s: float = WAIT_S) -> None:
        self.slots, self.queue, self.wait_s = slots, queue, wait_s
        self.waiting = 0
        self._semaphore: anyio.Semaphore | None = None  # made in the event loop, when first used

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker thread once a slot is free; Busy when none comes."""
        if self._semaphore is None:
            self._semaphore = anyio.Semaphore(self.slots)
        semaphore = self._semaphore
        if semaphore.value == 0 and self.waiting >= self.queue:
            raise Busy
        self.waiting += 1
        try:
            with anyio.move_on_after(self.wait_s) as waited:
                await semaphore.acquire()
            if waited.cancelled_caught:
                raise Busy
        finally:
            self.waiting -= 1
        try:
            # abandon_on_cancel: a server shutting down does not wait for a page's thread
            return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
        finally:
            semaphore.release()


def busy() -> Response:
    return PlainTextResponse(
        "the console is busy: try again in a moment",
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


def gate_of(request: Request) -> Gate:
    gate: Gate = request.app.state.gate
    return gate


def gated(page: Callable[[Request], Response]) -> Callable[[Request], Awaitable[Response]]:
    """An endpoint running the blocking `page` through the app's Gate (503 when busy)."""

    async def endpoint(request: Request) -> Response:
        try:
            return await gate_of(request).run(page, request)
        except Busy:
            return busy()

    endpoint.__name__ = endpoint.__qualname__ = page.__name__
    endpoint.__doc__ = page.__doc__
    return endpoint


class Recent(Generic[T]):
    """A figure computed at most once per `fresh_s`, in one worker thread at a time: while it
    is computed anew, the requests that arrive meanwhile get the last value at once (only
    the very first requests wait for the first value)."""

    def __init__(self, compute: Callable[[], T], fresh_s: float = FRESH_S) -> None:
        self.compute = compute
        self.fresh_s = fresh_s
        self._value: T | None = None
        self._has = False
        self._at = float("-inf")
        self._computing: anyio.Event | None = None

    async def get(self) -> T:
        stale = time.monotonic() - self._at > self.fresh_s
        while stale or not self._has:
            if self._computing is None:
                await self._refresh()
                break
            if self._has:  # being computed anew: the last value meanwhile
                break
            await self._computing.wait()
            stale = False
        return self._value  # type: ignore[return-value]

    async def _refresh(self) -> None:
        self._computing = computing = anyio.Event()
        try:
            self._value = await anyio.to_thread.run_sync(self.compute, abandon_on_cancel=True)
            self._has, self._at = True, time.monotonic()
        finally:
            self._computing = None
            computing.set()
