"""The stand-in server's configuration: vLLM's options as given (flags of ``python -m
advisor.sim.server``, or ``vllm serve``'s in ``advisor.sim.vllm_cli``) with vLLM's defaults for
the rest, and the simulation's own settings.

Stdlib only (imported by the server process).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from advisor.sim.models import ModelCard, card_for

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Config:
    card: ModelCard
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    gpu_memory_utilization: float
    tensor_parallel_size: int
    gpu_gib: float
    gpus: tuple[int, ...]
    claims: Path | None
    speed: float
    wedge_on_stop: bool
    enforce_eager: bool
    trust_remote_code: bool
    host: str
    port: int
    given: dict[str, object]  # the vLLM options set on the command line, in vLLM's order

    @property
    def served_model_name(self) -> str | None:
        """The first ``--served-model-name`` (the name the engine reports), if given."""
        names = self.given.get("served_model_name")
        if isinstance(names, list) and names:
            return str(names[0])
        return names if isinstance(names, str) else None


@dataclass(frozen=True, slots=True)
class SimSettings:
    """What the simulation needs beyond vLLM's options: flags of ``python -m
    advisor.sim.server``, or ``ADVISOR_SIM_*`` variables for ``vllm serve``
    (``advisor.sim.vllm_cli``)."""

    vocab_size: int | None = None
    weights_gib: float | None = None  # all weights, summed over TP ranks
    gpu_gib: float = 96.0  # memory of each GPU
    claims: Path | None = None  # folder of GPU memory claims (the driver's)
    gpus: str | None = None  # GPU indices this server may use, e.g. "0,1,2,3"
    speed: float = 1.0  # divide start-up durations by this
    wedge_on_stop: bool = False


# The vLLM options the simulation acts on (argparse dests), in the order vLLM prints them.
MODELLED: Final = (
    "host",
    "port",
    "model",
    "trust_remote_code",
    "max_model_len",
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_expert_parallel",
    "enforce_eager",
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m advisor.sim.server", description="A simulated vLLM 0.15.1 OpenAI server."
    )
    p.add_argument("--model", required=True)
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--trust-remote-code", action="store_true", default=None)
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--tensor-parallel-size", type=int)
    p.add_argument("--gpu-memory-utilization", type=float)
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--enable-expert-parallel", action="store_true", default=None)
    p.add_argument("--enforce-eager", action="store_true", default=None)
    sim = p.add_argument_group("simulation (not vLLM options)")
    sim.add_argument("--vocab-size", type=int)
    sim.add_argument("--weights-gib", type=float, help="all weights, summed over TP ranks")
    sim.add_argument("--gpu-gib", type=float, default=96.0, help="memory of each GPU")
    sim.add_argument("--claims", type=Path, help="folder of GPU memory claims (the driver's)")
    sim.add_argument("--gpus", help="GPU indices this server may use, e.g. 0,1,2,3")
    sim.add_argument("--speed", type=float, default=1.0, help="divide start-up durations by this")
    sim.add_argument("--wedge-on-stop", action="store_true")
    return p


def parse_config(argv: Sequence[str]) -> Config:
    """Flags → Config; vLLM's defaults for what is not given (argparse exits 2 on bad flags)."""
    parser = _parser()
    a = parser.parse_args(list(argv))
    sim = SimSettings(
        vocab_size=a.vocab_size,
        weights_gib=a.weights_gib,
        gpu_gib=a.gpu_gib,
        claims=a.claims,
        gpus=a.gpus,
        speed=a.speed,
        wedge_on_stop=a.wedge_on_stop,
    )
    given: dict[str, object] = {"model_tag": a.model}
    given.update((key, getattr(a, key)) for key in MODELLED if getattr(a, key) is not None)
    try:
        return make_config(given, sim)
    except ValueError as e:
        parser.error(str(e))


def _option(given: Mapping[str, object], key: str, kind: type[_T]) -> _T | None:
    value = given.get(key)
    if value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind):
        raise ValueError(f"{key}: expected {kind.__name__}, got {value!r}")
    return value


def make_config(given: dict[str, object], sim: SimSettings) -> Config:
    """Config from the vLLM options set on the command line (``given``: argparse dests to
    values, in the order ``non-default args`` prints them; options the simulation does not
    model are only printed) and the simulation's settings. ValueError for values vLLM would
    refuse."""
    model = _option(given, "model", str) or _option(given, "model_tag", str)
    if not model:
        raise ValueError("no model given")
    card = card_for(model, weights_gib=sim.weights_gib, vocab_size=sim.vocab_size)
    tp = _option(given, "tensor_parallel_size", int) or 1
    util = _option(given, "gpu_memory_utilization", float) or 0.9
    gpus = tuple(int(g) for g in sim.gpus.split(",") if g.strip()) if sim.gpus else tuple(range(tp))
    if sim.speed <= 0 or tp < 1 or not 0 < util <= 1:
        raise ValueError(
            "--speed and --tensor-parallel-size must be positive and "
            "--gpu-memory-utilization in (0, 1]"
        )
    # vLLM 0.10 – 0.25: 1024 sequences on GPUs of 70 GiB or more, else 256.
    seqs = _option(given, "max_num_seqs", int) or (1024 if sim.gpu_gib >= 70 else 256)
    return Config(
        card=card,
        max_num_seqs=seqs,
        max_num_batched_tokens=_option(given, "max_num_batched_tokens", int) or 8192,
        max_model_len=_option(given, "max_model_len", int) or card.max_model_len,
        gpu_memory_utilization=util,
        tensor_parallel_size=tp,
        gpu_gib=sim.gpu_gib,
        gpus=gpus[:tp],
        claims=sim.claims,
        speed=sim.speed,
        wedge_on_stop=sim.wedge_on_stop,
        enforce_eager=bool(_option(given, "enforce_eager", bool)),
        trust_remote_code=bool(_option(given, "trust_remote_code", bool)),
        host=_option(given, "host", str) or "0.0.0.0",
        port=_option(given, "port", int) or 8000,
        given=given,
    )
