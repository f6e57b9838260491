"""A failure family: the label it teaches and how each engine writes it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .context import Ctx
from .systemd import sd_start

Builder = Callable[[Ctx], None]
ENGINES = ("vllm", "sglang", "tgi")


@dataclass(frozen=True)
class Family:
    """One label of the corpus: its builders per engine and what varies by label.

    ``order`` places the label's examples in the corpus file; ``engine_weights`` are the
    chances of vLLM, SGLang and TGI (a family with one builder always uses that engine);
    ``reword`` is the chance of paraphrased decisive sentences; ``min_vllm_rank`` drops
    older vLLM versions; ``v0_ok`` allows V0 engines on 0.8/0.9; ``eager_ok`` allows
    ``--enforce-eager``; ``finish`` runs on the built events (e.g. to mark key lines).
    """

    label: str
    order: int
    builders: Mapping[str, Builder]
    count: int = 160
    engine_weights: tuple[int, int, int] = (70, 17, 13)
    reword: float = 0.27
    min_vllm_rank: int = 0
    v0_ok: bool = True
    eager_ok: bool = True
    finish: Builder | None = None


def vllm_oom_wrapped(body: Builder) -> Builder:
    """A vLLM OOM body preceded by systemd starting the unit."""

    def run(ctx: Ctx) -> None:
        sd_start(ctx)
        body(ctx)

    return run
