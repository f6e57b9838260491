"""`advisor watch`: the one daemon a host runs — journal follow, GPU sampling, live
diagnosis and proposals, and with `--auto` what a policy allows."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.actions import _backend, backend_option, gpus_option, root_option, say_auto
from advisor.cli.common import (
    db_option,
    handle_errors,
    seconds,
    sigterm_as_interrupt,
    store_for,
)
from advisor.cli.heads import sign_heads
from advisor.core.errors import InputError, StoreError
from advisor.core.render import safe_text
from advisor.core.settings import this_host

if TYPE_CHECKING:
    from advisor.execution.discover import Found, InferenceServers
    from advisor.pipeline.sdnotify import Notifier
    from advisor.store import EventStore
    from ingest.journal_sources import Selection


@click.command()
@click.option("--unit", "units", multiple=True,
              help="A unit to watch (globs allowed; repeatable), also one that does not exist "
                   "yet. Default: every service unit, in any state, whose ExecStart is an "
                   "inference server (vLLM, SGLang, TGI), re-discovered as units come and go.")
@click.option("--journal-file", "journal_files", multiple=True, type=click.Path(path_type=Path),
              help="Follow these .journal files instead of the system journal.")
@click.option("--gpu-interval", type=seconds(0.1), default=1.0, show_default=True,
              help="Seconds between GPU samples.")
@click.option("--no-gpu", is_flag=True, help="Do not sample the GPUs.")
@click.option("--auto", "auto_", is_flag=True, help="Also apply what --policy allows.")
@click.option("--ship-to", "ship_to", metavar="URL",
              help="Also ship the events to this central store, every few seconds.")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path),
              help="The auto-remediation policy (with --auto).")
@backend_option
@root_option
@gpus_option
@db_option
@handle_errors
def watch(units: tuple[str, ...], journal_files: tuple[Path, ...], gpu_interval: float,
          no_gpu: bool, auto_: bool, ship_to: str | None, policy_path: Path | None,
          backend: str, systemd_root: Path, gpus_from: Path | None, db_url: str | None) -> None:
    """Follow the journal and the GPUs, diagnose as lines arrive, propose plans (and apply
    what the policy allows with --auto). Stops on SIGINT or SIGTERM, committing what it has."""
    from advisor.core.journalctl import journalctl_path
    from advisor.pipeline.auto import auto_once
    from advisor.pipeline.processing import Processor
    from advisor.pipeline.sdnotify import Notifier
    from advisor.planning.policy import load_policy
    from ingest.journal_sources import UnitGlobs, checkpoint_name_for, ingest_journalctl

    if auto_ and policy_path is None:
        raise click.UsageError("--auto needs --policy FILE")
    policy = load_policy(policy_path) if policy_path is not None else None
    journalctl_path()
    for jf in journal_files:
        if not jf.exists():
            raise InputError(f"--journal-file {jf}: no such file")
    notifier = Notifier(os.environ)
    # Kernel lines are kept with the units' (they explain GPU crashes); the selection's own
    # checkpoint, with the older name of the same --unit reader to resume from.
    selection: Selection | None = None
    resume_from: tuple[str, ...] = ()
    if units:
        selection = UnitGlobs(units, kernel=True)
        resume_from = (checkpoint_name_for(journal_files, units),)
        watching = ", ".join(units)
    elif not journal_files:
        selection = _discovery(notifier)
        watching = _describe(selection.watched)
    else:
        watching = ", ".join(str(f) for f in journal_files)
    store = store_for(db_url)
    sign_heads(store)  # tamper evidence: docs/integrity.md
    processor = Processor(store)
    if auto_ and policy is not None and policy_path is not None:
        chosen = _backend(backend, systemd_root, gpus_from)
        name = policy_path.name
        reported: dict[str, str] = {}
        processor.follow(after=lambda: say_auto(auto_once(store, chosen, policy, name),
                                                reported, err=True))
    else:
        processor.follow()
    processor.run(final=False)  # what arrived while the watcher was down
    stop = threading.Event()
    sampler_thread = None if no_gpu else _start_gpu(store, gpu_interval, stop, gpus_from)
    shipper = local = None
    shipper_died: list[str] = []
    if ship_to is not None:
        from advisor.store import open_store

        # Its own connection: the shipper reads the store from its own thread.
        local = open_store(store.url)
        shipper = _start_shipper(local, ship_to, stop, notifier, shipper_died)
    notifier.ready(f"watching {watching}")
    notifier.keep_alive()
    click.echo(f"watching {safe_text(watching)}", err=True)
    try:
        with sigterm_as_interrupt():
            ingest_journalctl(store, files=journal_files, follow=True, selection=selection,
                              resume_from=resume_from)
    except KeyboardInterrupt:
        pass
    finally:
        notifier.stopping()
        stop.set()
        if sampler_thread is not None:
            sampler_thread.join(timeout=10)
        if shipper is not None and local is not None:
            shipper.join(timeout=30)
            local.close()
    if shipper_died:
        raise StoreError(f"the shipper stopped while watching: {shipper_died[0]}")


def _start_shipper(local: EventStore, ship_to: str, stop: threading.Event, notifier: Notifier,
                   died: list[str]) -> threading.Thread:
    """`--ship-to`: ship in a thread that reports every failure (stderr, the unit's status
    line) and goes on; should the thread itself end before `stop`, that is reported too, in
    `died`, and `watch` exits 1 when it stops."""
    from advisor.fleet.ship import ShipReport, ship_forever
    from advisor.store.engine import redact
    from advisor.store.headlog import default_key_path, load_key, store_label

    where = redact(ship_to)
    failing = [False]

    def on_error(message: str) -> None:
        failing[0] = True
        click.echo(f"shipping: {safe_text(message)}", err=True)
        notifier.notify(f"STATUS=shipping to {where} failed: {safe_text(message)}")

    def on_shipped(report: ShipReport) -> None:
        if failing[0]:
            failing[0] = False
            click.echo(f"shipping: ok again (host seq {report.last_seq})", err=True)
            notifier.notify(f"STATUS=shipping to {where} ok (host seq {report.last_seq})")

    def run() -> None:
        try:
            key = load_key(default_key_path())  # the key the heads of `sign_heads` use
            ship_forever(local, ship_to, this_host(), stop, on_error=on_error,
                         on_shipped=on_shipped, key=key,
                         store_label=store_label(local.url) or "")
        except BaseException as e:
            message = f"{type(e).__name__}: {e}"
            died.append(message)
            click.echo(f"shipping stopped: {safe_text(message)}", err=True)
            notifier.notify(f"STATUS=shipping to {where} stopped: {safe_text(message)}")
            return
        if not stop.is_set():
            died.append("the shipper returned")

    thread = threading.Thread(target=run, name="shipper", daemon=True)
    thread.start()
    return thread


def _discovery(notifier: Notifier) -> InferenceServers:
    """The inference servers' units, found now and kept up to date while following."""
    from advisor.execution.bus import SystemdBus
    from advisor.execution.discover import InferenceServers

    def changed(found: list[Found]) -> None:
        text = _describe(found)
        click.echo(f"watching {safe_text(text)}", err=True)
        notifier.notify(f"STATUS=watching {text}")

    def failed(message: str) -> None:
        click.echo(f"discovery: {safe_text(message)}", err=True)

    selection = InferenceServers(SystemdBus(timeout_s=5.0), on_error=failed)
    selection.tick()  # the first discovery, before READY=1 says what is watched
    selection.on_change = changed
    return selection


def _describe(found: list[Found]) -> str:
    if not found:
        return "for inference servers (none yet; re-discovered every few seconds)"
    return ", ".join(f.describe() for f in found)


def _start_gpu(store: object, interval: float, stop: threading.Event,
               gpus_from: Path | None) -> threading.Thread | None:
    """Sample the GPUs in a thread (NVML, or a simulated node's twin); without a driver or
    GPU, say so and go on without."""
    from advisor.pipeline.backends import gpu_sampler
    from advisor.store import EventStore
    from ingest.gpu import sample_live

    assert isinstance(store, EventStore)
    sampler, why = gpu_sampler(this_host(), gpus_from)
    if sampler is None:
        click.echo(f"no GPU sampling: {safe_text(why)}", err=True)
        return None

    def run() -> None:
        try:
            sample_live(store, sampler, interval_s=interval, stop=stop)  # type: ignore[arg-type]
        finally:
            close = getattr(sampler, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=run, name="gpu-sampler", daemon=True)
    thread.start()
    return thread
