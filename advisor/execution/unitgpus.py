"""A unit's own GPUs and processes, for `wait_gpu_free`: the GPUs it may use, and the
processes NVML lists that are its own.

The GPUs: those the step names (where the plan saw the unit's processes), else what the unit
makes visible to its engine — `CUDA_VISIBLE_DEVICES` (or `NVIDIA_VISIBLE_DEVICES`) in its
environment, or a container's `--gpus device=…` / `-e …` / CDI `--device nvidia.com/gpu=N` —
as indices or GPU UUIDs, matched against the samples; a container given every GPU
(`--gpus all`) waits on every GPU; None when nothing says (every GPU is then watched for the
unit's own processes only). The processes: the unit's control group's, and a container's —
which systemd files under the runtime's scope (`docker-NAME.scope`), not under the unit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from advisor.core.payloads import GpuSampled
from advisor.execution.containers import ContainerRun
from advisor.execution.invocation import Reader
from advisor.execution.locate import container_of, environment_of, read_text
from advisor.execution.state import UnitSnapshot

_VARIABLES: Final = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
_CDI: Final = re.compile(r"^nvidia\.com/gpu=(.+)$")


def _container_devices(run: ContainerRun, argv: Sequence[str]) -> str | None:
    """What a `docker run` / `podman run` makes visible: `-e VAR=…`, `--gpus device=…`, CDI."""
    for option in run.env:
        if option.name in _VARIABLES and option.value:
            return option.value
    for i in range(run.run_index + 1, run.image_index):
        word = argv[i]
        value = argv[i + 1] if i + 1 < run.image_index else ""
        if word.startswith("--gpus="):
            word, value = "--gpus", word[len("--gpus=") :]
        if word == "--gpus":
            spec = value.strip("'\"")
            if spec.startswith("device="):
                return spec[len("device=") :].strip("'\"")
            return "all"  # `all`, or a count: the engine may use any GPU
        cdi = _CDI.match(value) if word == "--device" else None
        if cdi is not None:
            return cdi.group(1)
    return None


def visible(unit: UnitSnapshot, read: Reader = read_text) -> str | None:
    """The device list the unit gives its engine (`0,1,2,3`, GPU UUIDs), None if unsaid."""
    run = container_of(unit, read)
    if run is not None and unit.exec_start:
        return _container_devices(run, unit.exec_start[0].argv)
    env = environment_of(unit, read)
    for name in _VARIABLES:
        found = env.get(name)
        if found is not None and found[0].strip():
            return found[0]
    return None


def indices(spec: str | None, samples: Sequence[GpuSampled]) -> tuple[int, ...] | None:
    """A device list as GPU indices (UUIDs matched against the samples; `all`: every GPU
    sampled); None when nothing is said, or a device the samples do not know."""
    if spec is not None and spec.strip().lower() == "all":
        return tuple(sorted({s.index for s in samples})) or None
    if spec is None or spec.strip().lower() in ("", "none", "void"):
        return None
    by_uuid = {s.uuid: s.index for s in samples if s.uuid}
    out: list[int] = []
    for item in (x.strip() for x in spec.split(",")):
        if item.isdigit():
            out.append(int(item))
        elif item in by_uuid:
            out.append(by_uuid[item])
        else:
            return None
    return tuple(sorted(set(out))) or None


def owners(unit: UnitSnapshot, read: Reader = read_text) -> frozenset[str]:
    """The units NVML files the unit's processes under: itself, and its container's scope
    (as a runtime on the systemd cgroup driver names it after the container)."""
    names = {unit.name}
    run = container_of(unit, read)
    if run is not None and run.name:
        names |= {f"docker-{run.name}.scope", f"libpod-{run.name}.scope"}
    return frozenset(names)
