"""The docker and podman stand-ins (advisor.sim.container_cli) as real systemd units in a box:
the engine gets exactly the words after the image and the `-e` variables, runs in a scope of its
own (not the unit's cgroup), is found by `inspect_pid` / `container_pids` run inside the box,
its lines reach the journal under the unit, `systemctl stop` stops it through the forwarded
SIGTERM; a client killed leaves the container behind (docker's name conflict, podman's
--replace, `docker stop` / `rm`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from advisor.sim.box import SystemdBox
from advisor.sim.container_cli import main
from advisor.sim.standin import write_container_standins
from tests.conftest import ROOT
from tests.waiting import wait

UNIT = "vllm.service"
# The probe stands for the engine: it records how it was started, has a child, prints a line on
# stdout and one on stderr, and on SIGTERM says so and exits 3 (a status to see come back).
PROBE = """#!{python}
import json, os, signal, subprocess, sys, time
child = subprocess.Popen(["sleep", "600"])
record = {{"pid": os.getpid(), "argv": sys.argv, "env": dict(os.environ), "child": child.pid,
          "cgroup": open("/proc/self/cgroup").read()}}
with open({log!r}, "a") as f:
    f.write(json.dumps(record) + "\\n")
def term(*_):
    print("probe got SIGTERM", flush=True)
    child.kill()
    sys.exit(3)
signal.signal(signal.SIGTERM, term)
print("probe ready", flush=True)
print("probe warming up", file=sys.stderr, flush=True)
while True:
    time.sleep(1)
"""
IMAGE_ENV = {"PATH", "HOSTNAME", "HOME"}
# Not the client's: Python sets LC_CTYPE in its own environment (PEP 538), and systemd-run --scope
# gives its command the scope's INVOCATION_ID.
OWN_ENV = {"LC_CTYPE", "INVOCATION_ID"}


@dataclass
class Setup:
    box: SystemdBox
    docker: Path
    podman: Path
    probe: Path
    log: Path  # the probe's records, one a start
    state: Path
    argv_log: Path

    def starts(self) -> list[dict[str, Any]]:
        text = self.log.read_text() if self.log.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    def wait_starts(self, n: int) -> dict[str, Any]:
        wait(f"{n} engine start(s)", lambda: len(self.starts()) >= n)
        return self.starts()[n - 1]

    def install(self, exec_start: str, environment: str = "") -> None:
        env = f"Environment=ADVISOR_SIM_ARGV_LOG={self.argv_log} {environment}\n"
        self.box.install(UNIT, f"[Service]\n{env}ExecStart={exec_start}\nTimeoutStopSec=20\n")

    def in_box(self, code: str) -> Any:
        """Python run inside the box (its PID namespace, its /proc and cgroups)."""
        script = f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n{code}"
        argv = self.box.nsenter_argv([sys.executable, "-c", script])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        return json.loads(done.stdout)

    def gone(self, pid: object) -> bool:
        """No process ``pid`` in the box."""
        return (
            self.in_box(f"import os, json\nprint(json.dumps(not os.path.exists('/proc/{pid}')))")
            is True
        )

    def state_of(self, unit: str) -> str:
        return self.box.show(unit, "ActiveState")["ActiveState"]

    def client(self, runtime: str, *args: str) -> subprocess.CompletedProcess[str]:
        path = self.docker if runtime == "docker" else self.podman
        return self.box.run([str(path), *args], check=False)

    def journal(self) -> list[dict[str, str]]:
        """The unit's journal (``journalctl -u`` inside the box)."""
        out = self.box.run(["journalctl", "-u", UNIT, "-o", "json", "--no-pager"]).stdout
        return [json.loads(line) for line in out.splitlines()]


@pytest.fixture
def setup(box: SystemdBox, tmp_path: Path) -> Iterator[Setup]:
    log = tmp_path / "starts.jsonl"
    probe = tmp_path / "probe"
    probe.write_text(PROBE.format(python=sys.executable, log=str(log)))
    probe.chmod(0o755)
    images = {"vllm/vllm-openai": [str(probe), "serve"], "lmsysorg/sglang": []}
    state = tmp_path / "state"
    docker, podman = write_container_standins(tmp_path / "bin", images, state)
    yield Setup(box, docker, podman, probe, log, state, tmp_path / "argv.jsonl")


def scope_of(start: dict[str, Any]) -> str:
    return next(line[3:] for line in str(start["cgroup"]).splitlines() if line.startswith("0::"))


def test_docker_run_in_a_unit(setup: Setup, tmp_path: Path) -> None:
    env_file = tmp_path / "vllm.env"
    env_file.write_text("# tokens\nFROM_FILE=1\nMODE=from-file\n")
    setup.install(
        f"{setup.docker} run --rm --name vllm --gpus all -v /models:/models -e HF_TOKEN "
        f"-e MODE=test --env-file {env_file} -p 8000:8000 --ipc=host vllm/vllm-openai:v0.8.5 "
        "--model /m --max-num-seqs 8",
        "HF_TOKEN=hf_abc SECRET=not-passed",
    )
    setup.box.systemctl("start", UNIT)
    start = setup.wait_starts(1)
    assert start["argv"] == [str(setup.probe), "serve", "--model", "/m", "--max-num-seqs", "8"]
    env = dict(start["env"])
    assert set(env) - OWN_ENV == IMAGE_ENV | {
        "ADVISOR_SIM_ARGV_LOG",
        "HF_TOKEN",
        "MODE",
        "FROM_FILE",
    }
    assert (env["HF_TOKEN"], env["MODE"], env["FROM_FILE"]) == ("hf_abc", "test", "1")
    # Its own scope, not the unit's cgroup
    assert scope_of(start) == "/system.slice/docker-vllm.scope"
    props = setup.box.show(UNIT, "ControlGroup", "MainPID", "InvocationID")
    assert props["ControlGroup"] == "/system.slice/vllm.service"
    assert setup.box.show("docker-vllm.scope", "ActiveState")["ActiveState"] == "active"
    # Found by the runtime's inspect, inside the box: the engine and its child, not the client
    found = setup.in_box(
        "import json\nfrom advisor.execution.containers import container_pids, inspect_pid\n"
        f"print(json.dumps([inspect_pid({str(setup.docker)!r}, 'vllm'), "
        f"sorted(container_pids({str(setup.docker)!r}, 'vllm'))]))"
    )
    assert found == [start["pid"], sorted([start["pid"], start["child"]])]
    assert int(props["MainPID"]) not in found[1]
    ps = setup.client("docker", "ps").stdout
    assert "vllm/vllm-openai:v0.8.5" in ps and "vllm" in ps.splitlines()[1]
    # Its lines, under the unit, from the client (as an attached docker run forwards them)
    wait(
        "the engine's lines", lambda: "probe warming up" in [e["MESSAGE"] for e in setup.journal()]
    )
    ready = next(e for e in setup.journal() if e.get("MESSAGE") == "probe ready")
    assert (ready["_SYSTEMD_UNIT"], ready["_PID"]) == (UNIT, props["MainPID"])
    assert ready["_SYSTEMD_INVOCATION_ID"] == props["InvocationID"]
    [logged] = [json.loads(line) for line in setup.argv_log.read_text().splitlines()]
    assert logged["engine"] == "docker" and logged["argv"][1:3] == ["run", "--rm"]
    # Stopped through the forwarded SIGTERM: the engine's status comes back, --rm forgets it
    setup.box.systemctl("stop", UNIT)
    after = setup.box.show(UNIT, "ExecMainStatus", "ActiveState")
    assert (after["ExecMainStatus"], after["ActiveState"]) == ("3", "failed")
    assert "probe got SIGTERM" in [e["MESSAGE"] for e in setup.journal()]
    assert not (setup.state / "vllm.json").exists()
    wait("the scope to go", lambda: setup.state_of("docker-vllm.scope") == "inactive")


def test_podman_image_with_a_command_and_replace(setup: Setup) -> None:
    setup.install(
        f"{setup.podman} run --replace --name sg --device nvidia.com/gpu=all -e A=1 "
        f"lmsysorg/sglang:latest {setup.probe} --model-path /m --port 30000"
    )
    setup.box.systemctl("start", UNIT)
    first = setup.wait_starts(1)
    assert first["argv"] == [str(setup.probe), "--model-path", "/m", "--port", "30000"]
    assert scope_of(first) == "/system.slice/libpod-sg.scope"
    # The client killed: the container is left behind, running, in its scope
    setup.box.systemctl("kill", "--kill-whom=main", "--signal=SIGKILL", UNIT)
    wait("the client's end", lambda: setup.state_of(UNIT) == "failed")
    inspect = setup.client(
        "podman", "inspect", "--format", "{{.State.Running}} {{.State.Pid}}", "sg"
    )
    assert inspect.stdout.split() == ["true", str(first["pid"])]
    # Started again: --replace stops the one left behind and runs a new one
    setup.box.systemctl("start", UNIT)
    second = setup.wait_starts(2)
    assert second["pid"] != first["pid"]
    assert setup.gone(first["pid"])
    setup.box.systemctl("stop", UNIT)
    assert setup.box.show(UNIT, "ExecMainStatus")["ExecMainStatus"] == "3"
    stopped = setup.client("podman", "inspect", "--format", "{{.State.Running}}", "sg")
    assert stopped.stdout.strip() == "false"  # no --rm: still there, exited


def test_a_container_left_behind_blocks_its_name_until_removed(setup: Setup) -> None:
    setup.install(f"{setup.docker} run --name vllm vllm/vllm-openai:v0.8.5 --model /m")
    setup.box.systemctl("start", UNIT)
    first = setup.wait_starts(1)
    setup.box.systemctl("kill", "--kill-whom=main", "--signal=SIGKILL", UNIT)
    wait("the client's end", lambda: setup.state_of(UNIT) == "failed")
    setup.box.systemctl("reset-failed", UNIT)
    setup.box.systemctl("start", UNIT, check=False)
    wait("the second start to fail", lambda: setup.state_of(UNIT) == "failed")
    assert setup.box.show(UNIT, "ExecMainStatus")["ExecMainStatus"] == "125"
    messages = [e["MESSAGE"] for e in setup.journal()]
    assert any('The container name "/vllm" is already in use' in m for m in messages)
    assert len(setup.starts()) == 1
    # docker stop: SIGTERM to the engine left behind; then rm frees the name
    stop = setup.client("docker", "stop", "-t", "5", "vllm")
    assert (stop.returncode, stop.stdout.strip()) == (0, "vllm")
    status = setup.client(
        "docker", "inspect", "--format", "{{.State.Running}} {{.State.Pid}}", "vllm"
    )
    assert status.stdout.split() == ["false", "0"]
    assert setup.gone(first["pid"])
    assert setup.client("docker", "rm", "vllm").returncode == 0
    assert setup.client("docker", "rm", "-f", "vllm").returncode == 0  # gone: -f says nothing
    assert setup.client("docker", "rm", "vllm").returncode == 1
    setup.box.systemctl("reset-failed", UNIT)
    setup.box.systemctl("start", UNIT)
    assert setup.wait_starts(2)["pid"] != first["pid"]
    kill = setup.client("docker", "kill", "vllm")
    assert kill.returncode == 0
    wait("the unit to end", lambda: setup.state_of(UNIT) == "failed")
    assert setup.box.show(UNIT, "ExecMainStatus")["ExecMainStatus"] == str(128 + 9)


def test_the_client_outside_systemd(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Without a running systemd the engine is a plain child; its output and status come back
    through the client; the client's own errors are docker's."""
    engine = [sys.executable, "-c", "import os, sys; print('hi', os.environ['A']); sys.exit(7)"]
    images, state = {"vllm/vllm-openai": engine}, tmp_path / "state"
    if not Path("/run/systemd/system").is_dir():
        assert main("docker", images, state, ["run", "--rm", "-e", "A=1", "vllm/vllm-openai"]) == 7
        assert capfd.readouterr().out == "hi 1\n"
        assert list(state.glob("*")) == []
    assert main("docker", images, state, ["run", "--rm", "nginx"]) == 125
    assert main("docker", images, state, ["run", "--bogus-flag", "vllm/vllm-openai"]) == 125
    assert main("docker", images, state, ["run", "-d", "vllm/vllm-openai"]) == 125
    assert main("docker", images, state, ["run", "--entrypoint", "nope", "vllm/vllm-openai"]) == 127
    assert main("podman", images, state, ["inspect", "ghost"]) == 1
    assert main("docker", images, state, ["frobnicate"]) == 1
    err = capfd.readouterr().err
    assert "docker: Unable to find image 'nginx'" in err
    assert "Error: No such container: ghost" in err
