"""The engine registry: the one place that knows vLLM, SGLang, TGI and llama.cpp's server.

Each engine is one module of this package defining `ENGINE` (an `Engine`, `model.py`): how it
is recognised (its programs, `python -m` modules, container images, log lines), its readiness
and argument-echo lines as it prints them, its flags (spellings, environment variables, safe
bounds) and its remedies per label. The modules are found, not listed: a new engine is one
module here plus its message catalogue (`rules/catalog/<name>.toml`). Discovery, diagnosis,
readiness, planning, the executor and the docs read this registry; no other module lists
engines.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import MappingProxyType

from advisor.core.engines.model import Cue, Engine, Flag, Range

__all__ = [
    "ALL",
    "DEFAULT_ENGINE",
    "ECHO_CUES",
    "ENGINES",
    "FLAG_BOUNDS",
    "READY_CUES",
    "ROUTINE_CUES",
    "by_name",
    "engine_of_flag",
    "flag_named",
    "is_ready",
    "model",
    "sglang",
    "tgi",
    "vllm",
]


def _discover() -> tuple[Engine, ...]:
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "model":
            continue
        engine = getattr(importlib.import_module(f"{__name__}.{info.name}"), "ENGINE", None)
        if isinstance(engine, Engine):
            found.append(engine)
    # vLLM first: a log or command that names no engine is read as vLLM's (the first engine
    # advisor knew, and the default of its rules).
    return tuple(sorted(found, key=lambda e: (e.name != "vllm", e.name)))


ALL: tuple[Engine, ...] = _discover()
ENGINES: Mapping[str, Engine] = MappingProxyType({e.name: e for e in ALL})
# The engine of a log or command that names none.
DEFAULT_ENGINE: Engine = ALL[0]


def _bounds() -> dict[str, Range]:
    """Every settable flag's safe range, by its name (the same name never has two ranges)."""
    out: dict[str, Range] = {}
    for engine in ALL:
        for flag in engine.flags:
            if flag.bound is None:
                continue
            if out.setdefault(flag.name, flag.bound) != flag.bound:
                raise ValueError(f"{flag.name} has two safe ranges in the engine registry")
    return out


FLAG_BOUNDS: Mapping[str, Range] = MappingProxyType(_bounds())
# What every engine's argument echo line contains (a line worth keeping as evidence).
ECHO_CUES: tuple[str, ...] = tuple(dict.fromkeys(echo.cue for e in ALL for echo in e.echo))
# Every engine's readiness lines (diagnosis: a run that printed one came up).
READY_CUES: tuple[Cue, ...] = tuple(dict.fromkeys(cue for e in ALL for cue in e.ready))
# Every engine's routine serving lines (a fleet's hosts keep them: `advisor.fleet.selection`).
ROUTINE_CUES: tuple[Cue, ...] = tuple(dict.fromkeys(cue for e in ALL for cue in e.routine))


def by_name(name: str | None) -> Engine | None:
    return ENGINES.get(name) if name else None


def flag_named(engine: Engine | None, name: str) -> Flag | None:
    """`name` as a flag of `engine` (any engine's when None)."""
    for candidate in (engine,) if engine is not None else ALL:
        found = candidate.flag(name)
        if found is not None:
            return found
    return None


def engine_of_flag(name: str) -> tuple[Engine, ...]:
    """The engines that have a flag spelled `name`."""
    return tuple(e for e in ALL if e.flag(name) is not None)


def is_ready(body: str, engine: str | None = None) -> bool:
    """Does a line's body (its log prefix peeled off) say the engine is ready to serve?
    With `engine` None, any engine's readiness line counts."""
    chosen = ALL if engine is None else tuple(e for e in ALL if e.name == engine)
    return any(e.is_ready(body) for e in chosen)
