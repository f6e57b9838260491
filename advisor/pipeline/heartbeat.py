"""The agent's heartbeat in `advisor watch`: one `agent.heartbeat` event every
`interval_s` seconds (the settings' `heartbeat_s`), in a thread of its own.

It is cheap: it asks NVML nothing itself. The GPU sampler's ticks tell it which GPUs there
are (`saw`), and the sampler's `driver_version()` (asked once) which driver; on a host
without GPU sampling its GPU list is empty. The first heartbeat waits for the first GPU tick
(a few seconds at most), so that it already lists the GPUs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from advisor.core.events import NewEvent
from advisor.core.heartbeat import AgentHeartbeat, HeartbeatGpu, agent_version, heartbeat_event
from advisor.core.payloads import GpuSampled

if TYPE_CHECKING:
    from advisor.store import EventStore

FIRST_TICK_WAIT_S: Final = 10.0  # the first heartbeat waits this long at most for the GPUs


class Heartbeat:
    """The heartbeats of `host` into `store`; `saw` is the GPU sampler's `on_tick`."""

    def __init__(
        self,
        store: EventStore,
        host: str,
        interval_s: float,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.host = host
        self.interval_s = interval_s
        self.clock = clock
        self.version = agent_version()
        self.driver: Callable[[], str | None] = lambda: None
        self._gpus: tuple[HeartbeatGpu, ...] = ()
        self._seen: tuple[tuple[int, str | None, str | None, int], ...] = ()
        self._lock = threading.Lock()
        self.ticked = threading.Event()

    def saw(self, _time_us: int, samples: Sequence[GpuSampled]) -> None:
        """The GPUs of a sampler tick; the GPU list is built again only when it changed."""
        seen = tuple((s.index, s.name, s.uuid, s.memory_total_bytes) for s in samples)
        if seen != self._seen:
            driver = self.driver()
            gpus = tuple(
                HeartbeatGpu(index=i, name=n, uuid=u, memory_total_bytes=m, driver_version=driver)
                for i, n, u, m in sorted(seen)
            )
            with self._lock:
                self._seen, self._gpus = seen, gpus
        self.ticked.set()

    def beat(self) -> AgentHeartbeat:
        """Record one heartbeat now; the heartbeat recorded."""
        with self._lock:
            gpus = self._gpus
        beat = AgentHeartbeat(
            host=self.host, agent_version=self.version, interval_s=self.interval_s, gpus=gpus
        )
        time_us = int(self.clock() * 1_000_000)
        self.store.append([NewEvent.model_validate(heartbeat_event(time_us, beat))])
        return beat

    def run(self, stop: threading.Event, say: Callable[[str], None], gpus: bool) -> None:
        """Beat until `stop`: at once (after the first GPU tick, with `gpus`), then every
        `interval_s`. A store error is said and the next beat tried."""
        if gpus:  # the first tick, or the bound, or a stop meanwhile
            deadline = time.monotonic() + min(FIRST_TICK_WAIT_S, self.interval_s)
            while not self.ticked.wait(0.2) and not stop.is_set():
                if time.monotonic() > deadline:
                    break
        while not stop.is_set():
            try:
                self.beat()
            except Exception as e:  # the store or the disk: said, and tried again next beat
                say(f"heartbeat: {type(e).__name__}: {e}")
            if stop.wait(self.interval_s):
                return


def start_heartbeat(
    heart: Heartbeat, stop: threading.Event, say: Callable[[str], None], *, gpus: bool
) -> threading.Thread:
    thread = threading.Thread(
        target=heart.run, args=(stop, say, gpus), name="heartbeat", daemon=True
    )
    thread.start()
    return thread
