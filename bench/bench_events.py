"""A journal line as the event the benchmarks' stores are built of (`log.recorded` from
journald, written by systemd or by the vLLM process)."""

from __future__ import annotations

from advisor.core.events import NewEvent


def journal_event(
    host: str, unit: str, time_us: int, key: int, message: str, by_systemd: bool
) -> NewEvent:
    """`message` logged for `unit` on `host` at `time_us` (idempotency key `key`)."""
    return NewEvent.model_validate(
        {
            "stream": f"{host}/{unit}",
            "time_us": time_us,
            "source": "bench",
            "key": key,
            "payload": {
                "type": "log.recorded",
                "origin": "journald",
                "host": host,
                "unit": unit,
                "message": message,
                "identifier": "systemd" if by_systemd else "vllm",
                "pid": 1 if by_systemd else 4242,
            },
        }
    )
