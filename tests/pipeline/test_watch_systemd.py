"""`advisor watch` on a real systemd (the box): which units are inference servers, from
systemd's own state (ExecStart over D-Bus, any unit state), and the watcher run as a process
inside the box, started before any unit exists, following units created and crash-looping
later, stopped with SIGTERM and resumed."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from advisor.core.payloads import LogRecorded
from advisor.execution.bus import SystemdBus
from advisor.execution.discover import (
    Found,
    InferenceServers,
    engine_of_argv,
    engine_of_exec_start,
    inference_units,
)
from advisor.sim.box import SystemdBox
from advisor.store import EventStore
from ingest.journal_sources import UnitGlobs, checkpoint_name_for, ingest_journalctl
from tests.boxproc import watching
from tests.conftest import ROOT
from tests.journal_fixtures import Entry, entry, have_journal_tools, make_journal
from tests.waiting import wait as _wait

Opener = Callable[[str], EventStore]
HOST = "gpu-box"  # the box's hostname


# -- the table -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        (["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], "vllm"),
        (["/opt/venv/bin/vllm", "serve", "m", "--port", "8000"], "vllm"),
        (
            ["/opt/venv/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
            "vllm",
        ),
        (["python3", "-mvllm.entrypoints.api_server"], "vllm"),
        (["/srv/models/bin/vllm"], "vllm"),  # a path ending in /vllm
        (["/usr/bin/env", "VLLM_USE_V1=1", "vllm", "serve", "m"], "vllm"),
        (["/usr/bin/env", "-i", "HOME=/root", "/opt/venv/bin/vllm", "--model", "m"], "vllm"),
        (["/usr/bin/numactl", "--cpunodebind=0", "/opt/venv/bin/vllm", "serve", "m"], "vllm"),
        (["uv", "run", "--with", "vllm", "vllm", "serve", "m"], "vllm"),
        (
            ["/bin/bash", "-lc", "source /opt/venv/bin/activate && exec vllm serve m --port 8000"],
            "vllm",
        ),
        (["/bin/sh", "-c", "cd /srv\nexec /opt/venv/bin/vllm --model m"], "vllm"),
        (["python3", "/src/vllm/vllm/entrypoints/openai/api_server.py", "--model", "m"], "vllm"),
        (["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2"], "sglang"),
        (
            [
                "/bin/bash",
                "-o",
                "pipefail",
                "-c",
                "python -m sglang.launch_server --tp 2 | tee log",
            ],
            "sglang",
        ),
        (["python", "/opt/sglang/python/sglang/launch_server.py"], "sglang"),
        (["/usr/local/bin/text-generation-launcher", "--model-id", "m"], "tgi"),
        (["/usr/bin/numactl", "-N0", "text-generation-launcher", "--model-id", "m"], "tgi"),
        (["text-generation-server", "serve", "m"], "tgi"),
        (["python", "-m", "text_generation_server.cli", "serve", "m"], "tgi"),
        (["/usr/sbin/sshd", "-D"], None),
        (["/bin/sh", "-c", "echo starting; exit 1"], None),
        (["/bin/sh", "-c", "echo 'vllm serve is not started here'"], None),
        (["/usr/bin/python3", "/opt/app/server.py", "--download-dir", "/var/cache/vllm"], None),
        (["/usr/bin/pip", "install", "vllm"], None),
        (["grep", "vllm", "/var/log/syslog"], None),
        (["/usr/bin/vllm-exporter", "--port", "9400"], None),
        (["python3", "-m", "sglang_router.launch_router"], None),
        (["/bin/bash", "/opt/start-server.sh"], None),  # a wrapper that is not there to read
        (["/usr/bin/docker", "run", "vllm/vllm-openai:latest", "--model", "m"], "vllm"),
        (
            [
                "/usr/bin/podman",
                "run",
                "--rm",
                "--device",
                "nvidia.com/gpu=all",
                "lmsysorg/sglang",
                "python3",
                "-m",
                "sglang.launch_server",
                "--model-path",
                "m",
            ],
            "sglang",
        ),
        (["/usr/bin/docker", "run", "-d", "redis:7"], None),
        (["/usr/local/bin/llama-server", "-m", "/m/x.gguf", "-c", "8192"], "llamacpp"),
        ([], None),
    ],
)
def test_which_commands_are_inference_servers(argv: list[str], engine: str | None) -> None:
    assert engine_of_argv(argv) == engine


def test_exec_start_as_dbus_gives_it() -> None:
    """(path, argv, ignore, timestamps…, pid, code, status); `@path argv0` names the program
    in path; the first command that is a server decides."""
    assert (
        engine_of_exec_start([("/opt/venv/bin/vllm", ["my-server", "serve"], False, 0)]) == "vllm"
    )
    assert (
        engine_of_exec_start(
            [
                ("/bin/true", ["/bin/true"], False),
                ("/usr/bin/python3", ["python3", "-m", "sglang.launch_server"], False),
            ]
        )
        == "sglang"
    )
    assert engine_of_exec_start([]) is None
    assert engine_of_exec_start([("/bin/true", [], False)]) is None


# -- discovery through systemd's D-Bus API ---------------------------------------------------


def _fake_vllm(folder: Path) -> Path:
    """A program called vllm that says it starts, fails, and exits 1 (a crash loop under
    Restart=always)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "vllm"
    script.write_text(
        '#!/bin/sh\necho "vllm $* starting"\nsleep 0.1\n'
        'echo "RuntimeError: CUDA error: out of memory" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    return script


def _looping(exec_start: str, restart: str = "always") -> str:
    return f"[Service]\nExecStart={exec_start}\nRestart={restart}\nRestartSec=1\n"


def test_discovery_sees_units_in_every_state(box: SystemdBox, tmp_path: Path) -> None:
    vllm = _fake_vllm(tmp_path / "bin")
    box.install("vllm-loop.service", _looping(f"{vllm} serve /models/m --port 8000"))
    box.install("vllm-failed.service", _looping(f"{vllm} serve /models/m", restart="no"))
    box.install(
        "tgi.service", "[Service]\nExecStart=/usr/local/bin/text-generation-launcher --model-id m\n"
    )
    box.install(
        "sglang.service",
        "[Service]\nExecStart=/bin/bash -lc 'exec python3 -m "
        "sglang.launch_server --model-path m'\n",
    )
    # Loaded but never started: the holder's After= reference loads them.
    box.install(
        "holder.service",
        "[Unit]\nAfter=tgi.service sglang.service\n[Service]\nExecStart=/bin/sleep 600\n",
    )
    box.install("helper.service", _looping("/bin/sh -c 'echo helper; exit 1'"))
    box.systemctl(
        "start", "vllm-loop.service", "vllm-failed.service", "holder.service", "helper.service"
    )
    with SystemdBus(box.bus_address, peer_to_peer=True) as bus:

        def states() -> dict[str, str]:
            return {f.unit: f.state for f in inference_units(bus)}

        _wait(
            "the loop in auto-restart and the other unit failed",
            lambda: (
                states().get("vllm-loop.service") == "activating/auto-restart"
                and states().get("vllm-failed.service") == "failed/failed"
            ),
        )
        found = inference_units(bus)
    assert [(f.unit, f.engine) for f in found] == [
        ("sglang.service", "sglang"),
        ("tgi.service", "tgi"),
        ("vllm-failed.service", "vllm"),
        ("vllm-loop.service", "vllm"),
    ]
    assert {f.unit: f.state for f in found}["tgi.service"] == "inactive/dead"
    assert box.show("vllm-loop.service", "MainPID")["MainPID"] == "0"  # nothing runs now


def _entry(
    unit: str | None = None, *, pid: int = 4242, message: str = "x", transport: str = "stdout"
) -> dict[str, object]:
    payload: dict[str, object] = {"pid": pid, "message": message, "transport": transport}
    if unit is not None:
        payload["unit"] = unit
    return {"payload": payload}


def test_entries_of_a_unit_not_known_yet_are_looked_up(box: SystemdBox, tmp_path: Path) -> None:
    vllm = _fake_vllm(tmp_path / "bin")
    box.install("other.service", "[Service]\nExecStart=/bin/sleep 600\n")
    box.systemctl("start", "other.service")
    with SystemdBus(box.bus_address, peer_to_peer=True) as bus:
        changes: list[list[Found]] = []
        servers = InferenceServers(bus, on_change=changes.append)
        servers.tick()
        assert servers.watched == [] and changes == []
        # Installed after the last discovery, never started (not loaded): its first entry
        # makes the selection ask systemd, and it is kept.
        box.install("vllm-new.service", _looping(f"{vllm} serve m"))
        assert servers.keep(_entry("vllm-new.service"))
        assert [f.unit for f in servers.watched] == ["vllm-new.service"]
        assert [[f.unit for f in c] for c in changes] == [["vllm-new.service"]]
        assert not servers.keep(_entry("other.service"))
        assert servers.keep(_entry(transport="kernel"))  # the kernel's lines: always
        for hostile in ("$(reboot).service", "../x.service", "a b.service", "init.scope"):
            assert not servers.keep(_entry(hostile))
        # A daemon-reload (PID 1 says so) makes every ExecStart be read again: the running
        # unit's command is now a server's (what it runs after its next start).
        box.install("other.service", "[Service]\nExecStart=/usr/bin/env vllm serve m\n")
        assert not servers.keep(_entry("other.service"))  # not noticed yet
        servers.keep(_entry("init.scope", pid=1, message="Reloading."))
        assert servers.keep(_entry("other.service"))
        # What is watched is what systemd has loaded: vllm-new, never started, was unloaded
        # by the reload; an entry about it has it looked up again.
        assert [f.unit for f in servers.watched] == ["other.service"]
        assert servers.keep(_entry("vllm-new.service"))
        assert [f.describe() for f in servers.watched] == [
            "other.service (vllm, active/running)",
            "vllm-new.service (vllm)",
        ]


def test_wrappers_and_containers_are_found_and_other_units_by_their_engine_lines(
    box: SystemdBox, tmp_path: Path
) -> None:
    vllm = _fake_vllm(tmp_path / "bin")
    wrapper = tmp_path / "start-vllm.sh"
    wrapper.write_text(f'#!/bin/bash\nset -e\nexec {vllm} serve /models/m "$@"\n')
    wrapper.chmod(0o755)
    box.install("wrapped.service", f"[Service]\nExecStart={wrapper} --port 8000\n")
    box.install(
        "boxed.service",
        "[Service]\nExecStart=/usr/bin/docker run --rm --gpus all "
        "ghcr.io/huggingface/text-generation-inference:3.0.1 --model-id m\n",
    )
    box.install("binary.service", "[Service]\nExecStart=/bin/sleep 600\n")
    box.systemctl("start", "binary.service")
    with SystemdBus(box.bus_address, peer_to_peer=True) as bus:
        servers = InferenceServers(bus)
        assert servers.keep(_entry("wrapped.service"))
        assert servers.keep(_entry("boxed.service"))
        # A command advisor cannot follow, that logs a vLLM start: it runs an engine.
        assert not servers.keep(_entry("binary.service", message="listening on :9000"))
        assert servers.keep(
            _entry(
                "binary.service",
                message="INFO 12-03 10:00:00 [api_server.py:1] vLLM API server version 0.10.1",
            )
        )
        assert servers.keep(_entry("binary.service", message="anything it says next"))
        assert [f.describe() for f in servers.watched] == [
            "binary.service (vllm)",
            "boxed.service (tgi)",
            "wrapped.service (vllm)",
        ]


def test_without_systemd_discovery_says_so_and_keeps_kernel_lines(tmp_path: Path) -> None:
    errors: list[str] = []
    bus = SystemdBus(f"unix:path={tmp_path / 'nobody.sock'}", peer_to_peer=True)
    servers = InferenceServers(bus, on_error=errors.append)
    servers.tick()
    assert not servers.keep(_entry("vllm.service"))
    assert servers.keep(_entry(transport="kernel"))
    servers.tick()
    assert len(errors) == 1 and "systemd did not answer" in errors[0]


# -- the checkpoint ---------------------------------------------------------------------------


@pytest.mark.skipif(
    not have_journal_tools(), reason="journalctl and systemd-journal-remote are needed"
)
def test_a_selection_resumes_from_the_older_checkpoint_of_the_same_units(
    tmp_path: Path, sqlite_url: str, opener: Opener
) -> None:
    """watch --unit used to follow with `journalctl -u` under `journalctl:WHERE:UNITS`; it now
    keeps kernel lines too, under `…+kernel`, and starts where the older reader stopped."""
    store = opener(sqlite_url)

    def kernel(i: int, message: str) -> Entry:
        return [
            (k, v)
            for k, v in entry(i, message)
            if k not in ("_TRANSPORT", "_SYSTEMD_UNIT", "SYSLOG_IDENTIFIER", "_PID")
        ] + [("_TRANSPORT", "kernel"), ("SYSLOG_IDENTIFIER", "kernel")]

    journal = make_journal(
        tmp_path / "node.journal",
        [
            entry(1, "one"),
            kernel(2, "NVRM: Xid 79 (before)"),
            entry(3, "sshd", unit="ssh.service"),
            entry(4, "two"),
        ],
    )
    ingest_journalctl(store, files=[journal], units=["vllm.service"])  # the older reader
    older = checkpoint_name_for([journal], ["vllm.service"])
    assert store.checkpoint(older) is not None
    make_journal(
        journal,
        [
            entry(5, "three"),
            kernel(6, "NVRM: Xid 79 (after)"),
            entry(7, "sshd again", unit="ssh.service"),
        ],
    )
    selection = UnitGlobs(["vllm.service"], kernel=True)
    report = ingest_journalctl(store, files=[journal], selection=selection, resume_from=(older,))
    assert report.appended == 2 and report.duplicates == 0
    assert [(e.stream, getattr(e.payload, "message", None)) for e in store.read()] == [
        ("gpu01/vllm.service", "one"),
        ("gpu01/vllm.service", "two"),
        ("gpu01/vllm.service", "three"),
        ("gpu01/kernel", "NVRM: Xid 79 (after)"),
    ]
    saved = store.checkpoint(checkpoint_name_for([journal], [], selection=selection.name))
    assert saved is not None  # at the last entry read, a dropped one: nothing is read again
    again = ingest_journalctl(store, files=[journal], selection=selection, resume_from=(older,))
    assert (again.read, again.appended) == (0, 0)


# -- advisor watch, a process inside the box -------------------------------------------------


def _logs(store: EventStore, unit: str) -> list[LogRecorded]:
    return [
        e.payload
        for e in store.read()
        if e.stream == f"{HOST}/{unit}" and isinstance(e.payload, LogRecorded)
    ]


def _own_and_pid1(store: EventStore, unit: str, restarts: int) -> bool:
    logs = _logs(store, unit)
    own = [p for p in logs if p.pid != 1 and "starting" in (p.message or "")]
    pid1 = [p for p in logs if p.pid == 1 and "Scheduled restart job" in (p.message or "")]
    return len(own) >= restarts and len(pid1) >= restarts


def _journal_cursors(box: SystemdBox, unit: str) -> list[str]:
    out = box.journalctl("-u", unit, "-o", "json", "--all")
    return [orjson.loads(line)["__CURSOR"] for line in out.splitlines() if line.strip()]


def test_watch_unit_glob_follows_a_unit_created_later(
    box: SystemdBox, tmp_path: Path, sqlite_url: str, opener: Opener
) -> None:
    store = opener(sqlite_url)  # created before the watcher opens it
    with watching(box, sqlite_url, "--unit", "vllm-*.service") as watch:
        watch.wait_until_watching()
        assert watch.proc.poll() is None  # no unit matches, none has logged: it runs
        # The other unit starts first, so its lines are read before the matching unit's.
        box.install("other-late.service", _looping("/bin/sh -c 'echo starting; exit 1'"))
        box.systemctl("start", "other-late.service")
        box.install("vllm-late.service", _looping("/bin/sh -c 'echo starting; exit 1'"))
        box.systemctl("start", "vllm-late.service")
        _wait(
            "vllm-late's own lines and PID 1's about it",
            lambda: _own_and_pid1(store, "vllm-late.service", 2),
            watch.proc,
        )
        assert watch.stop() == 0
    streams = {e.stream for e in store.read()}
    assert f"{HOST}/other-late.service" not in streams
    assert _journal_cursors(box, "other-late.service")  # it did log
    logs = _logs(store, "vllm-late.service")
    assert {p.unit for p in logs} == {"vllm-late.service"}
    assert any(p.pid == 1 and "Main process exited" in (p.message or "") for p in logs)


def test_watch_discovers_a_crash_loop_started_later(
    box: SystemdBox, tmp_path: Path, sqlite_url: str, opener: Opener
) -> None:
    store = opener(sqlite_url)
    vllm = _fake_vllm(tmp_path / "bin")
    with watching(box, sqlite_url) as watch:
        watch.wait_until_watching()
        assert watch.said("watching for inference servers (none yet")
        time.sleep(1)
        assert watch.proc.poll() is None  # nothing matches yet: it goes on
        box.install("helper.service", _looping("/bin/sh -c 'echo helper starting; exit 1'"))
        box.systemctl("start", "helper.service")
        box.install("vllm-loop.service", _looping(f"{vllm} serve /models/m --port 8000"))
        box.systemctl("start", "vllm-loop.service")
        _wait(
            "the crash loop's lines",
            lambda: _own_and_pid1(store, "vllm-loop.service", 2),
            watch.proc,
        )
        assert box.show("vllm-loop.service", "SubState")["SubState"] in (
            "auto-restart",
            "running",
        )  # crash-looping, as it was throughout
        assert watch.said("watching vllm-loop.service (vllm")
        assert watch.stop() == 0
    assert f"{HOST}/helper.service" not in {e.stream for e in store.read()}
    assert _journal_cursors(box, "helper.service")
    messages = [p.message for p in _logs(store, "vllm-loop.service")]
    assert "vllm serve /models/m --port 8000 starting" in messages
    assert "RuntimeError: CUDA error: out of memory" in messages


def test_watch_stops_on_sigterm_and_resumes_without_duplicates(
    box: SystemdBox, tmp_path: Path, sqlite_url: str, opener: Opener
) -> None:
    store = opener(sqlite_url)
    unit = "vllm-resume.service"
    box.install(unit, _looping("/bin/sh -c 'echo starting; exit 1'"))
    with watching(box, sqlite_url, "--unit", "vllm-*.service") as watch:
        watch.wait_until_watching()
        box.systemctl("start", unit)
        _wait("the first lines", lambda: _own_and_pid1(store, unit, 1), watch.proc)
        assert watch.stop() == 0
    stored = len(_logs(store, unit))
    # While nobody watches, the unit goes on crash-looping.
    _wait(
        "lines logged while watch is down", lambda: len(_journal_cursors(box, unit)) >= stored + 8
    )
    with watching(box, sqlite_url, "--unit", "vllm-*.service") as watch:
        watch.wait_until_watching()
        _wait(
            "the lines logged while it was down",
            lambda: len(_logs(store, unit)) > stored,
            watch.proc,
        )
        box.systemctl("stop", unit)
        expected = _journal_cursors(box, unit)
        _wait(
            "every line of the unit", lambda: len(_logs(store, unit)) >= len(expected), watch.proc
        )
        time.sleep(0.5)
        assert watch.stop() == 0
    # Every entry of the unit once, in the journal's order: none lost, none twice.
    assert [p.cursor for p in _logs(store, unit)] == expected
    checkpoint = store.checkpoint("journalctl:system:vllm-*.service+kernel")
    assert checkpoint is not None and checkpoint["cursor"]


def test_the_shipped_unit_starts_and_stays_up_with_no_inference_unit(
    box: SystemdBox, tmp_path: Path, sqlite_url: str, opener: Opener
) -> None:
    store = opener(sqlite_url)
    shipped = (ROOT / "deploy" / "advisor-watch.service").read_text()
    box.install("advisor-watch.service", shipped, reload=False)
    dropin = box.units_dir / "advisor-watch.service.d"
    dropin.mkdir()
    # This test's interpreter, store, host key and GPU-less host; no state folder on the
    # shared disk.
    (dropin / "test.conf").write_text(
        f"[Service]\nExecStart=\nExecStart={sys.executable} -m advisor watch --no-gpu\n"
        f"Environment=ADVISOR_DB={sqlite_url} PYTHONPATH={ROOT} "
        f"ADVISOR_KEY={os.environ['ADVISOR_KEY']}\nStateDirectory=\n"
    )
    box.systemctl("daemon-reload")
    box.systemctl("start", "advisor-watch.service")  # Type=notify: returns once READY=1
    time.sleep(2)
    shown = box.show("advisor-watch.service", "ActiveState", "SubState", "NRestarts", "StatusText")
    assert (shown["ActiveState"], shown["SubState"], shown["NRestarts"]) == (
        "active",
        "running",
        "0",
    )
    assert shown["StatusText"].startswith("watching for inference servers")
    vllm = _fake_vllm(tmp_path / "bin")
    box.install("vllm-later.service", _looping(f"{vllm} serve m"))
    box.systemctl("start", "vllm-later.service")
    _wait("the server started later", lambda: _own_and_pid1(store, "vllm-later.service", 1))
    box.systemctl("stop", "advisor-watch.service")
    shown = box.show("advisor-watch.service", "Result", "ExecMainStatus", "NRestarts")
    assert (shown["Result"], shown["ExecMainStatus"], shown["NRestarts"]) == ("success", "0", "0")


def test_ingest_journal_follows_a_glob_before_any_unit_matches(
    box: SystemdBox, sqlite_url: str, opener: Opener
) -> None:
    """`ingest journal --follow --unit GLOB`: the same reader, without the kernel's lines."""
    store = opener(sqlite_url)
    with watching(
        box,
        sqlite_url,
        "--follow",
        "--unit",
        "vllm-*.service",
        "--no-diagnose",
        command=("ingest", "journal"),
    ) as follower:
        time.sleep(1.5)
        assert follower.proc.poll() is None, "\n".join(follower.lines)
        box.install("vllm-b.service", _looping("/bin/sh -c 'echo starting; exit 1'"))
        box.install("other-b.service", _looping("/bin/sh -c 'echo starting; exit 1'"))
        box.systemctl("start", "other-b.service", "vllm-b.service")
        _wait("vllm-b's lines", lambda: _own_and_pid1(store, "vllm-b.service", 1), follower.proc)
        assert follower.stop() == 0
    assert {e.stream for e in store.read()} == {f"{HOST}/vllm-b.service"}
    assert store.checkpoint("journalctl:system:vllm-*.service") is not None
