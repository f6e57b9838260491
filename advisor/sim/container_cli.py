"""Stand-ins for the ``docker`` and ``podman`` clients with a local daemon, for units in a
systemd box (``advisor.sim.box``): what advisor sees of a containerised inference server.

``run`` reads its line with ``advisor.execution.containers.parse_run`` and starts the image's
command (``images``: repository → what its ENTRYPOINT runs) with the words after the image, the
``--env-file``/``-e`` variables (and the client's ``ADVISOR_SIM_*``) and nothing else of the
client's environment, not in the unit's cgroup: under systemd in a scope of its own
(``systemd-run --scope``, ``docker-NAME.scope`` / ``libpod-NAME.scope``), else as a child. Its
output goes to ``state/NAME.out``/``.err``, which the client copies to its own stdout/stderr (so
it reaches the journal under the unit, from the client's PID, as an attached client forwards a
container's output; a killed client leaves the engine writing on). SIGTERM, SIGINT, SIGHUP,
SIGQUIT, SIGUSR1/2 are forwarded (sig-proxy); the client exits with the engine's status (128+N
for signal N; 125 for its own errors, 127 for no such command; ``-d`` is not simulated). State:
``state/NAME.json`` (``--rm``: removed at exit); a name in use is docker's conflict (podman's
``--replace`` replaces). ``inspect``, ``stop``, ``kill``, ``rm``, ``ps`` read it; a container
runs while its PID (with its start time) lives, so one left behind is seen and can be stopped.
``ADVISOR_SIM_ARGV_LOG``: ``run`` appends ``{"pid", "argv", "env", "engine"}``. Never a shell.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from advisor.execution.containers import ContainerRun, image_engine, parse_run, subcommand
from advisor.execution.containers import valid_container as valid_name

IMAGE_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FORWARDED: Final = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
SCOPE_PREFIX: Final = {"docker": "docker", "podman": "libpod"}
CONFLICT: Final = {
    "docker": 'Error response from daemon: Conflict. The container name "/{name}" is already in '
    'use by container "{id}". You have to remove (or rename) that container to be able to '
    "reuse that name.",
    "podman": 'creating container storage: the container name "{name}" is already in use by '
    "{id}. You have to remove that container to be able to reuse that name: that name is "
    "already in use",
}
Record = dict[str, Any]
Images = Mapping[str, Sequence[str]]


class Refused(Exception):
    """The client's own error: ``Refused(message, exit status)``."""


def _starttime(pid: int) -> str | None:
    """A live process's start time (field 22 of /proc/PID/stat); None when gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _alive(pid: int, started: str | None) -> bool:  # the same process, still running
    return pid > 0 and started is not None and _starttime(pid) == started


def _write(state: Path, record: Record) -> None:
    tmp = state / f".{record['name']}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record))
    os.replace(tmp, state / f"{record['name']}.json")


def _load(state: Path, ref: str) -> Record | None:
    """The container named ``ref`` (or whose ID starts with it), ``running`` worked out anew."""
    paths = [state / f"{ref}.json"] if valid_name(ref) else []
    paths += sorted(state.glob("*.json")) if re.fullmatch(r"[0-9a-f]{3,64}", ref) else []
    for path in paths:
        with contextlib.suppress(OSError, ValueError, KeyError):
            record: Record = json.loads(path.read_text())
            if record["name"] == ref or str(record["id"]).startswith(ref):
                return record | {"running": _alive(record["pid"], record.get("started"))}
    return None


def _finish(state: Path, record: Record, exit_code: int | None) -> None:
    """The engine has exited: forget a ``--rm`` container, else record how it ended."""
    if record.get("rm"):
        for suffix in ("json", "out", "err"):
            (state / f"{record['name']}.{suffix}").unlink(missing_ok=True)
    elif (state / f"{record['name']}.json").exists():
        _write(state, record | {"running": False, "pid": 0, "exit_code": exit_code})


def _wait_gone(pid: int, started: str | None, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid, started) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid, started)


def _stop(state: Path, record: Record, timeout_s: float, sig: int = signal.SIGTERM) -> None:
    """``sig``, then SIGKILL after ``timeout_s``; the bookkeeping when no client is left."""
    pid, started = int(record.get("pid") or 0), record.get("started")
    client, client_started = record.get("client") or (0, None)
    orphan = not _alive(client, client_started)
    for signum, wait_s in ((sig, timeout_s), (signal.SIGKILL, 10.0)):
        if _alive(pid, started):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        if _wait_gone(pid, started, wait_s):
            break
    if orphan:
        _finish(state, record, None)
    else:  # the client records the end
        _wait_gone(client, client_started, 5.0)


def _environment(run: ContainerRun, client: Mapping[str, str], cid: str) -> dict[str, str]:
    """The container's variables: the image's, the env files', then ``-e`` (later ones win)."""
    env = {"PATH": IMAGE_PATH, "HOSTNAME": cid[:12], "HOME": "/root"}
    env |= {k: v for k, v in client.items() if k.startswith("ADVISOR_SIM_")}
    pairs: list[tuple[str, str | None]] = []
    for name in run.env_files:
        try:
            lines = [s.lstrip() for s in Path(name).read_text().splitlines()]
        except OSError as e:
            raise Refused(f"open {name}: {e.strerror or e}", 125) from e
        for key, eq, text in (s.partition("=") for s in lines if s and not s.startswith("#")):
            pairs.append((key, text if eq else None))
    for key, value in [*pairs, *((e.name, e.value) for e in run.env)]:
        if not key:
            raise Refused("invalid environment variable: =", 125)
        if (given := client.get(key) if value is None else value) is not None:
            env[key] = given
    return env


def _claim(state: Path, runtime: str, run: ContainerRun, name: str) -> None:
    """Take ``name``: docker's conflict when taken (podman's ``--replace`` replaces)."""
    state.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            os.close(os.open(state / f"{name}.json", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return
        except FileExistsError:
            old = _load(state, name) or {"name": name, "id": "?"}
        if not run.replace:
            break
        _stop(state, old, 10.0)
        (state / f"{name}.json").unlink(missing_ok=True)
    raise Refused(CONFLICT.get(runtime, CONFLICT["docker"]).format(name=name, id=old["id"]), 125)


def _scope_prefix(runtime: str, name: str) -> list[str]:
    """``systemd-run --scope …`` under systemd (once a scope of that name is gone), else []."""
    tool = shutil.which("systemd-run")
    if tool is None or not Path("/run/systemd/system").is_dir():
        return []
    unit = f"{SCOPE_PREFIX.get(runtime, runtime)}-{name}.scope"
    deadline = time.monotonic() + 5
    while (Path("/sys/fs/cgroup/system.slice") / unit).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return [tool, "--scope", "--quiet", "--collect", f"--unit={unit}", "--"]


def _log_argv(runtime: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
    if path := env.get("ADVISOR_SIM_ARGV_LOG", "").strip():
        names = [n.strip() for n in env.get("ADVISOR_SIM_ARGV_ENV", "").split(",") if n.strip()]
        line = {"pid": os.getpid(), "argv": list(argv), "env": {n: env.get(n) for n in names}}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line | {"engine": runtime}) + "\n")


def _prepare(
    runtime: str, argv: Sequence[str], images: Images, state: Path
) -> tuple[Record, list[str], dict[str, str]]:
    """Everything checked and the name taken: (the container's record, its command, its env)."""
    run = parse_run(argv)
    if run is None or not run.certain or run.detached:
        raise Refused(f"not a run line this stand-in takes. See '{runtime} run --help'.", 125)
    key = image_engine(run.image, {repo: repo for repo in images})
    if key is None:
        raise Refused(f"Unable to find image '{run.image}' locally: pull access denied", 125)
    cid = secrets.token_hex(32)
    name = run.name if run.name is not None else f"{runtime}_{cid[:12]}"
    if not valid_name(name):
        raise Refused(f"Invalid container name ({name}), only [a-zA-Z0-9][a-zA-Z0-9_.-]", 125)
    entry = [run.entrypoint] if run.entrypoint is not None else list(images[key])
    command = entry + list(argv[run.command_start :])
    env = _environment(run, os.environ, cid)
    if not command or shutil.which(command[0], path=env["PATH"]) is None:
        what = command[0] if command else "no command specified"
        raise Refused(f'exec: "{what}": executable file not found in $PATH', 127)
    _claim(state, runtime, run, name)
    record = {"id": cid, "name": name, "pid": 0, "running": False, "exit_code": None}
    record |= {"image": run.image, "args": list(argv[run.command_start :]), "rm": run.rm}
    record |= {"client": (os.getpid(), _starttime(os.getpid())), "runtime": runtime}
    return record, command, env


def run_container(runtime: str, argv: Sequence[str], images: Images, state: Path) -> int:
    """``RUNTIME run …`` (``argv`` whole, the program first): the engine's exit status."""
    pending: list[int] = []
    engine: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, _frame: object) -> None:
        if not engine:
            pending.append(signum)
        with contextlib.suppress(ProcessLookupError, IndexError):
            os.kill(engine[0].pid, signum)

    for name in FORWARDED:
        signal.signal(signal.Signals[name], forward)
    _log_argv(runtime, argv, os.environ)
    record, command, env = _prepare(runtime, argv, images, state)
    if pending:  # stopped while starting: no engine
        _finish(state, record | {"rm": True}, None)
        return 128 + pending[0]
    logs = [state / f"{record['name']}.out", state / f"{record['name']}.err"]
    with logs[0].open("wb") as out, logs[1].open("wb") as err:
        try:
            proc = subprocess.Popen(
                _scope_prefix(runtime, record["name"]) + command,
                env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            )  # fmt: skip
        except OSError as e:
            _finish(state, record | {"rm": True}, None)
            raise Refused(f"starting the container: {e}", 126) from e
    engine.append(proc)
    record |= {"pid": proc.pid, "started": _starttime(proc.pid), "running": True}
    _write(state, record)
    if "--sdnotify=conmon" in argv:  # a quadlet's Type=notify: ready once the container runs
        _sd_notify(b"READY=1")
    for signum in pending:
        forward(signum, None)
    status = _attach(proc, logs)
    code = 128 - status if status < 0 else status
    _finish(state, record, code)
    return code


def _sd_notify(message: bytes) -> None:
    path = os.environ.get("NOTIFY_SOCKET", "")
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(message, "\0" + path[1:] if path.startswith("@") else path) if path else None


def _attach(proc: subprocess.Popen[bytes], logs: Sequence[Path]) -> int:
    """Copy what the engine writes (to its log files) to the client's own stdout and stderr,
    as an attached client forwards a container's output, until it exits; its status."""
    with logs[0].open("rb") as out, logs[1].open("rb") as err:
        pairs = ((out, sys.stdout.buffer), (err, sys.stderr.buffer))
        while True:
            status = proc.poll()
            for source, sink in pairs:
                with contextlib.suppress(OSError):
                    while chunk := source.read(1 << 16):
                        sink.write(chunk)
                    sink.flush()
            if status is not None:
                return status
            time.sleep(0.05)


def _options(args: Sequence[str], with_value: set[str]) -> tuple[dict[str, str], list[str]]:
    """``--opt v``, ``--opt=v``, ``-o v``, switches (``-aq``: two) up to the first positional."""
    options: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-", "--"):
        word, i = args[i], i + 1
        name, eq, value = word.lstrip("-").partition("=")
        if eq or name in with_value:
            options[name] = value if eq else (args[i] if i < len(args) else "")
            i += not eq
        else:
            options |= dict.fromkeys([name] if word.startswith("--") else list(name), "true")
    return options, list(args[i + (args[i : i + 1] == ["--"]) :])


def _fields(runtime: str, record: Record) -> dict[str, object]:
    running = bool(record["running"])
    return {
        "Id": record["id"],
        "Name": ("/" if runtime == "docker" else "") + record["name"],
        "State.Pid": record["pid"] if running else 0,
        "State.Running": str(running).lower(),
        "State.Status": "running" if running else "exited",
        "State.ExitCode": record.get("exit_code") or 0,
        "Config.Image": record["image"],
    }


def _inspect(runtime: str, args: Sequence[str], state: Path) -> int:
    """``inspect [--type container] [-f|--format TEMPLATE] REF...``: the template's ``{{.X}}``
    (the fields of ``_fields``), else those fields as JSON."""
    opts, refs = _options(args, {"f", "format", "type"})
    fmt = opts.get("format", opts.get("f"))
    found = {ref: _load(state, ref) for ref in refs}
    docs = [_fields(runtime, record) for record in found.values() if record is not None]
    for ref in (ref for ref, record in found.items() if record is None):
        print(f"Error: No such container: {ref}", file=sys.stderr)
    if fmt is None:
        print(json.dumps(docs, indent=4))
    for doc in docs if fmt is not None else []:
        field = lambda m: str(doc.get(m[1], "<no value>"))  # noqa: B023, E731
        print(re.sub(r"\{\{\s*\.([\w.]+)\s*\}\}", field, str(fmt)))
    return 0 if refs and None not in found.values() else 1


def _each(state: Path, refs: Sequence[str], act: Callable[[Record], str | None]) -> int:
    """``act`` on each container (None, or what is wrong), its name printed when done."""
    status = 0
    for ref in refs:
        record = _load(state, ref)
        problem = f"No such container: {ref}" if record is None else act(record)
        if problem is not None:
            print(f"Error response from daemon: {problem}", file=sys.stderr)
            status = 1
        else:
            print(ref)
    return status


def _act(state: Path, sub: str, record: Record, opts: Mapping[str, str]) -> str | None:
    """``stop``, ``kill`` or ``rm`` one container: None, or what is wrong."""
    name = opts.get("s", opts.get("signal", "TERM" if sub == "stop" else "KILL")).upper()
    sig = int(name) if name.isdigit() else int(signal.Signals["SIG" + name.removeprefix("SIG")])
    if sub == "stop":
        _stop(state, record, float(opts.get("t", opts.get("time", opts.get("timeout", "10")))), sig)
    elif sub == "kill" and record["running"]:
        os.kill(int(record["pid"]), sig)
    elif sub == "kill":
        return f"cannot kill container: {record['name']}: container is not running"
    elif record["running"] and "f" not in opts and "force" not in opts:
        return f"cannot remove container {record['name']}: container is running"
    else:
        _stop(state, record | {"rm": True}, 0.0, signal.SIGKILL)
        (state / f"{record['name']}.json").unlink(missing_ok=True)
    return None


def command(runtime: str, args: Sequence[str], state: Path) -> int:
    """``inspect``, ``stop [-t N]``, ``kill [-s SIG]``, ``rm [-f]``, ``ps [-a] [-q]``
    (``args``: the subcommand and what follows)."""
    sub = args[0]
    opts, refs = _options(args[1:], {"f", "format", "type", "t", "time", "timeout", "s", "signal"})
    if sub == "inspect":
        return _inspect(runtime, args[1:], state)
    if sub in ("stop", "kill", "rm"):
        if sub == "rm" and ("f" in opts or "force" in opts):  # no error for what is not there
            refs = [ref for ref in refs if _load(state, ref) is not None]
        return _each(state, refs, lambda record: _act(state, sub, record, opts))
    if sub != "ps":
        raise Refused(f"'{sub}' is not a {runtime} command (not simulated).", 1)
    records = [r for p in sorted(state.glob("*.json")) if (r := _load(state, p.stem))]
    shown = [r for r in records if "a" in opts or "all" in opts or r["running"]]
    if "q" in opts or "quiet" in opts:
        print("\n".join(r["id"][:12] for r in shown))
        return 0
    print("CONTAINER ID   IMAGE   STATUS   NAMES")
    for r in shown:
        status = "Up" if r["running"] else f"Exited ({r.get('exit_code') or 0})"
        print(f"{r['id'][:12]}   {r['image']}   {status}   {r['name']}")
    return 0


def main(runtime: str, images: Images, state: Path, argv: Sequence[str] | None = None) -> int:
    """The client: ``argv`` (default ``sys.argv[1:]``) after the program; the exit status."""
    words = [runtime, *(sys.argv[1:] if argv is None else argv)]
    found = subcommand(words)
    try:
        if found is None:
            raise Refused(f"Usage: {runtime} [OPTIONS] COMMAND", 1)
        k = found[1] + (words[found[1]] == "container" and found[1] + 1 < len(words))
        if words[k] == "run":
            return run_container(runtime, words, images, state)
        return command(runtime, words[k:], state)
    except Refused as e:
        print({"docker": "docker: "}.get(runtime, "Error: ") + e.args[0], file=sys.stderr)
        return int(e.args[1])
