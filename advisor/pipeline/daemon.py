"""The one daemon a host runs (`advisor watch`): journal follow, GPU sampling, live diagnosis
and proposals, with an auto-remediation policy what it allows, and shipping to a central
store; it says (and notifies, `advisor.pipeline.telling`) when it opens an incident or a plan
waits for a person, and serves Prometheus metrics (`advisor.pipeline.metrics`). It stops on
SIGINT or SIGTERM, committing what it has."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.core.errors import InputError, StoreError
from advisor.core.heartbeat import DEFAULT_INTERVAL_S
from advisor.pipeline.signals import signals_set
from advisor.reports.render import safe_text

if TYPE_CHECKING:
    from advisor.execution.discover import Found, InferenceServers
    from advisor.execution.notices import Notices
    from advisor.fleet.selection import Selection as ShipSelection
    from advisor.pipeline.heartbeat import Heartbeat
    from advisor.pipeline.sdnotify import Notifier
    from advisor.planning.policy import Policy
    from advisor.store import EventStore
    from ingest.follow import Selection

Say = Callable[[str], None]


@dataclass(frozen=True)
class AutoSetup:
    """`--auto`: the policy, its file's name (approvals are `policy:<name>`), the backend."""

    policy: Policy
    name: str
    backend: str  # systemd | dry-run
    systemd_root: Path


@dataclass(frozen=True)
class WatchConfig:
    units: tuple[str, ...]  # globs; none: the inference servers, discovered
    journal_files: tuple[Path, ...]  # follow these instead of the system journal
    gpu_interval_s: float
    no_gpu: bool
    ship_to: str | None
    host: str
    gpu_twin: Path | None
    auto: AutoSetup | None
    notices: Notices | None = None  # whom to tell (the settings' [notify])
    metrics: str | None = None  # HOST:PORT to serve /metrics on
    key: Path | None = None  # signs the heads (`--key`, the `key` setting); None: the store's
    heartbeat_s: float = DEFAULT_INTERVAL_S  # an `agent.heartbeat` this often
    ship_lines: str = "fleet"  # what the shipper ships (advisor.fleet.selection.MODES)
    ship_gpu_every_s: float = 60.0  # a GPU's samples shipped at most this often (fleet mode)


@dataclass
class Watching:
    """What is followed: the journal selection, the checkpoint to resume from, in words."""

    selection: Selection | None
    resume_from: tuple[str, ...]
    text: str


def watch(config: WatchConfig, open_store: Callable[[], EventStore], say: Say) -> None:
    """Run the daemon until SIGINT or SIGTERM. `open_store` is called once what is missing
    (journalctl, a journal file) has been refused; `say` prints a line for the operator.
    StoreError after stopping if the shipper stopped while watching."""
    from advisor.core.journalctl import journalctl_path
    from advisor.pipeline.heartbeat import Heartbeat, start_heartbeat
    from advisor.pipeline.metrics import parse_listen
    from advisor.pipeline.sdnotify import Notifier

    journalctl_path()
    for jf in config.journal_files:
        if not jf.exists():
            raise InputError(f"--journal-file {jf}: no such file")
    if config.metrics is not None:
        parse_listen(config.metrics)
    notifier = Notifier(os.environ)
    watching = _watching(config, notifier, say)
    store = open_store()
    stop_metrics = _serve_metrics(store, config, say)
    finish = _start_processing(store, config, say)
    stop = threading.Event()
    threads = _Threads(stop)
    heart = Heartbeat(store, config.host, config.heartbeat_s)
    if not config.no_gpu:
        threads.gpu = start_gpu(
            store, config.host, config.gpu_interval_s, stop, config.gpu_twin, say, heart
        )
    threads.heartbeat = start_heartbeat(heart, stop, say, gpus=threads.gpu is not None)
    if config.ship_to is not None:
        threads.start_shipping(store, config, notifier, say)
    stopped = False
    follow_stop = threading.Event()
    try:
        # SIGTERM or Ctrl-C stops the daemon cleanly from the moment it says it is ready:
        # the follower ends between two entries and commits what it holds (a second signal
        # interrupts at once).
        with signals_set(follow_stop):
            notifier.ready(f"watching {watching.text}")
            notifier.keep_alive()
            say(f"watching {safe_text(watching.text)}")
            _follow(store, config, watching, follow_stop)
        stopped = True
    except KeyboardInterrupt:
        stopped = True
    finally:
        notifier.stopping()
        if stopped:
            _last_pass(finish)
        threads.stop_all()
        if stop_metrics is not None:
            stop_metrics()
    if threads.shipper_died:
        raise StoreError(f"the shipper stopped while watching: {threads.shipper_died[0]}")


def _last_pass(finish: Callable[[], None]) -> None:
    """The stop may have cut a diagnosis pass short: the plans for the last lines stored are
    made now rather than at the next start (a second SIGINT skips it)."""
    with contextlib.suppress(KeyboardInterrupt):
        finish()


def _watching(config: WatchConfig, notifier: Notifier, say: Say) -> Watching:
    """Kernel lines are kept with the units' (they explain GPU crashes); the selection's own
    checkpoint, with the older name of the same --unit reader to resume from."""
    from ingest.journal_sources import UnitGlobs, checkpoint_name_for

    if config.units:
        return Watching(
            UnitGlobs(config.units, kernel=True),
            (checkpoint_name_for(config.journal_files, config.units),),
            ", ".join(config.units),
        )
    if not config.journal_files:
        selection = discovery(notifier, say)
        return Watching(selection, (), describe(selection.watched))
    return Watching(None, (), ", ".join(str(f) for f in config.journal_files))


def _serve_metrics(store: EventStore, config: WatchConfig, say: Say) -> Callable[[], None] | None:
    """`--metrics`: serve /metrics in a thread, each scrape reading the store on its own
    connection; the function that stops it."""
    if config.metrics is None:
        return None
    from advisor.pipeline.metrics import registry_for, serve_metrics
    from advisor.store import open_store

    url = store.url
    stop = serve_metrics(
        config.metrics, registry_for(lambda: open_store(url, read_only=True), config.ship_to)
    )
    say(f"metrics on http://{safe_text(config.metrics)}/metrics")
    return stop


def _start_processing(store: EventStore, config: WatchConfig, say: Say) -> Callable[[], None]:
    """Diagnose (and with --auto apply) after every batch, then tell what is new; first what
    arrived while the watcher was down. Returns a last pass, for when it stops."""
    from advisor.core.gcpause import freeze_start_up
    from advisor.pipeline.auto import auto_lines, auto_once
    from advisor.pipeline.processing import Processor
    from advisor.pipeline.remediate import backend_for
    from advisor.pipeline.telling import Teller

    processor = Processor(store)
    teller = Teller(store, config.notices, say)
    teller.baseline()
    setup = config.auto
    chosen = None
    if setup is not None:
        chosen = backend_for(
            setup.backend, setup.systemd_root, config.gpu_twin, config.host, notices=config.notices
        )
    reported: dict[str, str] = {}

    def after() -> None:
        if setup is not None:
            for line in auto_lines(auto_once(store, chosen, setup.policy, setup.name), reported):
                say(line)
        teller.tell()

    def catch_up() -> None:
        processor.run(final=False)
        after()

    processor.follow(after=after)
    processor.run(final=False)
    teller.tell()
    freeze_start_up()
    return catch_up


def _follow(
    store: EventStore, config: WatchConfig, watching: Watching, stop: threading.Event
) -> None:
    from advisor.pipeline.pacing import urgent_entry
    from ingest.journal_sources import ingest_journalctl

    ingest_journalctl(
        store,
        files=config.journal_files,
        follow=True,
        selection=watching.selection,
        resume_from=watching.resume_from,
        stop=stop,
        urgent=urgent_entry,
    )


class _Threads:
    """The sampler and shipper threads, stopped together."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.gpu: threading.Thread | None = None
        self.heartbeat: threading.Thread | None = None
        self.shipper: threading.Thread | None = None
        self.local: EventStore | None = None
        self.shipper_died: list[str] = []

    def start_shipping(
        self,
        store: EventStore,
        config: WatchConfig,
        notifier: Notifier,
        say: Say,
    ) -> None:
        from advisor.fleet.selection import selection_for
        from advisor.store import open_store

        assert config.ship_to is not None
        # Its own connection: the shipper reads the store from its own thread.
        self.local = open_store(store.url)
        self.shipper = start_shipper(
            self.local,
            config.ship_to,
            self.stop,
            notifier,
            self.shipper_died,
            host=config.host,
            say=say,
            key=config.key,
            selection=selection_for(config.ship_lines, config.ship_gpu_every_s),
        )

    def stop_all(self) -> None:
        self.stop.set()
        for thread in (self.gpu, self.heartbeat):
            if thread is not None:
                thread.join(timeout=10)
        if self.shipper is not None and self.local is not None:
            self.shipper.join(timeout=30)
            self.local.close()


def start_shipper(
    local: EventStore,
    ship_to: str,
    stop: threading.Event,
    notifier: Notifier,
    died: list[str],
    *,
    host: str,
    say: Say,
    key: Path | None = None,
    selection: ShipSelection | None = None,
) -> threading.Thread:
    """`--ship-to`: ship in a thread that reports every failure (`say`, the unit's status
    line) and goes on; should the thread itself end before `stop`, that is reported too, in
    `died`, and `watch` fails when it stops."""
    from advisor.fleet.ship import ShipReport, ship_forever
    from advisor.store.engine import redact
    from advisor.store.integrity.headlog import load_key, store_label
    from advisor.store.integrity.keyplace import place_for

    where, failing = redact(ship_to), [False]

    def on_error(message: str) -> None:
        failing[0] = True
        say(f"shipping: {safe_text(message)}")
        notifier.notify(f"STATUS=shipping to {where} failed: {safe_text(message)}")

    def on_shipped(report: ShipReport) -> None:
        if failing[0]:
            failing[0] = False
            say(f"shipping: ok again (host seq {report.last_seq})")
            notifier.notify(f"STATUS=shipping to {where} ok (host seq {report.last_seq})")

    def run() -> None:
        try:
            place = place_for(store_label(local.url), key)  # the key `sign_heads` uses
            ship_forever(
                local,
                ship_to,
                host,
                stop,
                on_error=on_error,
                on_shipped=on_shipped,
                on_note=lambda words: say(f"shipping: {safe_text(words)}"),
                key=load_key(place.key),
                store_label=store_label(local.url) or "",
                key_path=str(place.key),
                selection=selection,
            )
        except BaseException as e:
            died.append(message := f"{type(e).__name__}: {e}")
            say(f"shipping stopped: {safe_text(message)}")
            notifier.notify(f"STATUS=shipping to {where} stopped: {safe_text(message)}")
            return
        if not stop.is_set():
            died.append("the shipper returned")

    thread = threading.Thread(target=run, name="shipper", daemon=True)
    thread.start()
    return thread


def discovery(notifier: Notifier, say: Say) -> InferenceServers:
    """The inference servers' units, found now and kept up to date while following."""
    from advisor.execution.bus import SystemdBus
    from advisor.execution.discover import InferenceServers

    def changed(found: list[Found]) -> None:
        text = describe(found)
        say(f"watching {safe_text(text)}")
        notifier.notify(f"STATUS=watching {text}")

    def failed(message: str) -> None:
        say(f"discovery: {safe_text(message)}")

    selection = InferenceServers(SystemdBus(timeout_s=5.0), on_error=failed)
    selection.tick()  # the first discovery, before READY=1 says what is watched
    selection.on_change = changed
    return selection


def describe(found: list[Found]) -> str:
    if not found:
        return "for inference servers (none yet; re-discovered every few seconds)"
    return ", ".join(f.describe() for f in found)


def start_gpu(
    store: EventStore,
    host: str,
    interval_s: float,
    stop: threading.Event,
    gpu_twin: Path | None,
    say: Say,
    heart: Heartbeat | None = None,
) -> threading.Thread | None:
    """Sample the GPUs in a thread (NVML, or a simulated node's twin); without a driver or
    GPU, say so and go on without. Each tick tells `heart` which GPUs there are."""
    from advisor.pipeline.backend_setup import gpu_sampler
    from ingest.gpu import sample_live

    sampler, why = gpu_sampler(host, gpu_twin)
    if sampler is None:
        say(f"no GPU sampling: {safe_text(why)}")
        return None

    on_tick = None
    if heart is not None:
        heart.driver = getattr(sampler, "driver_version", heart.driver)
        on_tick = heart.saw

    def run() -> None:
        try:
            sample_live(
                store,
                sampler,  # type: ignore[arg-type]
                interval_s=interval_s,
                stop=stop,
                on_tick=on_tick,
            )
        finally:
            close = getattr(sampler, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=run, name="gpu-sampler", daemon=True)
    thread.start()
    return thread
