"""Which units on this host run an inference server: running services whose main process's
command line names vLLM, SGLang or text-generation-inference (read from /proc, as DESIGN.md
says: what runs is what failed)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from advisor.recommend import is_unit_name

_SERVER: Final = re.compile(
    r"(?:^|[/\s])(?:vllm|sglang(?:\.launch_server)?|text-generation-launcher|"
    r"vllm\.entrypoints\.\S+|text_generation_server)(?:\s|$)")


def inference_units(run: Callable[[Sequence[str]], str], proc: Path = Path("/proc"),
                    systemctl: str = "systemctl") -> list[str]:
    """Running service units whose main process looks like an inference server."""
    listing = run([systemctl, "list-units", "--type=service", "--state=running", "--plain",
                   "--no-legend", "--no-pager"])
    found = []
    for line in listing.splitlines():
        unit = line.split(maxsplit=1)[0] if line.strip() else ""
        if not is_unit_name(unit):
            continue
        pid = run([systemctl, "show", "--property=MainPID", "--value", unit]).strip()
        if not pid.isdigit() or int(pid) <= 0:
            continue
        try:
            raw = (proc / pid / "cmdline").read_bytes()
        except OSError:
            continue
        command = " ".join(a.decode("utf-8", "replace") for a in raw.split(b"\0") if a)
        if _SERVER.search(command):
            found.append(unit)
    return found
