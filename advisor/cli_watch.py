"""`advisor watch`: the one daemon a host runs — journal follow, GPU sampling, live
diagnosis and proposals, and with `--auto` what a policy allows."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import click

from advisor.cli_actions import _backend, backend_option, root_option
from advisor.cli_common import db_option, handle_errors, sigterm_as_interrupt, store_for
from advisor.errors import GpuUnavailableError, InputError
from advisor.render import safe_text
from advisor.settings import this_host


@click.command()
@click.option("--unit", "units", multiple=True,
              help="A unit to watch (globs allowed; repeatable). Default: every running unit "
                   "whose command line is an inference server.")
@click.option("--journal-file", "journal_files", multiple=True, type=click.Path(path_type=Path),
              help="Follow these .journal files instead of the system journal.")
@click.option("--gpu-interval", type=click.FloatRange(min=0.1), default=1.0, show_default=True,
              help="Seconds between GPU samples.")
@click.option("--no-gpu", is_flag=True, help="Do not sample the GPUs.")
@click.option("--auto", "auto_", is_flag=True, help="Also apply what --policy allows.")
@click.option("--ship-to", "ship_to", metavar="URL",
              help="Also ship the events to this central store, every few seconds.")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path),
              help="The auto-remediation policy (with --auto).")
@backend_option
@root_option
@db_option
@handle_errors
def watch(units: tuple[str, ...], journal_files: tuple[Path, ...], gpu_interval: float,
          no_gpu: bool, auto_: bool, ship_to: str | None, policy_path: Path | None,
          backend: str, systemd_root: Path, db_url: str | None) -> None:
    """Follow the journal and the GPUs, diagnose as lines arrive, propose plans (and apply
    what the policy allows with --auto). Stops on SIGINT or SIGTERM, committing what it has."""
    from advisor.auto import auto_once
    from advisor.discover import inference_units
    from advisor.executor.backends import run_argv
    from advisor.policy import load_policy
    from advisor.processing import Processor
    from advisor.sdnotify import Notifier
    from ingest.journal_sources import ingest_journalctl
    from ingest.journalctl import journalctl_path

    if auto_ and policy_path is None:
        raise click.UsageError("--auto needs --policy FILE")
    policy = load_policy(policy_path) if policy_path is not None else None
    journalctl_path()
    for jf in journal_files:
        if not jf.exists():
            raise InputError(f"--journal-file {jf}: no such file")
    if not units and not journal_files:
        units = tuple(inference_units(run_argv))
        if not units:
            raise InputError("no running unit looks like an inference server; name the units "
                             "with --unit")
    store = store_for(db_url)
    processor = Processor(store)
    if auto_ and policy is not None and policy_path is not None:
        chosen = _backend(backend, systemd_root)
        name = policy_path.name
        processor.follow(after=lambda: _report(auto_once(store, chosen, policy, name)))
    else:
        processor.follow()
    processor.run(final=False)  # what arrived while the watcher was down
    stop = threading.Event()
    sampler_thread = None if no_gpu else _start_gpu(store, gpu_interval, stop)
    shipper = local = None
    if ship_to is not None:
        from advisor.ship import ship_forever
        from advisor.store import open_store

        # Its own connection: the shipper reads the store from its own thread.
        local = open_store(store.url)
        shipper = threading.Thread(
            target=ship_forever, name="shipper", daemon=True,
            args=(local, ship_to, this_host(), stop),
            kwargs={"on_error": lambda e: click.echo(f"shipping: {safe_text(e)}", err=True)})
        shipper.start()
    notifier = Notifier(os.environ)
    watching = ", ".join(units) if units else ", ".join(str(f) for f in journal_files)
    notifier.ready(f"watching {watching}")
    notifier.keep_alive()
    click.echo(f"watching {safe_text(watching)}", err=True)
    try:
        with sigterm_as_interrupt():
            ingest_journalctl(store, files=journal_files, units=units, follow=True)
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


def _report(report: object) -> None:
    from advisor.auto import AutoReport

    if isinstance(report, AutoReport):
        for plan_id in report.applied:
            click.echo(f"applied {safe_text(plan_id)}", err=True)
        for plan_id, why in report.left.items():
            click.echo(f"left for a person: {safe_text(plan_id)}: {safe_text(why)}", err=True)


def _start_gpu(store: object, interval: float, stop: threading.Event) -> threading.Thread | None:
    """Sample the GPUs in a thread; without a driver or GPU, say so and go on without."""
    from advisor.store import EventStore
    from ingest.gpu import sample_live
    from ingest.nvml import NvmlSampler

    assert isinstance(store, EventStore)
    try:
        sampler = NvmlSampler(this_host()).__enter__()
    except GpuUnavailableError as e:
        click.echo(f"no GPU sampling: {safe_text(str(e))}", err=True)
        return None

    def run() -> None:
        try:
            sample_live(store, sampler, interval_s=interval, stop=stop)
        finally:
            sampler.__exit__(None, None, None)

    thread = threading.Thread(target=run, name="gpu-sampler", daemon=True)
    thread.start()
    return thread
