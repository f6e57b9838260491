"""What the stand-in servers for SGLang, TGI and llama.cpp's llama-server share
(``advisor.sim.sglang_cli``, ``tgi_cli``, ``llamacpp_cli``), and ``write_standins``, which makes
their commands launchable the way the real engines are launched.

Like the vLLM stand-in (``advisor.sim.vllm_cli``), each is a real process with the engine's own
command line; the simulation's settings come from the environment, with the meanings vllm_cli
documents:

    ADVISOR_SIM_CLAIMS         folder of GPU memory claims (the simulated driver's)
    ADVISOR_SIM_GPUS           GPU indices the server may use, "0,1,2,3" (default 0..N-1)
    ADVISOR_SIM_GPU_GIB        memory of each GPU (default 96)
    ADVISOR_SIM_SPEED          divide start-up durations by this (default 1)
    ADVISOR_SIM_WEDGE_ON_STOP  1: after SIGTERM (and the engine's first shutdown line), hang
                               until SIGKILL
    ADVISOR_SIM_WEIGHTS_GIB    override the model card's weights (all ranks together)
    ADVISOR_SIM_ARGV_LOG       append {"pid", "argv", "env", "engine"} as a JSON line at start
    ADVISOR_SIM_ARGV_ENV       names of the variables that line records, comma-separated

Memory is claimed per GPU as it is allocated (``advisor.sim.claims.write_claim``) and released
by dying: the simulated driver frees it after the process is gone. What other processes claim
on a GPU is not free, as ``cudaMemGetInfo`` would say.

Stdlib only (it runs in the server process).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Final, TextIO

from advisor.sim.claims import others_on, read_claims, write_claim
from advisor.sim.models import GIB

__all__ = [
    "GPU_NAME",
    "Run",
    "Settings",
    "Standins",
    "Terminated",
    "flag_pairs",
    "frames",
    "line_buffered",
    "log_argv",
    "repository_root",
    "settings",
    "write_standins",
]

TRUE: Final = frozenset({"1", "true", "yes", "on"})
# The simulated driver's GPU (advisor.sim.gpus.DEFAULT_GPU_NAME), compute capability 12.0.
GPU_NAME: Final = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
CONTEXT_BYTES: Final = GIB // 2  # CUDA context + library workspaces, per GPU


class Terminated(Exception):
    """SIGTERM or SIGINT arrived; raised at the next pause."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The ``ADVISOR_SIM_*`` settings a stand-in runs with."""

    gpu_gib: float = 96.0
    weights_gib: float | None = None  # all weights, summed over the ranks
    claims: Path | None = None
    gpus: tuple[int, ...] | None = None
    speed: float = 1.0
    wedge_on_stop: bool = False

    def devices(self, count: int) -> tuple[int, ...]:
        """The GPU indices of ``count`` ranks (ValueError if there are fewer)."""
        gpus = (self.gpus or tuple(range(count)))[:count]
        if count < 1 or len(gpus) < count:
            raise ValueError(f"{count} ranks need as many GPUs in ADVISOR_SIM_GPUS")
        return gpus


def _number(env: Mapping[str, str], name: str) -> float | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}: invalid float value: {raw!r}") from None


def settings(env: Mapping[str, str]) -> Settings:
    """The settings from the ``ADVISOR_SIM_*`` variables (ValueError if one is bad)."""
    gpu_gib, speed = _number(env, "ADVISOR_SIM_GPU_GIB"), _number(env, "ADVISOR_SIM_SPEED")
    claims = env.get("ADVISOR_SIM_CLAIMS", "").strip()
    gpus = env.get("ADVISOR_SIM_GPUS", "").strip()
    try:
        indices = tuple(int(g) for g in gpus.split(",") if g.strip()) if gpus else None
    except ValueError:
        raise ValueError(f"ADVISOR_SIM_GPUS: invalid GPU list: {gpus!r}") from None
    out = Settings(
        gpu_gib=96.0 if gpu_gib is None else gpu_gib,
        weights_gib=_number(env, "ADVISOR_SIM_WEIGHTS_GIB"),
        claims=Path(claims) if claims else None,
        gpus=indices,
        speed=1.0 if speed is None else speed,
        wedge_on_stop=env.get("ADVISOR_SIM_WEDGE_ON_STOP", "").strip().lower() in TRUE,
    )
    if out.speed <= 0 or out.gpu_gib <= 0:
        raise ValueError("ADVISOR_SIM_SPEED and ADVISOR_SIM_GPU_GIB must be positive")
    return out


def log_argv(env: Mapping[str, str], engine: str) -> None:
    """With ``ADVISOR_SIM_ARGV_LOG``: append this process's PID, argv, the variables named in
    ``ADVISOR_SIM_ARGV_ENV`` (null when unset) and the engine as one JSON line — the format of
    ``advisor.sim.vllm_cli.log_argv`` with ``engine`` added."""
    path = env.get("ADVISOR_SIM_ARGV_LOG", "").strip()
    if not path:
        return
    names = [n.strip() for n in env.get("ADVISOR_SIM_ARGV_ENV", "").split(",") if n.strip()]
    record = {
        "pid": os.getpid(),
        "argv": sys.argv,
        "env": {name: env.get(name) for name in names},
        "engine": engine,
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def line_buffered() -> None:
    """Every line reaches the journal at once, as with PYTHONUNBUFFERED or a C program's
    explicit fflush."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True)


def frames(site: str, table: str) -> list[str]:
    """Python traceback frames, one per ``path:line:function:code`` line of ``table`` (paths
    under ``site``), as ``traceback`` prints them without carets."""
    rows = (row.split(":", 3) for row in table.strip().splitlines())
    return [f'  File "{site}/{p}", line {n}, in {f}\n    {c}\n' for p, n, f, c in rows]


def _is_option(token: str) -> bool:
    if not token.startswith("-") or len(token) < 2:
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False


def flag_pairs(
    argv: Sequence[str], switches: Collection[str], lists: Collection[str] = ()
) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """Split a command line into (flag, values) in order and the positional arguments.
    ``--flag=value`` is one flag with its value; a flag in ``switches`` takes no value, one in
    ``lists`` every value up to the next option; any other flag (known or not) takes the next
    token unless that is an option, so an unknown flag with nothing after it is a switch."""
    pairs: list[tuple[str, list[str]]] = []
    positional: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            positional.extend(argv[i:])
            break
        if not _is_option(token):
            positional.append(token)
            continue
        flag, eq, inline = token.partition("=")
        if eq and flag.startswith("--"):
            pairs.append((flag, [inline]))
            continue
        values: list[str] = []
        if token not in switches:
            while i < len(argv) and not _is_option(argv[i]):
                values.append(argv[i])
                i += 1
                if token not in lists:
                    break
        pairs.append((token, values))
    return pairs, positional


class Run:
    """One stand-in process: pauses that see SIGTERM, output, and GPU memory claimed on the
    server's GPUs as it is allocated (others' claims are not free)."""

    def __init__(self, sim: Settings, gpus: Sequence[int]) -> None:
        self.sim = sim
        self.gpus = tuple(gpus)
        self.pid = os.getpid()
        self.own: dict[int, int] = dict.fromkeys(self.gpus, 0)
        self.term = False
        self.graceful = False  # False: SIGTERM kills, as before the engine installs a handler
        if sim.claims is not None:
            sim.claims.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ signals and time
    def watch_signals(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if not self.graceful and not self.sim.wedge_on_stop:
            self.die_of(signum)
        self.term = True

    def pause(self, nominal_s: float) -> None:
        """Sleep a nominal duration / speed, in slices, so SIGTERM is seen at once."""
        end = time.monotonic() + nominal_s / self.sim.speed
        while True:
            if self.term:
                raise Terminated
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.01))

    def wedge(self) -> None:
        """A process stuck in a CUDA call: only SIGKILL ends it."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            time.sleep(3600)

    def die_of(self, signum: int) -> None:
        """End the way a signal's default action ends a process (SIGKILL included)."""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(RuntimeError, OSError):  # a write the signal interrupted
                stream.flush()
        if signum != signal.SIGKILL:
            signal.signal(signum, signal.SIG_DFL)
        os.kill(self.pid, signum)
        while True:
            time.sleep(1)

    # ------------------------------------------------------------------ output
    @staticmethod
    def emit(text: str, stream: TextIO | None = None) -> None:
        """Write ``text`` and a newline, at once (a record ending in a newline leaves an
        empty line, as a logger's would)."""
        out = sys.stdout if stream is None else stream
        out.write(text + "\n")
        out.flush()

    # ------------------------------------------------------------------ memory
    @property
    def total(self) -> int:
        return int(self.sim.gpu_gib * GIB)

    def free(self, gpu: int) -> int:
        """Bytes free on ``gpu``: its memory less what this process and others hold."""
        held = 0
        if self.sim.claims is not None:
            held = sum(b for _, b in others_on(read_claims(self.sim.claims), self.pid, gpu))
        return self.total - held - self.own.get(gpu, 0)

    def fits(self, gpu: int, nbytes: int) -> bool:
        return nbytes <= self.free(gpu)

    def claim_all(self, nbytes: int) -> None:
        """Hold ``nbytes`` more on each of the server's GPUs."""
        for gpu in self.gpus:
            self.claim(gpu, nbytes)

    def claim(self, gpu: int, nbytes: int) -> None:
        """Hold ``nbytes`` more on ``gpu`` (no check: call ``fits`` first)."""
        self.own[gpu] = self.own.get(gpu, 0) + max(0, nbytes)
        if self.sim.claims is not None:
            write_claim(self.sim.claims, self.pid, self.own)


def repository_root() -> Path:
    """The checkout this module belongs to (the folder holding the ``advisor`` package)."""
    return Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Standins:
    """What ``write_standins`` wrote."""

    folder: Path
    tgi: Path  # bin/text-generation-launcher
    llama_server: Path  # bin/llama-server
    pythonpath: Path  # py/: PYTHONPATH for python3 -m sglang.launch_server / vllm...api_server
    sglang: Path  # py/sglang/launch_server.py
    vllm_api_server: Path  # py/vllm/entrypoints/openai/api_server.py


def _interpreter() -> str:
    interpreter = sys.executable
    if not interpreter or any(c.isspace() for c in interpreter) or len(interpreter) > 250:
        raise ValueError(f"{interpreter!r} cannot be a script's #! line")
    return interpreter


def _body(what: str, module: str, call: str) -> str:
    return (
        f'"""{what}, simulated ({module})."""\n'
        "import sys\n\n"
        f"sys.path.insert(0, {str(repository_root())!r})\n\n"
        f"from {module} import main  # noqa: E402\n\n"
        'if __name__ == "__main__":\n'
        f"    sys.exit({call})\n"
    )


def _write(path: Path, text: str, *, executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def write_standins(folder: Path) -> Standins:
    """Write the engines' commands under ``folder``: ``bin/text-generation-launcher`` and
    ``bin/llama-server`` (executables run by this interpreter, as ``write_vllm_script``
    writes ``vllm``), and under ``py/`` the packages ``sglang`` (``python3 -m
    sglang.launch_server``) and ``vllm`` (``python3 -m vllm.entrypoints.openai.api_server``,
    the existing vLLM stand-in), for ``PYTHONPATH=folder/py``. Each inserts this checkout on
    ``sys.path``; their paths."""
    shebang = f"#!{_interpreter()}\n"
    tgi = _write(
        folder / "bin" / "text-generation-launcher",
        shebang + _body("TGI's text-generation-launcher", "advisor.sim.tgi_cli", "main()"),
        executable=True,
    )
    llama = _write(
        folder / "bin" / "llama-server",
        shebang + _body("llama.cpp's llama-server", "advisor.sim.llamacpp_cli", "main()"),
        executable=True,
    )
    py = folder / "py"
    _write(py / "sglang" / "__init__.py", '"""SGLang, simulated."""\n__version__ = "0.5.2"\n')
    sglang = _write(
        py / "sglang" / "launch_server.py",
        _body("SGLang's python -m sglang.launch_server", "advisor.sim.sglang_cli", "main()"),
    )
    for package in ("vllm", "vllm/entrypoints", "vllm/entrypoints/openai"):
        _write(py / package / "__init__.py", '"""vLLM, simulated."""\n')
    vllm = _write(
        py / "vllm" / "entrypoints" / "openai" / "api_server.py",
        _body(
            "vLLM's python -m vllm.entrypoints.openai.api_server",
            "advisor.sim.vllm_cli",
            'main(["serve", *sys.argv[1:]])',
        ),
    )
    return Standins(folder, tgi, llama, py, sglang, vllm)


def write_container_standins(
    folder: Path, images: Mapping[str, Sequence[str]], state: Path
) -> tuple[Path, Path]:
    """Write ``folder/docker`` and ``folder/podman``, executable, running ``main`` with this
    interpreter and this checkout, ``images`` and ``state`` baked in; their paths."""
    interpreter = sys.executable
    if not interpreter or any(c.isspace() for c in interpreter) or len(interpreter) > 250:
        raise ValueError(f"{interpreter!r} cannot be a script's #! line")
    folder.mkdir(parents=True, exist_ok=True)
    root = str(Path(__file__).resolve().parents[2])
    baked = {str(repo): [str(word) for word in cmd] for repo, cmd in images.items()}
    for runtime in ("docker", "podman"):
        script = folder / runtime
        script.write_text(
            f"#!{interpreter}\n"
            f'"""`{runtime}`, simulated (advisor.sim.container_cli)."""\n'
            f"import sys\nfrom pathlib import Path\n\nsys.path.insert(0, {root!r})\n\n"
            "from advisor.sim.container_cli import main  # noqa: E402\n\n"
            f"sys.exit(main({runtime!r}, {baked!r}, Path({str(state)!r})))\n",
            encoding="utf-8",
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder / "docker", folder / "podman"
