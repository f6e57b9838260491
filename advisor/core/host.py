"""This machine's name as advisor uses it by default: the short host name (`gpu-07`, not
`gpu-07.dc1.example.com`), so that streams read `HOST/UNIT` the same whichever tool wrote
them. Kept apart from the settings so that a reader (NVML, the executor) gets it without
loading pydantic-settings."""

from __future__ import annotations

import socket


def this_host() -> str:
    return socket.gethostname().split(".", 1)[0] or "localhost"
