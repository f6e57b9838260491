"""Unit files for a simulated GPU host under real systemd (``advisor.sim.box``): the GPU driver
daemon (``advisor.sim.gpud``) and vLLM services running the ``vllm`` script
(``advisor.sim.vllm_cli.write_vllm_script``).

Arguments are written for systemd's parser: an argument that needs it is double-quoted with
backslash escapes, ``%`` is doubled (a specifier otherwise), and ``$`` is kept as written, so
``${MODEL}`` stays a variable systemd expands (a literal ``$`` is written ``$$`` by the caller).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from advisor.execution.dropins import quote

GPUD_UNIT: Final = "advisor-gpud.service"


def command_line(argv: Sequence[str]) -> str:
    """``argv`` as the value of ``ExecStart=``."""
    return " ".join(quote(a) for a in argv)


def timespan(value: float | str) -> str:
    """Seconds (or a systemd time span, as is) for ``RestartSec=`` and friends."""
    if isinstance(value, str):
        return value
    return "infinity" if math.isinf(value) else f"{value:g}s"


def _environment(env: Mapping[str, str]) -> list[str]:
    return [f"Environment={quote(f'{k}={v}', always=True)}" for k, v in env.items()]


def gpud_unit(
    *,
    claims: Path,
    view: Path,
    gpus: int,
    gpu_gib: float,
    release_delay_s: float,
    interval_s: float = 0.2,
    recording: Path | None = None,
    host: str | None = None,
) -> str:
    """The simulated GPU driver (``GPUD_UNIT``), run with this interpreter and checkout."""
    root = Path(__file__).resolve().parents[2]
    argv = [
        sys.executable,
        "-m",
        "advisor.sim.gpud",
        "--claims",
        str(claims),
        "--view",
        str(view),
        "--gpus",
        str(gpus),
        "--gpu-gib",
        repr(gpu_gib),
        "--release-delay",
        repr(release_delay_s),
        "--interval",
        repr(interval_s),
    ]
    if recording is not None:
        argv += ["--recording", str(recording)]
    if host is not None:
        argv += ["--host", host]
    return "\n".join(
        [
            "[Unit]",
            "Description=Simulated NVIDIA driver (advisor)",
            "",
            "[Service]",
            "Type=simple",
            *_environment({"PYTHONPATH": str(root), "PYTHONUNBUFFERED": "1"}),
            f"ExecStart={command_line(argv)}",
            "Restart=on-failure",
            "RestartSec=100ms",
            "",
        ]
    )


def vllm_unit(
    name: str,
    script: Path,
    args: Sequence[str],
    *,
    environment: Mapping[str, str] | None = None,
    restart: str = "no",
    restart_sec: float | str = "100ms",
    timeout_stop_sec: float | str = "90s",
    kill_mode: str = "control-group",
    start_limit_burst: int | None = None,
    start_limit_interval_sec: float | str | None = None,
    after: Sequence[str] = (GPUD_UNIT,),
) -> str:
    """A vLLM service: ``ExecStart=SCRIPT ARGS...`` (``args`` as systemd should pass them,
    ``${VAR}`` references included), described as ``name``."""
    unit = ["[Unit]", f"Description={name.replace('%', '%%')}"]
    if after:
        unit.append(f"After={' '.join(after)}")
    if start_limit_burst is not None:
        unit.append(f"StartLimitBurst={start_limit_burst}")
    if start_limit_interval_sec is not None:
        unit.append(f"StartLimitIntervalSec={timespan(start_limit_interval_sec)}")
    return "\n".join(
        [
            *unit,
            "",
            "[Service]",
            "Type=simple",
            *_environment(environment or {}),
            f"ExecStart={command_line([str(script), *args])}",
            f"Restart={restart}",
            f"RestartSec={timespan(restart_sec)}",
            f"TimeoutStopSec={timespan(timeout_stop_sec)}",
            f"KillMode={kill_mode}",
            "",
        ]
    )
