"""The console under load: every page's store work runs off the event loop, in worker
threads, at most `SLOTS` at once — fewer than the store's connection pool holds (SQLAlchemy's
5, and 10 more on overflow), so that the pool is never exhausted — with at most `QUEUE`
requests waiting behind them. A request that finds the queue full, or waits `WAIT_S` without
a turn, is answered 503 with `Retry-After` at once: under any load every request is answered,
and the event loop stays free to accept, answer and shut down.

The figures many clients poll (/api/changes, /metrics) are computed once for all the requests
arriving within `FRESH_S` of each other (`Recent`), each in one worker thread of its own
rather than behind the pages' queue: a page polling for changes is answered at once however
many pages wait (one more store connection: the pool's fifth).

The pages themselves (the list, an incident, the fleet, an event) are rendered once per store
position (`Pages`): the store is append-only, so a page read at position N is the page for
every request that finds the store still at N. Requests for a page being rendered wait for
that one rendering (or, when it is a newer rendering of a page already rendered, get the
last one meanwhile); requests for a rendered one are answered from the event loop, without a
worker thread or a store connection. Who is asking changes only the CSRF token in the page's
forms (put in per request) and whether the forms may act (part of the page's key)."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from advisor.console.auth import authorised

T = TypeVar("T")

SLOTS: Final = 4  # worker threads on the store at once (the pool holds 5)
QUEUE: Final = 256  # requests waiting for a slot; one more is answered 503 at once
WAIT_S: Final = 10.0  # the longest a request waits for a slot before its 503
RETRY_AFTER_S: Final = 1
FRESH_S: Final = 0.5  # how old a shared figure (/api/changes, /metrics) may be
KEPT_PAGES: Final = 256  # rendered pages kept (the least recently asked for go first)
KEPT_BYTES: Final = 64 << 20  # and their bodies together (an incident's page: ~100 kB)


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

    def expire(self) -> None:
        """The next `get` computes the figure anew (the console itself just wrote)."""
        self._at = float("-inf")

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


@dataclass
class _Rendered:
    position: int
    done: anyio.Event
    body: str = ""
    status: int = 200
    failed: Exception | None = None
    abandoned: bool = False  # its renderer was cancelled (its client went away)


class Pages:
    """Rendered pages by (path, query, may act), each for the store position it was read at
    (see the module's docstring). While a page is rendered anew for a newer position, the
    requests for it get the last rendering at once (its position is older: the page refreshes
    itself when the new one is there); only a page never rendered is waited for. `marker`
    stands for the CSRF token in a rendered page: a random string per console, so that no log
    line shown in a page can spell it."""

    def __init__(self, kept: int = KEPT_PAGES, kept_bytes: int = KEPT_BYTES) -> None:
        self.kept, self.kept_bytes = kept, kept_bytes
        self.marker = f"csrf-{secrets.token_hex(16)}"
        self._pages: OrderedDict[tuple[str, str, bool], _Rendered] = OrderedDict()
        self._rendering: dict[tuple[str, str, bool], _Rendered] = {}
        self._bytes = 0  # the rendered bodies kept, together

    def _keep(self, key: tuple[str, str, bool], page: _Rendered) -> None:
        """`page` under `key`, the least recently asked for forgotten beyond the bounds."""
        self._forget(key)
        self._pages[key] = page
        self._bytes += len(page.body)
        while self._pages and (len(self._pages) > self.kept or self._bytes > self.kept_bytes):
            self._forget(next(iter(self._pages)))

    def _forget(self, key: tuple[str, str, bool]) -> None:
        page = self._pages.pop(key, None)
        if page is not None:
            self._bytes -= len(page.body)

    async def get(
        self,
        key: tuple[str, str, bool],
        position: int,
        render: Callable[[], Awaitable[Response]],
    ) -> tuple[str, int]:
        """(the page's body, its status) for `key` read at `position` or later — or, while
        that is being rendered, the last rendering — rendered by `render` only when no
        request has rendered (or is rendering) it yet."""
        while True:
            kept = self._pages.get(key)
            if kept is not None and (kept.position >= position or key in self._rendering):
                self._pages.move_to_end(key)
                return kept.body, kept.status
            page = self._rendering.get(key)
            if page is None:
                return await self._render(key, position, render)
            await page.done.wait()
            if page.failed is not None:
                raise page.failed
            if not page.abandoned:
                return page.body, page.status
            # its renderer's client went away: the page is asked for again (maybe rendered here)

    async def _render(
        self, key: tuple[str, str, bool], position: int, render: Callable[[], Awaitable[Response]]
    ) -> tuple[str, int]:
        page = self._rendering[key] = _Rendered(position, anyio.Event())
        try:
            response = await render()
            page.body, page.status = bytes(response.body).decode(), response.status_code
            self._keep(key, page)
        except Exception as e:  # every waiter hears it; the next request renders anew
            page.failed = e
            raise
        except BaseException:  # cancelled: the waiters ask again
            page.abandoned = True
            raise
        finally:
            del self._rendering[key]
            page.done.set()
        return page.body, page.status


def shared(page: Callable[[Request], Response]) -> Callable[[Request], Awaitable[Response]]:
    """`gated(page)`, rendered once per store position for everyone asking for the same page
    (`Pages`); a request carrying a note to show (after a login or a decision) renders its
    own."""
    alone = gated(page)

    async def endpoint(request: Request) -> Response:
        if request.session.get("note") is not None:
            return await alone(request)
        pages: Pages = request.app.state.pages
        gate = gate_of(request)
        position = await request.app.state.newest.get()
        request.state.position, request.state.marker = position, pages.marker
        key = (request.url.path, request.url.query, authorised(request))

        try:
            body, status = await pages.get(key, position, lambda: gate.run(page, request))
        except Busy:
            return busy()
        csrf = request.scope.get("csrftoken")
        return HTMLResponse(body.replace(pages.marker, csrf() if csrf else ""), status)

    endpoint.__name__ = endpoint.__qualname__ = page.__name__
    endpoint.__doc__ = page.__doc__
    return endpoint
