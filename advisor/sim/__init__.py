"""A simulated GPU node: GPUs and their driver, a service manager with systemd semantics, and a
stand-in vLLM server that runs as a real process (the `sim` backend: one contract with `systemd`).

It writes what a real node would give the advisor — ``journalctl -o json`` lines and recorded
NVML samples — so that everything downstream runs unchanged on a laptop without a GPU.

``SimNode`` and friends are loaded on first use: the server process imports this package and
must not pay for the node's dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.sim.node import SimNode
    from advisor.sim.units import UnitSpec, UnitState

__all__ = [
    "SimNode",
    "UnitSpec",
    "UnitState",
    "backend",
    "box",
    "gpuhost",
    "models",
    "nvml_twin",
]


def __getattr__(name: str) -> Any:
    if name == "SimNode":
        from advisor.sim import node

        return node.SimNode
    if name in ("UnitSpec", "UnitState"):
        from advisor.sim import units

        return getattr(units, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
