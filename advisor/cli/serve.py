"""`advisor serve`: the web console (advisor.console) on uvicorn."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.common import (
    backend_option,
    db_option,
    gpus_option,
    notices_for,
    root_option,
    settings,
)
from advisor.core.address import host_port

if TYPE_CHECKING:
    from advisor.console.app import Console
    from advisor.core.settings import Settings
    from advisor.store import EventStore

# Seconds a stopping server lets requests in flight finish before it cancels them.
GRACE_S = 2


def console_for(conf: Settings, store: EventStore, backend: str, systemd_root: Path) -> Console:
    """The console `advisor serve` runs: the settings' token, host and GPU twin, and the
    backend `advisor remediate` would act through (its `notify` steps telling the settings'
    `[notify]` targets)."""
    from advisor.console.app import Console

    return Console(
        store=store,
        db_url=conf.db_url,
        token=conf.console.token,
        backend_name=backend,
        systemd_root=systemd_root,
        gpu_twin=conf.gpu_twin,
        host=conf.host,
        notices=notices_for(conf),
    )


@click.command()
@click.option(
    "--listen",
    metavar="HOST:PORT",
    default=None,
    help="Address to listen on. Default: [console] listen in the settings, else "
    "127.0.0.1:8750 (this host only).",
)
@click.option(
    "--token",
    default=None,
    help="The token (or password) a person gives before the console changes anything. "
    "Default: [console] token in the settings file, ADVISOR_CONSOLE__TOKEN; without one the "
    "console only reads.",
)
@backend_option
@root_option
@gpus_option
@db_option
def serve(
    listen: str | None,
    token: str | None,
    backend: str,
    systemd_root: Path,
    gpus_from: Path | None,
    db_url: str | None,
) -> None:
    """The web console: incidents (pending approvals first), each with its timeline,
    evidence, charts and plan to approve, reject, roll back and run; the fleet's figures
    and charts; Prometheus metrics at /metrics. It refreshes as events arrive. Runs until
    SIGINT or SIGTERM.

    \b
    Examples:
      advisor serve --db sqlite:///$HOME/.local/share/advisor/events.db
      advisor serve --listen 0.0.0.0:8750 --token "$CONSOLE_TOKEN" --backend dry-run
    """
    import uvicorn

    from advisor.console.app import build_app
    from advisor.store import open_store

    conf = settings(db=db_url, gpu_twin=gpus_from, console={"listen": listen, "token": token})
    host, port = host_port(conf.console.listen, "--listen", "127.0.0.1:8750")
    store = click.get_current_context().with_resource(open_store(conf.db_url))
    console = console_for(conf, store, backend, systemd_root)
    acts = "acts with the token" if console.token else "reads only (no token set)"
    click.echo(f"advisor console on http://{host}:{port}/ ({store.display_url}; {acts})")
    uvicorn.run(
        build_app(console),
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=GRACE_S,
    )
