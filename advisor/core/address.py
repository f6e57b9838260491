"""A listening address as the settings and flags give it: `HOST:PORT`."""

from __future__ import annotations

from advisor.core.errors import InputError


def host_port(listen: str, flag: str, example: str) -> tuple[str, int]:
    """`HOST:PORT` (`127.0.0.1:9750`, `[::1]:9750`, brackets dropped) as (host, port);
    InputError naming `flag` and showing `example` when it is not one, or the port is not
    1–65535."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"{flag} {listen[:80]!r}: not HOST:PORT (e.g. {example})")
    return host.strip("[]"), int(port)
