"""systemd's own API: its D-Bus interface, spoken with jeepney (pure Python, no daemon needed).

As root, the client talks to PID 1 directly on its private socket, ``/run/systemd/private``
(peer to peer: no ``Hello``, no bus daemon — what ``systemctl`` itself does); otherwise on the
system bus through dbus-daemon. ``address`` picks another socket (``unix:path=…``), e.g. a
systemd booted in namespaces for tests.

Everything the executor knows about a unit is read here, as systemd's typed properties — the
exact ExecStart argv with variables unexpanded, InvocationID, MainPID, states, timeouts — never
by re-tokenising ``systemctl show`` text.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from jeepney import (
    DBusAddress,
    DBusErrorResponse,
    HeaderFields,
    Message,
    MessageType,
    Properties,
    new_method_call,
)
from jeepney.bus import get_connectable_addresses
from jeepney.io.blocking import DBusConnection, open_dbus_connection, prep_socket

from advisor.core.errors import AdvisorError

DESTINATION: Final = "org.freedesktop.systemd1"
MANAGER_PATH: Final = "/org/freedesktop/systemd1"
MANAGER: Final = "org.freedesktop.systemd1.Manager"
UNIT: Final = "org.freedesktop.systemd1.Unit"
SERVICE: Final = "org.freedesktop.systemd1.Service"
PRIVATE_SOCKET: Final = Path("/run/systemd/private")
SYSTEM_BUS: Final = "unix:path=/run/dbus/system_bus_socket"


class BusError(AdvisorError):
    """systemd could not be reached, or refused a call. `name` is the D-Bus error name."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


def default_address() -> tuple[str, bool]:
    """(address, peer-to-peer): PID 1's private socket for root, else the system bus."""
    if os.geteuid() == 0 and PRIVATE_SOCKET.exists():
        return f"unix:path={PRIVATE_SOCKET}", True
    return os.environ.get("DBUS_SYSTEM_BUS_ADDRESS") or SYSTEM_BUS, False


def _unwrap(value: Any) -> Any:
    """jeepney gives variants as (signature, value)."""
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and value[0]
        and value[0][0] in "asbyntqiudxohvg(a{"
    ):
        return value[1]
    return value


class SystemdBus:
    """One connection to systemd, reconnected once when it drops. Safe to share between
    threads (calls are serialised)."""

    def __init__(
        self,
        address: str | None = None,
        *,
        peer_to_peer: bool | None = None,
        timeout_s: float = 25.0,
    ) -> None:
        if address is None:
            address, p2p = default_address()
        else:
            p2p = address.startswith("unix:path=") if peer_to_peer is None else peer_to_peer
        self.address = address
        self.peer_to_peer = p2p if peer_to_peer is None else peer_to_peer
        self.timeout_s = timeout_s
        self._conn: DBusConnection | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ connection
    def _connect(self) -> DBusConnection:
        try:
            if not self.peer_to_peer:
                return open_dbus_connection(bus=self.address)
            path = next(get_connectable_addresses(self.address))
            sock = prep_socket(path, False, timeout=5.0)
            conn = _PeerConnection(sock)
            conn.wake(deadline_s=self.timeout_s)
            return conn
        except (OSError, RuntimeError, StopIteration) as e:
            raise BusError(f"cannot reach systemd at {self.address}: {e}") from e

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SystemdBus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, message: Message, timeout_s: float | None = None) -> tuple[Any, ...]:
        with self._lock:
            for attempt in (1, 2):
                if self._conn is None:
                    self._conn = self._connect()
                try:
                    reply = self._conn.send_and_get_reply(
                        message, timeout=timeout_s or self.timeout_s
                    )
                    break
                except (OSError, TimeoutError) as e:  # dropped (a reload, a re-exec): once more
                    self._conn.close()
                    self._conn = None
                    if attempt == 2:
                        raise BusError(
                            f"systemd did not answer on {self.address}: {e or type(e).__name__}"
                        ) from e
        if reply.header.message_type == MessageType.error:
            name = str(reply.header.fields.get(HeaderFields.error_name, "error"))
            text = reply.body[0] if reply.body and isinstance(reply.body[0], str) else name
            raise BusError(text, name)
        body: tuple[Any, ...] = reply.body
        return body

    # ------------------------------------------------------------------ calls
    def call(
        self,
        path: str,
        interface: str,
        method: str,
        signature: str | None = None,
        *args: Any,
        timeout_s: float | None = None,
    ) -> tuple[Any, ...]:
        address = DBusAddress(path, bus_name=DESTINATION, interface=interface)
        return self._send(new_method_call(address, method, signature, args), timeout_s)

    def manager(
        self, method: str, signature: str | None = None, *args: Any, timeout_s: float | None = None
    ) -> tuple[Any, ...]:
        return self.call(MANAGER_PATH, MANAGER, method, signature, *args, timeout_s=timeout_s)

    def properties(self, path: str, interface: str) -> dict[str, Any]:
        address = DBusAddress(path, bus_name=DESTINATION, interface=interface)
        try:
            body = self._send(Properties(address).get_all())
        except DBusErrorResponse as e:  # pragma: no cover - jeepney raises only on unwrap
            raise BusError(str(e)) from e
        values: Mapping[str, Any] = body[0]
        return {k: _unwrap(v) for k, v in values.items()}

    def unit_path(self, name: str) -> str:
        """The unit's object path, loading it if systemd has not (a unit file not started
        yet is loaded on demand; an unknown name gives a unit in load state not-found)."""
        path: str = self.manager("LoadUnit", "s", name)[0]
        return path

    def probe(self, timeout_s: float = 2.0) -> None:
        """One cheap call: raises BusError unless systemd answers within `timeout_s`."""
        self.call(MANAGER_PATH, "org.freedesktop.DBus.Peer", "Ping", timeout_s=timeout_s)


class _PeerConnection(DBusConnection):  # type: ignore[misc]
    """A peer-to-peer connection: PID 1's private socket has no bus daemon to say Hello to."""

    def __init__(self, sock: socket.socket) -> None:
        from jeepney.io.blocking import DBusConnectionBase
        from jeepney.io.common import MessageFilters

        DBusConnectionBase.__init__(self, sock, False)
        self._filters = MessageFilters()
        self.unique_name = None

    def wake(self, deadline_s: float, every_s: float = 0.1) -> None:
        """Ping until PID 1 answers. A message that arrives together with the end of the
        authentication can sit unread in systemd's buffer until more data comes (seen on
        systemd 252 right after a daemon-reload: the call hung until its timeout); another
        Ping is that data."""
        import time

        end = time.monotonic() + deadline_s
        ping = new_method_call(
            DBusAddress(MANAGER_PATH, bus_name=DESTINATION, interface="org.freedesktop.DBus.Peer"),
            "Ping",
        )
        sent: set[int] = set()
        while time.monotonic() < end:
            serial = next(self.outgoing_serial)
            self.send(ping, serial=serial)
            sent.add(serial)
            try:
                while True:
                    reply = self.receive(timeout=every_s)
                    if reply.header.fields.get(HeaderFields.reply_serial) in sent:
                        return
            except TimeoutError:
                continue
        raise TimeoutError(f"no answer to Ping in {deadline_s:.0f} s")
