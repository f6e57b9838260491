"""`advisor install` on real systemd 252 (a box: advisor.sim.box): run inside the box as the
installed `advisor` command (this virtual environment's, as pipx's would be), it writes the
agent's unit into the box's /etc/systemd/system, enables and starts it — `advisor watch`
running, ready, its metrics answering — a second install changes nothing, an upgrade rewrites
a changed unit and restarts the agent, and uninstall leaves no unit behind. And the whole
path from a wheel: built from this tree, `pipx install`ed into a folder of the test, its
`advisor install` run in the box. The settings and the store go to the test's folders
(`--config-dir`, `--state-dir`): the box shares the host's /etc and /var."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from advisor.fleet.hostfiles import unsafe_for_root
from advisor.sim.box import SystemdBox
from tests.conftest import ROOT, run_advisor
from tests.waiting import wait

UNIT = "advisor-watch.service"
PORT = "9750"
ADVISOR = Path(sys.executable).parent / "advisor"  # what pipx puts on PATH


@pytest.fixture
def host(box: SystemdBox) -> SystemdBox:
    box.run(["ip", "link", "set", "lo", "up"])  # a fresh network namespace has lo down
    return box


def advisor(box: SystemdBox, tmp: Path, *args: str, exe: Path = ADVISOR) -> dict[str, Any]:
    folders = ("--config-dir", str(tmp / "etc"), "--state-dir", str(tmp / "state"))
    done = box.run([str(exe), *args, *folders, "--json"], check=False, timeout=180)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def state(box: SystemdBox) -> dict[str, str]:
    return box.show(UNIT, "LoadState", "ActiveState", "MainPID", "ExecStart")


def metrics(box: SystemdBox) -> str:
    done = box.run(["curl", "-sf", f"http://127.0.0.1:{PORT}/metrics"], check=False)
    return done.stdout if done.returncode == 0 else ""


def test_install_upgrade_and_uninstall_on_real_systemd(host: SystemdBox, tmp_path: Path) -> None:
    if not ADVISOR.is_file():
        pytest.skip(f"no installed advisor command at {ADVISOR}")
    first = advisor(host, tmp_path, "install", "--metrics", f"127.0.0.1:{PORT}")
    assert first["executable"] == str(ADVISOR)
    # The warning is there exactly when the virtual environment is not root's alone (a
    # checkout under /tmp, say, which anyone may write).
    unsafe = unsafe_for_root(ADVISOR)
    assert first["warnings"] == ([] if unsafe is None else [unsafe])
    assert [argv[1] for argv in first["systemctl"]] == ["daemon-reload", "enable", "start"]
    now = state(host)
    assert (now["LoadState"], now["ActiveState"]) == ("loaded", "active")
    # Enabled: the link `systemctl enable` made, what a boot starts it from (the box's PID 1
    # keeps its units in a folder of the test, and says UnitFileState=disabled of them all).
    wants = host.units_dir / "multi-user.target.wants" / UNIT
    assert wants.is_symlink() and wants.readlink().name == UNIT
    assert f"path={ADVISOR} ;" in now["ExecStart"]
    wait("the agent's metrics", lambda: "advisor_" in metrics(host))
    assert (tmp_path / "state/events.db").is_file()  # the store the installed settings name
    assert (tmp_path / "etc/host-key").is_file()  # the unit's ADVISOR_KEY

    again = advisor(host, tmp_path, "install", "--metrics", f"127.0.0.1:{PORT}")
    assert again["changed"] is False and again["systemctl"] == []
    assert state(host)["MainPID"] == now["MainPID"]

    unit = host.units_dir / UNIT
    unit.write_text(unit.read_text().replace("RestartSec=5", "RestartSec=7"))  # an older unit
    upgraded = advisor(host, tmp_path, "install", "--upgrade", "--metrics", f"127.0.0.1:{PORT}")
    assert [argv[1] for argv in upgraded["systemctl"]] == ["daemon-reload", "try-restart"]
    assert "RestartSec=5\n" in unit.read_text()
    after = state(host)
    assert after["ActiveState"] == "active" and after["MainPID"] != now["MainPID"]
    assert host.show(UNIT, "RestartUSec")["RestartUSec"] == "5s"
    wait("the metrics after the restart", lambda: "advisor_" in metrics(host))

    # After `pipx upgrade advisor` the unit is the same; the agent still restarts onto it.
    same = advisor(host, tmp_path, "install", "--upgrade", "--metrics", f"127.0.0.1:{PORT}")
    assert [argv[1] for argv in same["systemctl"]] == ["try-restart"]
    assert state(host)["MainPID"] not in ("0", after["MainPID"])

    gone = advisor(host, tmp_path, "uninstall")
    assert gone["systemctl"][0][1:] == ["disable", "--now", UNIT]
    assert not unit.exists() and not wants.is_symlink()
    final = state(host)
    assert (final["LoadState"], final["ActiveState"]) == ("not-found", "inactive")
    assert metrics(host) == ""
    assert (tmp_path / "etc/advisor.toml").is_file() and (tmp_path / "state/events.db").is_file()


def _pipx_install(tmp: Path) -> Path:
    """The wheel of this tree, `pipx install`ed with its own PIPX_HOME and bin folder; the
    `advisor` command pipx put there."""
    wheels = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("advisor-*.whl")
    env = {
        **os.environ,
        "PIPX_HOME": str(tmp / "pipx"),
        "PIPX_BIN_DIR": str(tmp / "bin"),
        "PIPX_MAN_DIR": str(tmp / "man"),
    }
    env.pop("PYTHONPATH", None)
    subprocess.run(
        [sys.executable, "-m", "pipx", "install", str(wheel)],
        env=env,
        check=True,
        capture_output=True,
        timeout=900,
    )
    return tmp / "bin" / "advisor"


@pytest.mark.slow
def test_a_pipx_install_from_the_wheel_installs_the_agent(host: SystemdBox, tmp_path: Path) -> None:
    pytest.importorskip("pipx", reason="pipx is not installed (pip install pipx)")
    exe = _pipx_install(tmp_path / "px")
    assert exe.is_symlink()  # pipx's link: the unit keeps it, valid across `pipx upgrade`
    first = advisor(host, tmp_path, "install", "--metrics", f"127.0.0.1:{PORT}", exe=exe)
    assert first["executable"] == str(exe)
    assert "is not root's alone" in first["warnings"][0]  # a test's folder under /tmp
    assert f"path={exe} ;" in state(host)["ExecStart"]
    assert state(host)["ActiveState"] == "active"
    wait("the agent's metrics", lambda: "advisor_" in metrics(host))
    gone = advisor(host, tmp_path, "uninstall", "--purge", exe=exe)
    assert state(host)["LoadState"] == "not-found" and gone["changed"]
    assert not (tmp_path / "etc").exists() and not (tmp_path / "state").exists()


@contextlib.contextmanager
def unix_to_pg(folder: Path, port: int) -> Iterator[Path]:
    """A PostgreSQL socket in `folder` (libpq's `host=FOLDER`), forwarded to the server on
    this host's 127.0.0.1:`port`: the box has a network of its own, but shares the disk."""
    folder.mkdir(parents=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / f".s.PGSQL.{port}"))
    server.listen(16)

    def pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = server.accept()
                upstream = socket.create_connection(("127.0.0.1", port))
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=pump, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield folder
    finally:
        server.close()


def test_one_install_command_makes_a_host_that_ships_to_the_central_store(
    host: SystemdBox, tmp_path: Path, pg_url: str
) -> None:
    upgraded = run_advisor("db", "upgrade", "--db", pg_url)  # the owner makes the schema
    assert upgraded.returncode == 0, upgraded.stderr.decode()
    url = make_url(pg_url)
    with unix_to_pg(tmp_path / "pg", url.port or 5432) as sockets:
        # The same store, reached through the socket: host=FOLDER in the query (a %3D in
        # it as well, which the drop-in must keep from systemd's % specifiers).
        central = url.set(host=None, port=None).update_query_dict({"host": str(sockets)})
        central_url = central.render_as_string(hide_password=False)
        first = advisor(host, tmp_path, "install", "--central", central_url)
        assert "central.conf" in " ".join(f["path"] for f in first["files"])
        log = tmp_path / "vllm.log"
        log.write_text("INFO 02-21 00:32:55 api_server.py:1 vLLM API server version 0.8.5\n")
        local = f"sqlite:///{tmp_path / 'state/events.db'}"
        wait("the agent's store", lambda: (tmp_path / "state/events.db").is_file())
        ingested = run_advisor(
            "ingest", "text", str(log), "--service", f"{host.hostname}/vllm-a", "--db", local
        )
        assert ingested.returncode == 0, ingested.stderr.decode()
        engine = create_engine(pg_url)

        def shipped() -> int:
            with engine.connect() as conn:
                query = "SELECT count(*) FROM events WHERE stream = :s"
                return int(
                    conn.execute(text(query), {"s": f"{host.hostname}/vllm-a.service"}).scalar_one()
                )

        try:
            wait("the host's events in the central store", lambda: shipped() > 0, timeout=60)
        finally:
            engine.dispose()
        status = host.show(UNIT, "StatusText")["StatusText"]
        assert "failed" not in status, status
        advisor(host, tmp_path, "uninstall")
