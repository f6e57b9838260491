"""systemd's notify protocol (sd_notify): READY=1, WATCHDOG=1, STOPPING=1, STATUS=…

A datagram to the unix socket named in $NOTIFY_SOCKET (a leading `@` is the abstract
namespace). Without the variable — not started by systemd as Type=notify — every call is a
no-op. The environment is read by the caller and passed in (settings are read at the edge).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Mapping


class Notifier:
    def __init__(self, environ: Mapping[str, str]) -> None:
        address = environ.get("NOTIFY_SOCKET", "")
        self.address = "\0" + address[1:] if address.startswith("@") else address
        usec = environ.get("WATCHDOG_USEC", "")
        self.watchdog_s = int(usec) / 1_000_000 if usec.isdigit() and int(usec) > 0 else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def notify(self, message: str) -> bool:
        if not self.address:
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            try:
                sock.sendto(message.encode(), self.address)
            except OSError:
                return False
        return True

    def ready(self, status: str) -> None:
        self.notify(f"READY=1\nSTATUS={status}")

    def stopping(self) -> None:
        self._stop.set()
        self.notify("STOPPING=1")

    def keep_alive(self, alive: threading.Event | None = None) -> None:
        """Ping the watchdog at half its interval while `alive` is set (or always)."""
        if self.watchdog_s is None or self._thread is not None:
            return

        def ping() -> None:
            while not self._stop.wait(self.watchdog_s / 2 if self.watchdog_s else 1.0):
                if alive is None or alive.is_set():
                    self.notify("WATCHDOG=1")

        self._thread = threading.Thread(target=ping, name="sd-watchdog", daemon=True)
        self._thread.start()
