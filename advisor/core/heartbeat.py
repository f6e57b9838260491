"""The agent's heartbeat: `advisor watch` records one every `heartbeat_s` seconds (the
settings), saying which advisor runs on the host and which GPUs it has (from NVML: index,
name, memory, driver). Shipped like any event, it tells the central store's hosts page
(`advisor hosts`) that the host is alive even when its services log nothing."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.core.payloads import Payload
from advisor.core.records import clean_name

HEARTBEAT: Final = "agent.heartbeat"
DEFAULT_INTERVAL_S: Final = 60.0
MAX_INTERVAL_S: Final = 86400.0
AGENT_STREAM: Final = "@agent"  # HOST/@agent: no unit name starts with "@"


class HeartbeatGpu(BaseModel):
    """One GPU as NVML names it; `driver_version` is the host's NVIDIA driver."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    index: int = Field(ge=0, le=255)
    name: str | None = Field(default=None, max_length=256)
    uuid: str | None = Field(default=None, max_length=256)
    memory_total_bytes: int | None = Field(default=None, ge=0)
    driver_version: str | None = Field(default=None, max_length=64)


class AgentHeartbeat(Payload):
    """The agent on `host` was alive at the event's time; the next one is due `interval_s`
    later. `gpus` is empty on a host without a GPU (or with GPU sampling off)."""

    type: Literal["agent.heartbeat"] = "agent.heartbeat"
    host: str = Field(min_length=1, max_length=256)
    agent_version: str = Field(max_length=64)
    interval_s: float = Field(gt=0, le=MAX_INTERVAL_S)
    gpus: tuple[HeartbeatGpu, ...] = ()


def agent_version() -> str:
    """The version of the advisor package installed ("uninstalled" when it is not)."""
    try:
        return version("advisor")
    except PackageNotFoundError:
        return "uninstalled"


def agent_stream(host: str) -> str:
    return f"{clean_name(host)}/{AGENT_STREAM}"


def heartbeat_event(time_us: int, beat: AgentHeartbeat) -> dict[str, Any]:
    """The heartbeat as a new event: its own stream and source; one per host and µs."""
    return {
        "stream": agent_stream(beat.host),
        "time_us": time_us,
        "source": f"heartbeat:{beat.host}",
        "key": time_us,
        "payload": beat,
    }
