"""`advisor serve`: the web console (advisor.console) on uvicorn."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.common import (
    backend_option,
    db_option,
    gpus_option,
    root_option,
    settings,
)
from advisor.core.address import host_port
from advisor.core.errors import AdvisorError, InputError

if TYPE_CHECKING:
    import socket

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
    from advisor.front import Advisor

    return Console(
        store=store,
        db_url=conf.db_url,
        token=conf.console.token,
        backend_name=backend,
        systemd_root=systemd_root,
        gpu_twin=conf.gpu_twin,
        host=conf.host,
        notices=Advisor(store, conf).notices(),
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
    from advisor.front import open_store

    conf = settings(db=db_url, gpu_twin=gpus_from, console={"listen": listen, "token": token})
    host, port = host_port(conf.console.listen, "--listen", "127.0.0.1:8750")
    store = click.get_current_context().with_resource(open_store(conf.db_url))
    console = console_for(conf, store, backend, systemd_root)
    sock = click.get_current_context().with_resource(listening_socket(host, port))
    acts = "acts with the token" if console.token else "reads only (no token set)"
    click.echo(f"advisor console on http://{host}:{port}/ ({store.display_url}; {acts})")
    config = uvicorn.Config(
        build_app(console), log_level="warning", timeout_graceful_shutdown=GRACE_S
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # SIGINT, as uvicorn.run has it: a stop, exit 0
        pass
    except SystemExit as e:  # uvicorn's start-up failure (its exit 3 is our chain's)
        raise AdvisorError("serve: the console did not start (the lines above say why)") from e


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to HOST:PORT for the console, bound here so that an address in use
    (or not this host's) is one `Error:` line, InputError (exit 4, as `watch --metrics`),
    instead of uvicorn's log line and its exit 3, which means a chain that does not verify."""
    import socket

    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as e:
        raise InputError(f"serve: {shown}: cannot listen there: {e.strerror or e}") from e
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise InputError(
                f"serve: {shown} is in use: another process listens there "
                "(give another with --listen)"
            ) from e
        raise InputError(f"serve: {shown}: cannot listen there: {e.strerror or e}") from e
    return sock
