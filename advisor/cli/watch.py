"""`advisor watch`: the one daemon a host runs (`advisor.pipeline.daemon`) — journal follow,
GPU sampling, live diagnosis and proposals, and with `--auto` what a policy allows; it says
and notifies when it opens an incident or a plan waits, and serves metrics (`--metrics`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.common import (
    advisor_for,
    backend_option,
    db_option,
    gpus_option,
    root_option,
    seconds,
)
from advisor.cli.heads import sign_heads

if TYPE_CHECKING:
    from advisor.store import EventStore


@click.command()
@click.option(
    "--unit",
    "units",
    multiple=True,
    help="A unit to watch (globs allowed; repeatable), also one that does not exist "
    "yet. Default: every service unit, in any state, whose ExecStart is an "
    "inference server (vLLM, SGLang, TGI), re-discovered as units come and go.",
)
@click.option(
    "--journal-file",
    "journal_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Follow these .journal files instead of the system journal; a folder: all its "
    ".journal files, across rotations.",
)
@click.option(
    "--gpu-interval",
    type=seconds(0.1),
    default=1.0,
    show_default=True,
    help="Seconds between GPU samples.",
)
@click.option("--no-gpu", is_flag=True, help="Do not sample the GPUs.")
@click.option("--auto", "auto_", is_flag=True, help="Also apply what --policy allows.")
@click.option(
    "--ship-to",
    "ship_to",
    metavar="URL",
    help="Also ship the events to this central store, every few seconds. Default: the "
    "settings' ship_to (env ADVISOR_SHIP_TO), else none.",
)
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(path_type=Path),
    help="The auto-remediation policy (with --auto). Default: the settings' policy.",
)
@click.option(
    "--metrics",
    "metrics",
    metavar="HOST:PORT",
    help="Serve Prometheus metrics on http://HOST:PORT/metrics (e.g. 127.0.0.1:9750). "
    "Default: the settings' [metrics] listen, else none.",
)
@click.option(
    "--key",
    "key_path",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="PATH",
    help="The key that signs the store's chain heads (created on first use). Default: the "
    "`key` setting ($ADVISOR_KEY), else the store's own key (docs/integrity.md).",
)
@backend_option
@root_option
@gpus_option
@db_option
def watch(
    units: tuple[str, ...],
    journal_files: tuple[Path, ...],
    gpu_interval: float,
    no_gpu: bool,
    auto_: bool,
    ship_to: str | None,
    policy_path: Path | None,
    metrics: str | None,
    key_path: Path | None,
    backend: str,
    systemd_root: Path,
    gpus_from: Path | None,
    db_url: str | None,
) -> None:
    """Follow the journal and the GPUs, diagnose as lines arrive, propose plans (and apply
    what the policy allows with --auto). Stops on SIGINT or SIGTERM, committing what it has.

    \b
    Examples:
      advisor watch --unit 'vllm*.service'
      advisor watch --auto --policy /etc/advisor/policy.toml
    """
    from advisor.front import Watch

    adv = advisor_for(db_url, gpu_twin=gpus_from, policy=policy_path, key=key_path)
    if auto_ and adv.settings.policy is None:
        raise click.UsageError("--auto needs a policy: --policy FILE, or `policy` in the settings")
    what = Watch(
        units, journal_files, gpu_interval, no_gpu, ship_to, auto_, backend, systemd_root, metrics
    )

    def open_store() -> EventStore:
        opened = advisor_for(db_url, key=key_path)
        sign_heads(opened)  # tamper evidence: docs/integrity.md
        return opened.store

    adv.watch(what, open_store, say)


def say(line: str) -> None:
    """The daemon's lines for the operator go to stderr (the journal, under systemd)."""
    click.echo(line, err=True)
