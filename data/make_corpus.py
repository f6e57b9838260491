"""Write ``data/corpus.jsonl.gz``: labelled synthetic crash logs for advisor's learned classifier.

Every example is one paste of log lines as an operator would hand it over: raw application
output, ``journalctl -u`` in its short forms, ``docker``/``kubectl logs`` with timestamps, or a
``systemctl status`` block. Examples are built from composable pieces (the engines' documented
formats are the only source of the formats):

* an engine (vLLM 0.5 … 0.33 with each version's logger format and process prefixes, SGLang
  0.4/0.5, TGI) and its startup phases up to the failing one (weights, profiling, KV cache,
  CUDA graphs, sampler warm-up, API readiness, serving);
* one failure family per label (tracebacks through the phase's functions, the decisive error
  sentence, worker and EngineCore tracebacks interleaved, systemd's reaction, kernel lines);
* a line shape (renderer) and perturbations: head truncated, lines dropped, traceback head
  removed, tail cut, ANSI kept or stripped, reworded decisive sentences, noise lines.

Lines that decide the label are marked ``key`` and survive every perturbation, so no example
silently turns into "unknown".

Deterministic: stdlib only, seeded ``random.Random`` per example, gzip mtime 0 — running it
twice writes the same bytes.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

OUT = Path(__file__).with_name("corpus.jsonl.gz")
SEED = 20260316
PER_FAILURE = 160
HEALTHY = 320
MIN_LINES, MAX_LINES = 15, 120
FAILURE_LABELS = (
    "sampler_warmup_oom", "kv_cache_oom", "weights_load_oom", "cuda_graph_oom", "runtime_oom",
    "gpu_memory_held", "wedged_stop", "nccl_error", "gpu_hardware_fault", "other_crash",
)
CYAN1, CYAN0, RESET = "\x1b[1;36m", "\x1b[0;36m", "\x1b[0;0m"
GIB = 1024**3
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

# --------------------------------------------------------------------------- catalogues


@dataclass(frozen=True)
class Model:
    name: str
    arch: str
    vocab: int
    gib: float  # bf16 weights, whole model
    layers: int
    kv_heads: int
    head_dim: int
    ctx: int
    file: str  # vllm/model_executor/models/<file>.py
    moe: bool = False


MODELS = (
    Model("meta-llama/Llama-3.1-8B-Instruct", "LlamaForCausalLM", 128256, 14.99, 32, 8, 128,
          131072, "llama"),
    Model("meta-llama/Llama-3.1-70B-Instruct", "LlamaForCausalLM", 128256, 131.4, 80, 8, 128,
          131072, "llama"),
    Model("meta-llama/Llama-3.3-70B-Instruct", "LlamaForCausalLM", 128256, 131.4, 80, 8, 128,
          131072, "llama"),
    Model("meta-llama/Llama-3.2-3B-Instruct", "LlamaForCausalLM", 128256, 6.0, 28, 8, 128,
          131072, "llama"),
    Model("Qwen/Qwen2.5-7B-Instruct", "Qwen2ForCausalLM", 152064, 14.2, 28, 4, 128, 32768,
          "qwen2"),
    Model("Qwen/Qwen2.5-14B-Instruct", "Qwen2ForCausalLM", 152064, 27.5, 48, 8, 128, 32768,
          "qwen2"),
    Model("Qwen/Qwen2.5-32B-Instruct", "Qwen2ForCausalLM", 152064, 61.0, 64, 8, 128, 32768,
          "qwen2"),
    Model("Qwen/Qwen2.5-72B-Instruct", "Qwen2ForCausalLM", 152064, 135.4, 80, 8, 128, 32768,
          "qwen2"),
    Model("Qwen/Qwen2.5-Coder-32B-Instruct", "Qwen2ForCausalLM", 152064, 61.0, 64, 8, 128,
          32768, "qwen2"),
    Model("Qwen/Qwen3-8B", "Qwen3ForCausalLM", 151936, 15.3, 36, 8, 128, 40960, "qwen3"),
    Model("Qwen/Qwen3-32B", "Qwen3ForCausalLM", 151936, 61.0, 64, 8, 128, 40960, "qwen3"),
    Model("Qwen/Qwen3-30B-A3B", "Qwen3MoeForCausalLM", 151936, 56.9, 48, 4, 128, 40960,
          "qwen3_moe", True),
    Model("mistralai/Mistral-7B-Instruct-v0.3", "MistralForCausalLM", 32768, 13.5, 32, 8, 128,
          32768, "llama"),
    Model("mistralai/Mixtral-8x7B-Instruct-v0.1", "MixtralForCausalLM", 32000, 87.0, 32, 8, 128,
          32768, "mixtral", True),
    Model("mistralai/Mistral-Small-24B-Instruct-2501", "MistralForCausalLM", 131072, 44.0, 40,
          8, 128, 32768, "llama"),
    Model("google/gemma-2-27b-it", "Gemma2ForCausalLM", 256000, 50.7, 46, 16, 128, 8192,
          "gemma2"),
    Model("google/gemma-3-27b-it", "Gemma3ForConditionalGeneration", 262208, 51.0, 62, 16, 128,
          131072, "gemma3_mm"),
    Model("microsoft/Phi-3-medium-128k-instruct", "Phi3ForCausalLM", 32064, 26.0, 40, 10, 128,
          131072, "phi3"),
    Model("microsoft/phi-4", "Phi3ForCausalLM", 100352, 27.3, 40, 10, 128, 16384, "phi3"),
    Model("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "Qwen2ForCausalLM", 152064, 61.0, 64, 8,
          128, 131072, "qwen2"),
    Model("deepseek-ai/DeepSeek-V2-Lite-Chat", "DeepseekV2ForCausalLM", 102400, 29.3, 27, 16,
          192, 32768, "deepseek_v2", True),
    Model("ibm-granite/granite-3.1-8b-instruct", "GraniteForCausalLM", 49155, 15.2, 40, 8, 128,
          131072, "granite"),
    Model("openai/gpt-oss-20b", "GptOssForCausalLM", 201088, 12.8, 24, 8, 64, 131072,
          "gpt_oss", True),
    Model("openai/gpt-oss-120b", "GptOssForCausalLM", 201088, 60.8, 36, 8, 64, 131072,
          "gpt_oss", True),
    Model("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "LlamaForCausalLM", 128256,
          37.1, 80, 8, 128, 131072, "llama"),
    Model("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "LlamaForCausalLM", 128256, 8.5, 32, 8,
          128, 131072, "llama"),
    Model("/models/llama-3.1-8b-instruct", "LlamaForCausalLM", 128256, 14.99, 32, 8, 128,
          131072, "llama"),
    Model("/data/hf/Qwen2.5-14B-Instruct-AWQ", "Qwen2ForCausalLM", 152064, 9.4, 48, 8, 128,
          32768, "qwen2"),
    Model("/mnt/models/mixtral-8x22b-instruct", "MixtralForCausalLM", 32768, 262.0, 56, 8, 128,
          65536, "mixtral", True),
)
EMBED_MODELS = (
    Model("BAAI/bge-m3", "XLMRobertaModel", 250002, 2.1, 24, 16, 64, 8192, "roberta"),
    Model("intfloat/e5-mistral-7b-instruct", "MistralModel", 32000, 13.5, 32, 8, 128, 32768,
          "llama"),
    Model("Qwen/Qwen3-Embedding-8B", "Qwen3ForCausalLM", 151665, 15.1, 36, 8, 128, 32768,
          "qwen3"),
)


@dataclass(frozen=True)
class Gpu:
    name: str
    gib: float  # total as torch reports it
    mib: int  # total as nvidia-smi reports it


GPUS = (
    Gpu("NVIDIA A100-SXM4-80GB", 79.15, 81920), Gpu("NVIDIA A100-SXM4-40GB", 39.39, 40960),
    Gpu("NVIDIA A100 80GB PCIe", 79.14, 81920), Gpu("NVIDIA H100 80GB HBM3", 79.19, 81559),
    Gpu("NVIDIA H100 NVL", 93.02, 95830), Gpu("NVIDIA H200", 139.81, 143771),
    Gpu("NVIDIA L40S", 44.39, 46068), Gpu("NVIDIA A10G", 22.19, 23028),
    Gpu("NVIDIA L4", 22.05, 23034), Gpu("NVIDIA GeForce RTX 4090", 23.64, 24564),
    Gpu("NVIDIA RTX 6000 Ada Generation", 47.50, 49140), Gpu("NVIDIA RTX A6000", 47.53, 49140),
    Gpu("NVIDIA B200", 178.36, 183359), Gpu("NVIDIA GH200 480GB", 94.50, 97871),
)
HOSTS = ("gpu-node-03", "gpu01", "dgx-a100-2", "ip-10-0-12-34", "inference-7", "h100-sxm-04",
         "worker-gpu-b12", "llm-prod-1", "gpu-srv-17", "ml-box", "node-a6000-2", "hpc-gpu041",
         "infer-eu-west-3", "l40s-03", "ws-lab", "kube-gpu-pool-8x2k", "rtx-server", "gpu-h200-1")
UNITS = ("vllm", "vllm-server", "llm-inference", "vllm-llama70b", "vllm-qwen", "inference-api",
         "model-server", "openai-api", "vllm@qwen7b", "llm")
SITES = (
    "/usr/local/lib/python3.12/dist-packages", "/opt/vllm/lib/python3.12/site-packages",
    "/home/ubuntu/.venv/lib/python3.10/site-packages", "/opt/conda/lib/python3.11/site-packages",
    "/root/miniconda3/envs/vllm/lib/python3.11/site-packages",
    "/app/.venv/lib/python3.12/site-packages", "/srv/llm/venv/lib/python3.12/site-packages",
    "/usr/local/lib/python3.10/dist-packages",
)
PROMPT_WORDS = ("memory", "summary", "report", "translate", "code", "memory leak", "recall",
                "KV", "cache", "invoice", "poem", "sql")
IPS = ("127.0.0.1", "10.0.3.7", "10.12.0.41", "172.17.0.1", "192.168.1.23", "10.244.1.17")


@dataclass(frozen=True)
class VGroup:
    key: str
    versions: tuple[str, ...]
    fmt: str  # plain: "file:line]" | bracket: "[file:line]" | inner: prefix inside formatter
    v1: bool
    ansi: str
    torch: tuple[str, ...]
    year: int
    rank: int  # ordering for "version >= x" checks


VGROUPS = (
    VGroup("0.5", ("0.5.3.post1", "0.5.4", "0.5.5"), "plain", False, CYAN1, ("2.3.1", "2.4.0"),
           2024, 5),
    VGroup("0.6", ("0.6.1.post2", "0.6.3.post1", "0.6.4.post1", "0.6.6.post1"), "plain", False,
           CYAN1, ("2.4.0", "2.5.1"), 2024, 6),
    VGroup("0.7", ("0.7.2", "0.7.3"), "plain", False, CYAN1, ("2.5.1",), 2025, 7),
    VGroup("0.8.5", ("0.8.5", "0.8.5.post1"), "bracket", True, CYAN1, ("2.6.0",), 2025, 8),
    VGroup("0.9", ("0.9.0.1", "0.9.1", "0.9.2"), "bracket", True, CYAN1, ("2.7.0",), 2025, 9),
    VGroup("0.10", ("0.10.0", "0.10.1.1", "0.10.2"), "bracket", True, CYAN1, ("2.7.1", "2.8.0"),
           2025, 10),
    VGroup("0.11", ("0.11.0", "0.11.1"), "bracket", True, CYAN1, ("2.8.0",), 2025, 11),
    VGroup("0.15", ("0.15.0", "0.15.1"), "bracket", True, CYAN0, ("2.9.1",), 2026, 15),
    VGroup("0.20", ("0.20.0", "0.20.1"), "bracket", True, "", ("2.11.0",), 2026, 20),
    VGroup("0.25", ("0.25.0",), "bracket", True, "", ("2.11.0",), 2026, 25),
    VGroup("0.33", ("0.33.0",), "inner", True, "", ("2.14.0",), 2026, 33),
)
SGLANG_VERSIONS = {"0.4": ("0.4.1", "0.4.1.post4", "0.4.3.post2"),
                   "0.5": ("0.5.2", "0.5.4.post1", "0.5.9", "0.5.23")}
TGI_VERSIONS = ("1.4.5", "2.0.4", "2.2.0", "2.4.1", "3.0.2", "3.2.3", "3.3.4")

# --------------------------------------------------------------------------- context


@dataclass
class Proc:
    role: str  # api | ec | worker | engine (V0 MQ engine process)
    pid: int
    rank: int = 0


@dataclass
class Ev:
    src: str  # app | sys | kern | pre | other
    text: str
    t: float
    key: bool = False
    tag: str = ""  # tbhead | tqdm | blank | noise
    pid: int = 0
    ident: str = ""


@dataclass
class Ctx:
    rng: random.Random
    label: str
    engine: str
    version: str
    group: VGroup | None
    model: Model
    gpu: Gpu
    tp: int
    host: str
    unit: str
    desc: str
    ident: str
    start: datetime
    site: str
    py: str
    torch: str
    sysd: int
    status_fmt: str
    reword: bool
    keep_ansi: bool
    api: Proc = field(default_factory=lambda: Proc("api", 0))
    ec: Proc = field(default_factory=lambda: Proc("ec", 0))
    workers: list[Proc] = field(default_factory=list)
    t: float = 0.0
    evs: list[Ev] = field(default_factory=list)
    needs_sys: bool = False
    needs_kern: bool = False
    v0: bool = False
    util: float = 0.9
    max_len: int = 8192
    max_seqs: int = 256
    batched: int = 8192
    enforce_eager: bool = False
    port: int = 8000
    linenos: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    cpu_s: float = 0.0
    pci: list[str] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)
    mem: dict[str, float] = field(default_factory=dict)
    kbase: float = 0.0  # kernel uptime at t=0, for dmesg timestamps
    run_start: float = 0.0

    # ---- clock
    def adv(self, lo: float, hi: float | None = None) -> float:
        self.t += lo if hi is None else self.rng.uniform(lo, hi)
        return self.t

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.t)

    # ---- events
    def add(self, src: str, text: str, key: bool = False, tag: str = "", pid: int = 0,
            ident: str = "") -> None:
        self.t += self.rng.uniform(0.00002, 0.002)
        self.evs.append(Ev(src, text, self.t, key, tag, pid or self.api.pid,
                           ident or self.ident))

    def app(self, text: str, key: bool = False, tag: str = "") -> None:
        self.add("app", text, key, tag)

    def apps(self, lines: list[str], key: bool = False, tag: str = "") -> None:
        for line in lines:
            self.app(line, key, tag)

    def sys(self, text: str, key: bool = False) -> None:
        self.add("sys", text, key, pid=1, ident="systemd")

    def kern(self, text: str, key: bool = False) -> None:
        self.add("kern", text, key, pid=0, ident="kernel")

    # ---- helpers
    def lineno(self, site: str) -> int:
        k = re.sub(r"[\d.,]+", "#", site)
        if k not in self.linenos:
            self.linenos[k] = self.rng.randrange(40, 4200)
        return self.linenos[k]

    def pick(self, canonical: str, variants: tuple[str, ...] | list[str]) -> str:
        """The decisive sentence as the engine writes it, or a paraphrase when rewording."""
        if self.reword and variants:
            return self.rng.choice(variants)
        return canonical

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    @property
    def grank(self) -> int:
        return self.group.rank if self.group else 0

    @property
    def status(self) -> str:
        if self.status_fmt == "combined":
            return f"{self.unit} - {self.desc}"
        if self.status_fmt == "description":
            return self.desc
        return self.unit


# --------------------------------------------------------------------------- small formatters


def fsize(b: float) -> str:
    """torch's format_size: bytes, else 2 decimals and binary units."""
    if b <= 1024:
        return f"{int(b)} bytes"
    for unit, div in (("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3)):
        if b < div * 1024 or unit == "GiB":
            return f"{b / div:.2f} {unit}"
    return f"{b:.2f} bytes"


def gib(x: float) -> float:
    return x * GIB


def timespan(sec: float) -> str:
    """systemd timespan with ms accuracy: 345ms, 2.345s, 1min 2.345s, 1h 2min 3.456s."""
    if sec < 1:
        return f"{int(sec * 1000)}ms"
    h, rem = divmod(sec, 3600)
    m, s = divmod(rem, 60)
    parts = []
    if h:
        parts.append(f"{int(h)}h")
    if m:
        parts.append(f"{int(m)}min")
    parts.append(f"{s:.3f}".rstrip("0").rstrip(".") + "s")
    return " ".join(parts)


def ago(sec: float) -> str:
    if sec < 60:
        return f"{int(sec)}s ago"
    if sec < 3600:
        return f"{int(sec // 60)}min {int(sec % 60)}s ago"
    return f"{int(sec // 3600)}h {int(sec % 3600 // 60)}min ago"


def thousands(n: int) -> str:
    return f"{n:,}"


def elapsed(sec: float) -> str:
    m, s = divmod(int(sec), 60)
    return f"{m:02d}:{s:02d}"


def tqdm_line(desc: str, n: int, total: int, per: float, vllm_fmt: bool) -> str:
    """One tqdm refresh; vLLM's weight loader uses its own bar format."""
    pct = int(100 * n / total) if total else 100
    done, left = elapsed(per * n), elapsed(per * (total - n))
    rate = f"{per:5.2f}s/it" if per >= 1 else f"{1 / per:5.2f}it/s"
    if n == 0:
        done, left, rate = "00:00", "?", "?it/s"
    if vllm_fmt:
        return f"{desc}: {pct:3d}% Completed | {n}/{total} [{done}<{left}, {rate}]"
    bar = ("█" * (pct // 10)).ljust(10)
    return f"{desc}: {pct:3d}%|{bar}| {n}/{total} [{done}<{left}, {rate}]"


def rid(rng: random.Random, prefix: str = "chatcmpl-") -> str:
    return prefix + "".join(rng.choice("0123456789abcdef") for _ in range(32))


def hexs(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


# --------------------------------------------------------------------------- torch OOM texts


def torch_minor(tv: str) -> int:
    return int(tv.split(".")[1])


def oom_class(ctx: Ctx) -> str:
    cls = "torch.cuda.OutOfMemoryError" if torch_minor(ctx.torch) < 4 else "torch.OutOfMemoryError"
    if ctx.reword and ctx.chance(0.35):
        return ctx.rng.choice(("torch.cuda.OutOfMemoryError", "RuntimeError", "OutOfMemoryError",
                               "torch.OutOfMemoryError", "torch.AcceleratorOutOfMemoryError"))
    return cls


@dataclass
class OomNums:
    tried: float
    dev: int
    total: float
    free: float
    this: float
    alloc: float
    unalloc: float
    private: float = 0.0
    others: tuple[tuple[int, float], ...] = ()


def oom_nums(ctx: Ctx, dev: int = 0, private: bool = False,
             others: tuple[tuple[int, float], ...] = ()) -> OomNums:
    rng = ctx.rng
    total = gib(ctx.gpu.gib)
    free = rng.choice((rng.uniform(2, 900) * 1024**2, rng.uniform(0.05, 1.9) * GIB))
    held = sum(b for _, b in others)
    this = max(total - free - held - rng.uniform(0.3, 0.6) * GIB, GIB)
    alloc = this * rng.uniform(0.82, 0.99)
    unalloc = max(this - alloc - rng.uniform(0.1, 0.5) * GIB, rng.uniform(2, 300) * 1024**2)
    tried = rng.choice((rng.uniform(20, 999) * 1024**2, rng.uniform(1.0, 12.0) * GIB))
    tried = max(tried, free * rng.uniform(1.05, 3.0))
    pools = rng.uniform(0.2, 3.5) * GIB if private else 0.0
    return OomNums(tried, dev, total, free, this, alloc, unalloc, pools, others)


def oom_message(ctx: Ctx, n: OomNums) -> str:
    """torch's allocator OOM text for ctx.torch (DOMAIN 5.1), or a paraphrase when rewording."""
    minor = torch_minor(ctx.torch)
    if ctx.reword:
        return ctx.rng.choice((
            f"CUDA OOM: failed to allocate {fsize(n.tried)} on device {n.dev} "
            f"({fsize(n.free)} free of {fsize(n.total)})",
            f"CUDA out of memory: requested {fsize(n.tried)} but GPU {n.dev} only has "
            f"{fsize(n.free)} free (capacity {fsize(n.total)}); {fsize(n.alloc)} held by the "
            "caching allocator.",
            f"out of device memory while allocating {fsize(n.tried)} "
            f"(GPU {n.dev}: {fsize(n.free)} free / {fsize(n.total)} total)",
            f"Allocation of {fsize(n.tried)} failed on cuda:{n.dev}: device memory exhausted "
            f"({fsize(n.free)} available). Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "to reduce fragmentation.",
            f"GPU {n.dev} ran out of memory trying to allocate {fsize(n.tried)}; "
            f"{fsize(n.this)} in use by this process.",
        ))
    proc = "".join(f"Process {pid} has {fsize(b)} memory in use. " for pid, b in n.others)
    proc += f"Including non-PyTorch memory, this process has {fsize(n.this)} memory in use. "
    if minor <= 1:
        return (f"CUDA out of memory. Tried to allocate {fsize(n.tried)}. GPU {n.dev} has a "
                f"total capacty of {fsize(n.total)} of which {fsize(n.free)} is free. {proc}"
                f"Of the allocated memory {fsize(n.alloc)} is allocated by PyTorch, and "
                f"{fsize(n.unalloc)} is reserved by PyTorch but unallocated. If reserved but "
                "unallocated memory is large try setting max_split_size_mb to avoid "
                "fragmentation.  See documentation for Memory Management and "
                "PYTORCH_CUDA_ALLOC_CONF")
    pools = ""
    if n.private and minor >= 4:
        pools = f"with {fsize(n.private)} allocated in private pools (e.g., CUDA Graphs), "
    link = ("https://docs.pytorch.org/docs/stable/notes/cuda.html"
            "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf" if minor >= 11 else
            "https://pytorch.org/docs/stable/notes/cuda.html#environment-variables")
    return (f"CUDA out of memory. Tried to allocate {fsize(n.tried)}. GPU {n.dev} has a total "
            f"capacity of {fsize(n.total)} of which {fsize(n.free)} is free. {proc}Of the "
            f"allocated memory {fsize(n.alloc)} is allocated by PyTorch, {pools}and "
            f"{fsize(n.unalloc)} is reserved by PyTorch but unallocated. If reserved but "
            "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF="
            "expandable_segments:True to avoid fragmentation.  See documentation for Memory "
            f"Management  ({link})")


def cuda_error_lines(ctx: Ctx, what: str) -> list[str]:
    """``CUDA error: …`` as torch raises it, with the usual trailer lines (DOMAIN 5.3)."""
    cls = "torch.AcceleratorError" if torch_minor(ctx.torch) >= 8 else "RuntimeError"
    out = [f"{cls}: CUDA error: {what}",
           "CUDA kernel errors might be asynchronously reported at some other API call, so the "
           "stacktrace below might be incorrect.",
           "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"]
    if torch_minor(ctx.torch) >= 2:
        out.append("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    return out


def oom_exc_lines(ctx: Ctx, n: OomNums) -> list[str]:
    """The final line(s) of a traceback that ends in a GPU OOM: allocator text mostly,
    sometimes the CUDA-runtime form."""
    if ctx.chance(0.12):
        return cuda_error_lines(ctx, "out of memory")
    return [f"{oom_class(ctx)}: {oom_message(ctx, n)}"]


# --------------------------------------------------------------------------- tracebacks

Frame = tuple[str, str, str]  # (path under site-packages or absolute, function, source line)


def tb(ctx: Ctx, frames: list[Frame], exc: list[str], head: bool = True) -> list[str]:
    out = ["Traceback (most recent call last):"] if head else []
    carets = ctx.py >= "3.11" and ctx.chance(0.5)
    for path, func, code in frames:
        full = path if path.startswith("/") else f"{ctx.site}/{path}"
        out.append(f'  File "{full}", line {ctx.lineno(path + ":" + func)}, in {func}')
        out.append(f"    {code}")
        if carets and ctx.chance(0.3) and len(code) > 8:
            off = ctx.rng.randrange(0, max(1, len(code) // 2))
            out.append("    " + " " * off + "^" * max(3, len(code) - off - ctx.rng.randrange(0, 4)))
    return out + exc


def chained(first: list[str], second: list[str], cause: bool = True) -> list[str]:
    sep = ("The above exception was the direct cause of the following exception:" if cause else
           "During handling of the above exception, another exception occurred:")
    return [*first, "", sep, "", *second]


MOD = "torch/nn/modules/module.py"
TORCH_CALL: list[Frame] = [
    (MOD, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    (MOD, "_call_impl", "return forward_call(*args, **kwargs)"),
]


def mpath(ctx: Ctx) -> str:
    return f"vllm/model_executor/models/{ctx.model.file}.py"


def model_forward_frames(ctx: Ctx) -> list[Frame]:
    """A forward pass down into one layer, ending where the allocation fails."""
    m = mpath(ctx)
    fr: list[Frame] = [
        (m, "forward", "hidden_states = self.model(input_ids, positions, intermediate_tensors,"),
    ]
    if ctx.chance(0.5):
        fr += TORCH_CALL
    fr.append((m, "forward", "hidden_states, residual = layer(positions, hidden_states, "
                             "residual)"))
    if ctx.model.moe and ctx.chance(0.6):
        fr += [(m, "forward", "hidden_states = self.mlp(hidden_states)"),
               ("vllm/model_executor/layers/fused_moe/layer.py", "forward",
                "return torch.ops.vllm.moe_forward(hidden_states, router_logits,"),
               ("vllm/model_executor/layers/fused_moe/fused_moe.py", "fused_experts_impl",
                "intermediate_cache1 = torch.empty((M, topk_ids.shape[1], N),")]
    elif ctx.chance(0.5):
        fr += [(m, "forward", "hidden_states = self.self_attn(positions=positions,"),
               ("vllm/attention/layer.py", "forward",
                "return self.impl.forward(self, query, key, value, kv_cache, attn_metadata)")]
    else:
        fr += [(m, "forward", "x = self.act_fn(gate_up)"),
               ("vllm/model_executor/layers/activation.py", "forward_cuda",
                "out = torch.empty(output_shape, dtype=x.dtype, device=x.device)")]
    return fr


# --------------------------------------------------------------------------- vLLM: lines


def pname(ctx: Ctx, p: Proc) -> str | None:
    """The ``(Name pid=N)`` tag a vLLM version writes for a process (DOMAIN 3.2)."""
    g = ctx.grank
    if p.role == "api":
        return "APIServer" if g >= 10 else None
    if p.role == "engine":
        return None
    if p.role == "ec":
        if g >= 20:
            return "EngineCore"
        if g >= 11:
            return "EngineCore_DP0"
        return "EngineCore_0" if g == 10 else None
    if ctx.v0 or not (ctx.group and ctx.group.v1):
        return "VllmWorkerProcess" if p.rank > 0 else None
    if g <= 9:
        return f"VllmWorker rank={p.rank}"
    if g == 10:
        return f"VllmWorker TP{p.rank}"
    return f"Worker_TP{p.rank}"


def vprefix(ctx: Ctx, p: Proc, raw: bool) -> str:
    assert ctx.group is not None
    if ctx.group.fmt == "inner" and raw:
        return ""
    name = pname(ctx, p)
    if name is None:
        return ""
    tag = f"({name} pid={p.pid})"
    if ctx.group.ansi and ctx.keep_ansi and ctx.group.fmt != "inner":
        return f"{ctx.group.ansi}{tag}{RESET} "
    return tag + " "


def vlog(ctx: Ctx, p: Proc, level: str, file: str, msg: str, key: bool = False,
         keys: tuple[str, ...] = ()) -> None:
    """A vLLM logger record; multi-line records repeat the full prefix on every line."""
    assert ctx.group is not None
    ts = ctx.now().strftime("%m-%d %H:%M:%S")
    site = f"{file}:{ctx.lineno(file + ':' + msg[:24])}"
    head = f"{level} {ts} {site}] " if ctx.group.fmt == "plain" else f"{level} {ts} [{site}] "
    pre = vprefix(ctx, p, raw=False)
    for part in msg.split("\n"):
        k = key or any(s in part for s in keys)
        ctx.app((pre + head + part).rstrip(), k, "tbhead" if _is_tb_head(part) else "")


def _is_tb_head(part: str) -> bool:
    return part.startswith(("Traceback (most recent call last)", "EngineCore failed to start",
                            "WorkerProc hit an exception", "Exception in worker",
                            "EngineCore encountered a fatal error", "Process EngineCore",
                            "Process SpawnProcess", "Engine background task failed",
                            "Scheduler hit an exception", "Error in model execution"))


def vraw(ctx: Ctx, p: Proc, lines: list[str], keys: tuple[str, ...] = (),
         key_all: bool = False) -> None:
    """Lines a vLLM process writes to stderr itself (tracebacks, uvicorn, tqdm)."""
    pre = vprefix(ctx, p, raw=True)
    for line in lines:
        k = key_all or any(s in line for s in keys)
        tag = "tbhead" if _is_tb_head(line) else ("blank" if not line else "")
        ctx.app((pre + line).rstrip() if line else pre.rstrip(), k, tag)


def vtb(ctx: Ctx, p: Proc, header: str, file: str, lines: list[str],
        keys: tuple[str, ...], via_logger: bool = True) -> None:
    """A traceback either logged with ``logger.exception`` (prefix on every line) or printed
    raw to stderr."""
    if via_logger:
        vlog(ctx, p, "ERROR", file, "\n".join([header, *lines]) if header else "\n".join(lines),
             keys=keys)
    else:
        vraw(ctx, p, [header, *lines] if header else lines, keys)


def model_procs(ctx: Ctx) -> list[Proc]:
    """The processes that hold a model shard, rank 0 first."""
    if ctx.group and ctx.group.v1 and not ctx.v0:
        return ctx.workers if ctx.tp > 1 else [ctx.ec]
    return [ctx.ec, *ctx.workers[1:]]


def uv(ctx: Ctx, text: str, key: bool = False) -> None:
    """uvicorn's default-format lines, written by the API server to stderr."""
    vraw(ctx, ctx.api, [text], key_all=key)


def vllm_mem_plan(ctx: Ctx) -> dict[str, float]:
    if ctx.mem:
        return ctx.mem
    rng = ctx.rng
    w = ctx.model.gib / ctx.tp
    budget = ctx.gpu.gib * ctx.util
    act = rng.uniform(0.4, 4.5)
    nontorch = rng.uniform(0.15, 1.6)
    kv = max(budget - w - act - nontorch, rng.uniform(0.5, 3.0))
    kvh = max(1, ctx.model.kv_heads // ctx.tp)
    bpt = ctx.model.layers * kvh * ctx.model.head_dim * 2 * 2
    tokens = int(kv * GIB / bpt) // 16 * 16
    ctx.mem = {"w": w, "act": act, "nontorch": nontorch, "kv": kv, "tokens": tokens,
               "bpt": bpt, "budget": budget, "secs": rng.uniform(4, 140)}
    return ctx.mem


# --------------------------------------------------------------------------- vLLM: startup


def vllm_args(ctx: Ctx) -> str:
    m = ctx.model.name
    if ctx.grank <= 8:
        return (f"args: Namespace(subparser='serve', model_tag='{m}', config='', host=None, "
                f"port={ctx.port}, uvicorn_log_level='info', allow_credentials=False, "
                "allowed_origins=['*'], api_key=None, lora_modules=None, chat_template=None, "
                f"response_role='assistant', model='{m}', tokenizer=None, "
                f"trust_remote_code={ctx.chance(0.3)}, download_dir=None, load_format='auto', "
                f"dtype='auto', max_model_len={ctx.max_len}, "
                f"tensor_parallel_size={ctx.tp}, pipeline_parallel_size=1, "
                f"gpu_memory_utilization={ctx.util}, max_num_seqs={ctx.max_seqs}, "
                f"enforce_eager={ctx.enforce_eager}, disable_log_requests=False, "
                "disable_log_stats=False, dispatch_function=<function serve at 0x7f3c2a1b5e40>)")
    d = {"model_tag": m, "host": "0.0.0.0", "port": ctx.port, "model": m,
         "max_model_len": ctx.max_len}
    if ctx.tp > 1:
        d["tensor_parallel_size"] = ctx.tp
    if ctx.util != 0.9:
        d["gpu_memory_utilization"] = ctx.util
    if ctx.enforce_eager:
        d["enforce_eager"] = True
    if ctx.max_seqs not in (256, 1024):
        d["max_num_seqs"] = ctx.max_seqs
    return f"non-default args: {d!r}"


def engine_config_line(ctx: Ctx) -> str:
    m = ctx.model.name
    fields = (f"model='{m}', speculative_config=None, tokenizer='{m}', "
              "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
              "trust_remote_code=False, dtype=torch.bfloat16, "
              f"max_seq_len={ctx.max_len}, download_dir=None, load_format=auto, "
              f"tensor_parallel_size={ctx.tp}, pipeline_parallel_size=1, "
              "disable_custom_all_reduce=False, quantization=None, "
              f"enforce_eager={ctx.enforce_eager}, kv_cache_dtype=auto, device_config=cuda, "
              f"seed=0, served_model_name={m}, enable_prefix_caching={ctx.grank >= 8}")
    if ctx.grank <= 5:
        return f"Initializing an LLM engine (v{ctx.version}) with config: {fields}"
    if ctx.v0 or not ctx.group or not ctx.group.v1:
        word = "a V0" if ctx.grank >= 8 else "an"
        return (f"Initializing {word} LLM engine (v{ctx.version}) with config: {fields}, "
                "use_cached_outputs=True, ")
    return f"Initializing a V1 LLM engine (v{ctx.version}) with config: {fields}"


def vllm_logo(ctx: Ctx) -> str:
    return "\n".join([
        "       █     █     █▄   ▄█",
        f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {ctx.version}",
        f"  █▄█▀ █     █     █     █  model   {ctx.model.name}",
        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
    ])


def vllm_prelude(ctx: Ctx) -> None:
    api, g = ctx.api, ctx.grank
    if g >= 8:
        vlog(ctx, api, "INFO", "__init__.py", "Automatically detected platform cuda.")
    ctx.adv(0.5, 3)
    if g >= 15 and ctx.chance(0.6):
        vlog(ctx, api, "INFO", "utils.py", vllm_logo(ctx))
    elif g >= 15:
        vlog(ctx, api, "INFO", "api_server.py",
             f"vLLM server version {ctx.version}, serving model {ctx.model.name}")
    else:
        vlog(ctx, api, "INFO", "api_server.py", f"vLLM API server version {ctx.version}")
    vlog(ctx, api, "INFO", "utils.py" if g >= 9 else "api_server.py", vllm_args(ctx))
    ctx.adv(1, 6)
    if g >= 10:
        vlog(ctx, api, "INFO", "model.py", f"Resolved architecture: {ctx.model.arch}")
        vlog(ctx, api, "INFO", "model.py", f"Using max model len {ctx.max_len}")
    if ctx.v0 and g >= 8:
        vlog(ctx, api, "WARNING", "arg_utils.py",
             "Chunked prefill is not supported by the V1 Engine. Falling back to V0. ")
    if g >= 6 and ctx.chance(0.7):
        vlog(ctx, api, "INFO", "config.py" if g < 11 else "scheduler.py",
             f"Chunked prefill is enabled with max_num_batched_tokens={ctx.batched}.")
    if ctx.chance(0.25):
        vlog(ctx, api, "WARNING", "cuda.py" if g >= 8 else "config.py", ctx.rng.choice((
            "To see benefits of async output processing, enable CUDA graph. Since, enforce-eager "
            "is enabled, async output processor cannot be used",
            "Your GPU does not have native support for FP8 computation but FP8 quantization is "
            "being used. Weight-only FP8 compression will be used leveraging the Marlin kernel. "
            "This may degrade performance for compute-heavy workloads.",
            "Default sampling parameters have been overridden by the model's Hugging Face "
            "generation config recommended from the model creator. If this is not intended, "
            "please relaunch vLLM instance with `--generation-config vllm`.",
            "Casting torch.bfloat16 to torch.float16.",
        )))
    ctx.adv(0.5, 4)
    owner = ctx.ec if (ctx.group and ctx.group.v1 and not ctx.v0) else ctx.api
    vlog(ctx, owner, "INFO", "core.py" if owner is ctx.ec else "llm_engine.py",
         engine_config_line(ctx))


def vllm_dist_init(ctx: Ctx) -> None:
    if ctx.tp <= 1:
        return
    procs = model_procs(ctx)
    ctx.adv(1, 5)
    nccl = ctx.rng.choice(("2.20.5", "2.21.5", "2.26.2", "2.27.3", "2.28.9"))
    for p in procs:
        if ctx.chance(0.6):
            vlog(ctx, p, "INFO", "utils.py", "Found nccl from library libnccl.so.2")
        vlog(ctx, p, "INFO", "pynccl.py", f"vLLM is using nccl=={nccl}")
    if ctx.chance(0.4):
        ranks = ",".join(str(i) for i in range(ctx.tp))
        vlog(ctx, procs[0], "INFO", "custom_all_reduce_utils.py",
             "reading GPU P2P access cache from /root/.cache/vllm/"
             f"gpu_p2p_access_cache_for_{ranks}.json")
    if ctx.chance(0.3):
        vlog(ctx, procs[0], "WARNING", "custom_all_reduce.py",
             "Custom allreduce is disabled because it's not supported on more than two PCIe-only "
             "GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly.")
    if ctx.chance(0.5):
        readers = list(range(1, ctx.tp))
        vlog(ctx, procs[0], "INFO", "shm_broadcast.py",
             "vLLM message queue communication handle: Handle(connect_ip='127.0.0.1', "
             f"local_reader_ranks={readers}, buffer_handle=({ctx.tp - 1}, 4194304, 6, "
             f"'psm_{hexs(ctx.rng, 8)}'), local_subscribe_port={ctx.rng.randrange(30000, 60000)}"
             ", remote_subscribe_port=None)")
    if ctx.grank >= 10 and ctx.chance(0.6):
        for p in procs:
            vlog(ctx, p, "INFO", "parallel_state.py",
                 f"rank {p.rank} in world size {ctx.tp} is assigned as DP rank 0, PP rank 0, "
                 f"TP rank {p.rank}, EP rank {p.rank}")


def vllm_load(ctx: Ctx, fail_after: int | None = None) -> None:
    """Weights: backend line, ``Starting to load model``, shard progress, ``Model loading took``.
    With ``fail_after`` the shard bar stops after that many shards (the failure follows)."""
    procs, g = model_procs(ctx), ctx.grank
    ctx.adv(1, 6)
    backend = ctx.rng.choice(("Flash Attention", "FlashInfer", "XFormers", "FLASH_ATTN"))
    for p in procs:
        if g >= 8:
            vlog(ctx, p, "INFO", "gpu_model_runner.py" if not ctx.v0 else "model_runner.py",
                 f"Starting to load model {ctx.model.name}...")
        if ctx.chance(0.5):
            suffix = " on V1 engine." if (g >= 8 and not ctx.v0) else "."
            vlog(ctx, p, "INFO", "cuda.py" if g >= 8 else "selector.py",
                 f"Using {backend} backend{suffix}")
    ctx.adv(0.5, 3)
    shards = ctx.rng.choice((1, 2, 4, 4, 5, 7, 8, 14, 17, 30))
    show = ctx.chance(0.75) and shards > 1
    per = ctx.rng.uniform(0.6, 12)
    stop = shards if fail_after is None else min(fail_after, shards - 1)
    if show:
        for i in range(stop + 1):
            if i in (0, stop) or shards <= 8 or ctx.chance(0.35):
                vraw(ctx, procs[0], [tqdm_line("Loading safetensors checkpoint shards", i,
                                               shards, per, True)])
                ctx.evs[-1].tag = "tqdm"
            ctx.adv(per * 0.8, per * 1.2)
    else:
        ctx.adv(per * stop)
    if fail_after is not None:
        return
    mem = vllm_mem_plan(ctx)
    for p in procs:
        took = mem["secs"] * ctx.rng.uniform(0.97, 1.03)
        if g >= 8:
            vlog(ctx, p, "INFO", "default_loader.py" if g >= 10 else "loader.py",
                 f"Loading weights took {took * 0.92:.2f} seconds")
        w = mem["w"] * ctx.rng.uniform(0.995, 1.005)
        if g <= 7 or (ctx.v0 and g <= 9):
            vlog(ctx, p, "INFO", "model_runner.py", f"Loading model weights took {w:.4f} GB")
        elif g <= 11:
            vlog(ctx, p, "INFO", "gpu_model_runner.py",
                 f"Model loading took {w:.4f} GiB and {took:.6f} seconds")
        else:
            vlog(ctx, p, "INFO", "gpu_model_runner.py",
                 f"Model loading took {round(w, 2)} GiB memory and {took:.6f} seconds")
        ctx.adv(0, 0.4)


def vllm_compile(ctx: Ctx) -> None:
    if ctx.v0 or ctx.grank < 8 or ctx.enforce_eager or ctx.chance(0.3):
        return
    p = model_procs(ctx)[0]
    h = hexs(ctx.rng, 10)
    vlog(ctx, p, "INFO", "backends.py",
         f"Using cache directory: /root/.cache/vllm/torch_compile_cache/{h}/rank_0_0/backbone "
         "for vLLM's torch.compile")
    ctx.adv(3, 12)
    vlog(ctx, p, "INFO", "backends.py",
         f"Dynamo bytecode transform time: {ctx.rng.uniform(2, 14):.2f} s")
    ctx.adv(5, 40)
    vlog(ctx, p, "INFO", "backends.py", f"Compiling a graph for dynamic shape takes "
         f"{ctx.rng.uniform(5, 45):.2f} s")
    vlog(ctx, p, "INFO", "monitor.py",
         f"torch.compile takes {ctx.rng.uniform(10, 60):.2f} s in total")


def vllm_profile(ctx: Ctx, kv_gib: float | None = None) -> None:
    mem = vllm_mem_plan(ctx)
    kv = mem["kv"] if kv_gib is None else kv_gib
    g = ctx.grank
    ctx.adv(1, 8)
    if ctx.v0 or (ctx.group and not ctx.group.v1):
        if g >= 6:
            budget = ctx.gpu.gib * ctx.util
            vlog(ctx, model_procs(ctx)[0], "INFO", "worker.py", "\n".join([
                f"Memory profiling takes {ctx.rng.uniform(0.3, 9):.2f} seconds",
                f"the current vLLM instance can use total_gpu_memory ({ctx.gpu.gib:.2f}GiB) x "
                f"gpu_memory_utilization ({ctx.util:.2f}) = {budget:.2f}GiB",
                f"model weights take {mem['w']:.2f}GiB; non_torch_memory takes "
                f"{mem['nontorch']:.2f}GiB; PyTorch activation peak memory takes "
                f"{mem['act']:.2f}GiB; the rest of the memory reserved for KV Cache is "
                f"{kv:.2f}GiB."]))
        return
    if g >= 10:
        for p in model_procs(ctx):
            val = f"{kv:.2f}" if g <= 11 else f"{round(kv, 2)}"
            vlog(ctx, p, "INFO", "gpu_worker.py", f"Available KV cache memory: {val} GiB")


def vllm_kv(ctx: Ctx) -> None:
    mem = vllm_mem_plan(ctx)
    tokens = int(mem["tokens"])
    blocks = tokens // 16
    conc = tokens / ctx.max_len
    g = ctx.grank
    if ctx.v0 or (ctx.group and not ctx.group.v1):
        dev = "GPU" if g <= 6 else "cuda"
        vlog(ctx, ctx.api if g <= 5 else model_procs(ctx)[0], "INFO",
             "distributed_gpu_executor.py" if g <= 6 else "executor_base.py",
             f"# {dev} blocks: {blocks}, # CPU blocks: {ctx.rng.randrange(2000, 22000)}")
        if g >= 6:
            vlog(ctx, model_procs(ctx)[0], "INFO", "executor_base.py",
                 f"Maximum concurrency for {ctx.max_len} tokens per request: {conc:.2f}x")
        return
    if g >= 33:
        vlog(ctx, ctx.ec, "INFO", "kv_cache_utils.py",
             f"GPU KV cache size: {thousands(tokens)} tokens, Maximum concurrency for "
             f"{thousands(ctx.max_len)} tokens per request: {conc:.2f}x")
    else:
        vlog(ctx, ctx.ec, "INFO", "kv_cache_utils.py", f"GPU KV cache size: {thousands(tokens)} "
             "tokens")
        vlog(ctx, ctx.ec, "INFO", "kv_cache_utils.py",
             f"Maximum concurrency for {thousands(ctx.max_len)} tokens per request: {conc:.2f}x")


def graph_desc(ctx: Ctx) -> tuple[str, int]:
    if ctx.grank >= 10 and not ctx.v0:
        mode = ctx.rng.choice(("mixed prefill-decode, PIECEWISE", "decode, FULL"))
        return f"Capturing CUDA graphs ({mode})", ctx.rng.choice((35, 51, 67, 83))
    return "Capturing CUDA graph shapes", ctx.rng.choice((35, 67))


def vllm_graph_intro(ctx: Ctx) -> None:
    p, g = model_procs(ctx)[0], ctx.grank
    if g <= 5:
        vlog(ctx, p, "INFO", "model_runner.py",
             "Capturing the model for CUDA graphs. This may lead to unexpected consequences if "
             "the model is not static. To run the model in eager mode, set 'enforce_eager=True' "
             "or use '--enforce-eager' in the CLI.")
        vlog(ctx, p, "INFO", "model_runner.py",
             "CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of "
             "memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode. You "
             "can also reduce the `max_num_seqs` as needed to decrease memory usage.")
    elif ctx.v0 or (ctx.group and not ctx.group.v1):
        vlog(ctx, p, "INFO", "model_runner.py",
             "Capturing cudagraphs for decoding. This may lead to unexpected consequences if the "
             "model is not static. To run the model in eager mode, set 'enforce_eager=True' or "
             "use '--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph "
             "capture, consider decreasing `gpu_memory_utilization` or switching to eager mode. "
             "You can also reduce the `max_num_seqs` as needed to decrease memory usage.")


def vllm_graphs(ctx: Ctx) -> None:
    g = ctx.grank
    p = model_procs(ctx)[0]
    if ctx.enforce_eager:
        if g >= 10:
            vlog(ctx, p, "INFO", "gpu_model_runner.py", "Cudagraph is disabled under eager mode")
        return
    vllm_graph_intro(ctx)
    secs = ctx.rng.uniform(1, 40)
    if g >= 6:
        desc, total = graph_desc(ctx)
        vraw(ctx, p, [tqdm_line(desc, total, total, secs / total, False)])
        ctx.evs[-1].tag = "tqdm"
    ctx.adv(secs)
    for q in model_procs(ctx):
        if g <= 5:
            vlog(ctx, q, "INFO", "model_runner.py", f"Graph capturing finished in {secs:.0f} secs.")
        else:
            vlog(ctx, q, "INFO", "gpu_model_runner.py" if g >= 8 and not ctx.v0
                 else "model_runner.py",
                 f"Graph capturing finished in {secs:.0f} secs, took "
                 f"{ctx.rng.uniform(0.1, 3.2):.2f} GiB")


def vllm_init_done(ctx: Ctx) -> None:
    g = ctx.grank
    ctx.adv(0.2, 2)
    if g >= 6:
        owner = ctx.ec if (ctx.group and ctx.group.v1 and not ctx.v0) else ctx.api
        vlog(ctx, owner, "INFO", "core.py" if owner is ctx.ec else "llm_engine.py",
             f"init engine (profile, create kv cache, warmup model) took "
             f"{ctx.rng.uniform(3, 180):.2f} seconds")
    if g >= 10:
        blocks = int(vllm_mem_plan(ctx)["tokens"]) // 16
        vlog(ctx, ctx.api, "INFO", "loggers.py",
             f"Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: "
             f"{blocks}")


ROUTES = ("/openapi.json", "/docs", "/health", "/tokenize", "/detokenize", "/v1/models",
          "/version", "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/metrics",
          "/ping", "/invocations", "/v1/responses", "/load")


def vllm_ready(ctx: Ctx, key: bool = False) -> None:
    api, g = ctx.api, ctx.grank
    ctx.adv(0.2, 2)
    if g >= 10:
        vlog(ctx, api, "INFO", "api_server.py", "Supported_tasks: ['generate']")
    url = f"http://0.0.0.0:{ctx.port}"
    if g >= 33:
        vlog(ctx, api, "INFO", "api_server.py", f"Starting vLLM server on {url}")
    elif g >= 10:
        vlog(ctx, api, "INFO", "api_server.py", f"Starting vLLM API server 0 on {url}")
    elif g >= 8:
        vlog(ctx, api, "INFO", "api_server.py", f"Starting vLLM API server on {url}")
    if ctx.chance(0.5):
        vlog(ctx, api, "INFO", "launcher.py", "Available routes are:")
        for r in ctx.rng.sample(ROUTES, ctx.rng.randrange(3, 9)):
            meth = "POST" if r.startswith(("/v1/c", "/v1/e", "/tok", "/detok", "/inv", "/v1/r"))\
                else "GET, HEAD" if r in ("/openapi.json", "/docs") else "GET"
            vlog(ctx, api, "INFO", "launcher.py", f"Route: {r}, Methods: {meth}")
    uv(ctx, f"INFO:     Started server process [{api.pid}]")
    uv(ctx, "INFO:     Waiting for application startup.")
    uv(ctx, "INFO:     Application startup complete.", key)
    if ctx.chance(0.5):
        uv(ctx, f"INFO:     Uvicorn running on {url} (Press CTRL+C to quit)")


def vllm_startup(ctx: Ctx, upto: str) -> None:
    """Every phase before ``upto`` (load, profile, kv, graphs, done, ready)."""
    order = ("prelude", "load", "profile", "kv", "graphs", "done", "ready", "serve")
    stop = order.index(upto)
    vllm_prelude(ctx)
    vllm_dist_init(ctx)
    if stop > order.index("load"):
        vllm_load(ctx)
        vllm_compile(ctx)
    if stop > order.index("profile"):
        vllm_profile(ctx)
    if stop > order.index("kv"):
        vllm_kv(ctx)
    if stop > order.index("graphs"):
        vllm_graphs(ctx)
    if stop > order.index("done"):
        vllm_init_done(ctx)
    if stop > order.index("ready"):
        vllm_ready(ctx)


# --------------------------------------------------------------------------- vLLM: frames

W1 = "vllm/v1/worker/gpu_worker.py"
R1 = "vllm/v1/worker/gpu_model_runner.py"
CORE = "vllm/v1/engine/core.py"
MPX = "vllm/v1/executor/multiproc_executor.py"


def stdlib(ctx: Ctx) -> str:
    """Where the interpreter's own modules live for this install."""
    if "conda" in ctx.site:
        return ctx.site.removesuffix("/site-packages")
    return f"/usr/lib/python{ctx.py}"


def bin_path(ctx: Ctx, name: str) -> str:
    if "/lib/python" in ctx.site and not ctx.site.startswith("/usr/"):
        return ctx.site.split("/lib/python")[0] + "/bin/" + name
    return f"/usr/local/bin/{name}"


def mp_boot(ctx: Ctx) -> list[Frame]:
    mp = f"{stdlib(ctx)}/multiprocessing/process.py"
    return [(mp, "_bootstrap", "self.run()"),
            (mp, "run", "self._target(*self._args, **self._kwargs)")]


def loader_frames(ctx: Ctx) -> list[Frame]:
    """From the model loader down to the tensor that does not fit (weights_load_oom)."""
    g, m, rng = ctx.grank, mpath(ctx), ctx.rng
    lpath = ("vllm/model_executor/model_loader/loader.py" if g <= 8 else
             "vllm/model_executor/model_loader/base_loader.py")
    upath = ("vllm/model_executor/model_loader/loader.py" if g <= 8 else
             "vllm/model_executor/model_loader/utils.py")
    kind = rng.choice(("init", "init", "weights", "post"))
    if kind == "init":
        fr: list[Frame] = [
            (lpath, "load_model", "model = initialize_model(vllm_config=vllm_config,"
             if g >= 8 else "model = _initialize_model(model_config, self.load_config,"),
            (upath, "initialize_model" if g >= 8 else "_initialize_model",
             "return model_class(vllm_config=vllm_config, prefix=prefix)" if g >= 8 else
             "return model_class(config=model_config.hf_config,"),
            (m, "__init__", "self.model = self._init_model(vllm_config=vllm_config,"),
        ]
        if g >= 8:
            fr.append(("vllm/compilation/decorators.py", "__init__",
                       "old_init(self, vllm_config=vllm_config, prefix=prefix, **kwargs)"))
        fr += [
            (m, "__init__", "self.start_layer, self.end_layer, self.layers = make_layers("),
            ("vllm/model_executor/models/utils.py", "make_layers",
             'maybe_offload_to_cpu(layer_fn(prefix=f"{prefix}.{idx}"))'),
            (m, "<lambda>", "lambda prefix: layer_type(config=config,"),
            (m, "__init__", "self.mlp = self.mlp_cls("),
            (m, "__init__", "self.gate_up_proj = MergedColumnParallelLinear("),
            ("vllm/model_executor/layers/linear.py", "__init__",
             "self.quant_method.create_weights("),
            ("vllm/model_executor/layers/linear.py", "create_weights",
             "weight = Parameter(torch.empty(sum(output_partition_sizes),"),
            ("torch/utils/_device.py", "__torch_function__", "return func(*args, **kwargs)"),
        ]
        return fr
    if kind == "weights":
        dl = lpath if g <= 8 else "vllm/model_executor/model_loader/default_loader.py"
        return [
            (lpath, "load_model", "self.load_weights(model, model_config)" if g >= 9 else
             "model.load_weights(self._get_all_weights(model_config, model))"),
            (dl, "load_weights", "loaded_weights = model.load_weights("),
            (m, "load_weights", "return loader.load_weights(weights)"),
            ("vllm/model_executor/models/utils.py", "load_weights",
             'autoloaded_weights = set(self._load_module("", self.module, weights))'),
            ("vllm/model_executor/models/utils.py", "_load_module",
             "loaded_params = module_load_weights(weights)"),
            (m, "load_weights", "weight_loader(param, loaded_weight, shard_id)"),
            ("vllm/model_executor/layers/fused_moe/layer.py" if ctx.model.moe else
             "vllm/model_executor/layers/linear.py", "weight_loader",
             "loaded_weight = loaded_weight.to(param.device)"),
        ]
    quant = rng.choice(("fp8", "awq_marlin", "gptq_marlin", "compressed_tensors"))
    return [
        (lpath, "load_model", "process_weights_after_loading(model, model_config, target_device)"),
        (upath, "process_weights_after_loading", "quant_method.process_weights_after_loading("
                                                  "module)"),
        (f"vllm/model_executor/layers/quantization/{quant}.py", "process_weights_after_loading",
         "layer.weight = torch.nn.Parameter(weight.t().contiguous(), requires_grad=False)"),
    ]


def capture_frames(ctx: Ctx) -> list[Frame]:
    g = ctx.grank
    if ctx.v0 or not (ctx.group and ctx.group.v1):
        fr: list[Frame] = [
            ("vllm/worker/worker.py", "_warm_up_model",
             "self.model_runner.capture_model(self.gpu_cache)"),
            ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
            ("vllm/worker/model_runner.py", "capture_model",
             "graph_runner.capture(**capture_inputs)"),
            ("vllm/worker/model_runner.py", "capture", "self.model("),
        ]
        if ctx.chance(0.4):
            return [*fr[:-1], ("vllm/worker/model_runner.py", "capture",
                               "with torch.cuda.graph(self._graph, pool=memory_pool, "
                               "stream=stream):"),
                    ("torch/cuda/graphs.py", "__exit__", "self.cuda_graph.capture_end()")]
        return fr + TORCH_CALL + model_forward_frames(ctx)
    fr = [(W1, "compile_or_warm_up_model", "self.model_runner.capture_model()")]
    if g >= 10:
        fr += [(R1, "capture_model", "self._capture_cudagraphs("),
               (R1, "_capture_cudagraphs", "self._dummy_run(num_tokens,")]
    else:
        fr += [(R1, "capture_model", "self._dummy_run(num_tokens)")]
    fr += [("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
           (R1, "_dummy_run", "outputs = self.model(")]
    if g >= 10 and ctx.chance(0.5):
        return [*fr, ("vllm/compilation/cuda_graph.py", "__call__",
                      "with torch.cuda.graph(cudagraph, pool=self.graph_pool):"),
                ("torch/cuda/graphs.py", "__exit__", "self.cuda_graph.capture_end()")]
    if ctx.chance(0.5):
        fr += [("vllm/compilation/cuda_piecewise_backend.py", "__call__",
                "return entry.runnable(*args)")]
    return fr + TORCH_CALL + model_forward_frames(ctx)


def sampler_frames(ctx: Ctx, pooler: bool) -> tuple[list[Frame], list[Frame]]:
    """(outer frames down to the raise, inner frames of the original torch OOM)."""
    fn = "_dummy_pooler_run" if pooler else "_dummy_sampler_run"
    outer: list[Frame] = [
        (W1, "compile_or_warm_up_model",
         f"self.model_runner.{fn}(hidden_states=last_hidden_states)" if not pooler else
         f"self.model_runner.{fn}(hidden_states)"),
        ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
        (R1, fn, "raise RuntimeError("),
    ]
    if pooler:
        inner: list[Frame] = [
            (R1, fn, "return self._dummy_pooler_run_task(hidden_states, max_task)"),
            (R1, "_dummy_pooler_run_task", "return model.pooler(hidden_states=hidden_states,"),
            *TORCH_CALL,
            ("vllm/model_executor/layers/pooler.py", "forward",
             "pooled_data = self.head(pooled_data, pooling_metadata)"),
        ]
        return outer, inner
    last = ctx.rng.choice((
        ("vllm/v1/sample/ops/topk_topp_sampler.py", "apply_top_k_top_p",
         "logits_sort, logits_idx = logits.sort(dim=-1, descending=False)"),
        ("vllm/v1/sample/sampler.py", "forward", "logits = logits.to(torch.float32)"),
        ("vllm/v1/sample/ops/penalties.py", "apply_all_penalties",
         "return apply_penalties(logits, prompt_token_ids, output_tokens_t,"),
        ("vllm/v1/sample/sampler.py", "apply_temperature", "return logits.div_(temp.unsqueeze("
                                                           "dim=1))"),
    ))
    inner = [(R1, fn, "sampler_output = self.sampler(logits=logits,"), *TORCH_CALL]
    if last[0].endswith("topk_topp_sampler.py"):
        inner += [("vllm/v1/sample/sampler.py", "forward",
                   "sampled = self.sample(logits, sampling_metadata)"),
                  ("vllm/v1/sample/sampler.py", "sample",
                   "random_sampled = self.topk_topp_sampler("),
                  *TORCH_CALL,
                  ("vllm/v1/sample/ops/topk_topp_sampler.py", "forward_native",
                   "logits = self.apply_top_k_top_p(logits, k, p)")]
    elif last[0].endswith("penalties.py"):
        inner += [("vllm/v1/sample/sampler.py", "forward",
                   "logits = self.apply_penalties(logits, sampling_metadata)"),
                  ("vllm/v1/sample/sampler.py", "apply_penalties",
                   "logits = apply_all_penalties(")]
    inner.append(last)
    return outer, inner


def v1_ec_frames(ctx: Ctx, phase: str) -> list[Frame]:
    g = ctx.grank
    fr: list[Frame] = [
        (CORE, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)" if g <= 9 else
         "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)"),
        (CORE, "__init__", "super().__init__(vllm_config, executor_class, log_stats,"),
    ]
    if phase == "load":
        return [*fr, (CORE, "__init__", "self.model_executor = executor_class(vllm_config)"),
                ("vllm/executor/executor_base.py" if g <= 11 else
                 "vllm/v1/executor/abstract.py", "__init__", "self._init_executor()")]
    fr.append((CORE, "__init__", "num_gpu_blocks, num_cpu_blocks, kv_cache_config = "
                                 "self._initialize_kv_caches("))
    if phase == "kv":
        kvp = "vllm/v1/core/kv_cache_planning.py" if g >= 33 else "vllm/v1/core/kv_cache_utils.py"
        return [*fr, (CORE, "_initialize_kv_caches", "kv_cache_configs = get_kv_cache_configs("
                      if g >= 10 else "kv_cache_configs = ["),
                (kvp, "get_kv_cache_configs" if g >= 10 else "get_kv_cache_config",
                 "check_enough_kv_cache_memory(vllm_config, kv_cache_spec_one_worker,"),
                (kvp, "check_enough_kv_cache_memory", "raise ValueError(")]
    if phase == "profile":
        return [*fr, (CORE, "_initialize_kv_caches",
                      "available_gpu_memory = self.model_executor.determine_available_memory()"),
                ("vllm/v1/executor/abstract.py", "determine_available_memory",
                 'output = self.collective_rpc("determine_available_memory")')]
    return [*fr, (CORE, "_initialize_kv_caches",
                  "self.model_executor.initialize_from_config(kv_cache_configs)"),
            ("vllm/v1/executor/abstract.py", "initialize_from_config",
             'self.collective_rpc("compile_or_warm_up_model")')]


def uniproc_frames(ctx: Ctx) -> list[Frame]:
    ex = "vllm/executor/uniproc_executor.py" if ctx.grank <= 11 else \
        "vllm/v1/executor/uniproc_executor.py"
    ut = "vllm/utils.py" if ctx.grank <= 10 else "vllm/utils/__init__.py"
    return [(ex, "collective_rpc", "answer = run_method(self.driver_worker, method, args, kwargs)"),
            (ut, "run_method", "return func(*args, **kwargs)")]


def v0_api_frames(ctx: Ctx, mq: bool) -> list[Frame]:
    api = "vllm/entrypoints/openai/api_server.py"
    fr: list[Frame] = [
        (api, "<module>", "uvloop.run(run_server(args))" if ctx.grank >= 6 else
         "asyncio.run(run_server(args))"),
        ("uvloop/__init__.py", "run", "return __asyncio.run(") if ctx.grank >= 6 else
        (f"{stdlib(ctx)}/asyncio/runners.py", "run",
         "return loop.run_until_complete(main)"),
        (api, "run_server", "async with build_async_engine_client(args) as engine_client:"),
        (f"{stdlib(ctx)}/contextlib.py", "__aenter__",
         "return await anext(self.gen)"),
        (api, "build_async_engine_client_from_engine_args",
         "raise RuntimeError(" if mq else "engine_client = AsyncLLMEngine.from_engine_args("),
    ]
    if mq:
        return fr
    return [*fr, ("vllm/engine/async_llm_engine.py", "from_engine_args", "engine = cls("),
            ("vllm/engine/async_llm_engine.py", "__init__",
             "self.engine = self._engine_class(*args, **kwargs)"),
            ("vllm/engine/async_llm_engine.py", "__init__", "super().__init__(*args, **kwargs)")]


def v0_engine_frames(ctx: Ctx, phase: str) -> list[Frame]:
    """LLMEngine construction down to the failing worker call (V0)."""
    llm = "vllm/engine/llm_engine.py"
    ex = "vllm/executor/gpu_executor.py" if ctx.grank <= 6 else \
        "vllm/executor/uniproc_executor.py"
    if phase == "load":
        return [(llm, "__init__", "self.model_executor = executor_class("),
                ("vllm/executor/executor_base.py", "__init__", "self._init_executor()"),
                (ex, "_init_executor", "self.driver_worker.load_model()" if ctx.tp == 1 else
                 'self._run_workers("load_model",'),
                ("vllm/worker/worker.py", "load_model", "self.model_runner.load_model()"),
                ("vllm/worker/model_runner.py", "load_model",
                 "self.model = get_model(model_config=self.model_config,"),
                ("vllm/model_executor/model_loader/__init__.py", "get_model",
                 "return loader.load_model(model_config=model_config,")]
    fr: list[Frame] = [(llm, "__init__", "self._initialize_kv_caches()")]
    if phase == "profile":
        return [*fr, (llm, "_initialize_kv_caches", "num_gpu_blocks, num_cpu_blocks = ("),
                ("vllm/executor/gpu_executor.py", "determine_num_available_blocks",
                 "return self.driver_worker.determine_num_available_blocks()"),
                ("vllm/worker/worker.py", "determine_num_available_blocks", "assert "
                 "self.init_gpu_memory > free_gpu_memory, (" if ctx.grank <= 8 else
                 "self.baseline_snapshot.free_memory > free_gpu_memory, (")]
    fr += [(llm, "_initialize_kv_caches",
            "self.model_executor.initialize_cache(num_gpu_blocks, num_cpu_blocks)"),
           (ex, "initialize_cache", "self.driver_worker.initialize_cache(num_gpu_blocks, "
                                    "num_cpu_blocks)")]
    if phase == "kv":
        return [*fr, ("vllm/worker/worker.py", "initialize_cache",
                      "raise_if_cache_size_invalid(num_gpu_blocks,"),
                ("vllm/worker/worker.py", "raise_if_cache_size_invalid", "raise ValueError(")]
    return [*fr, ("vllm/worker/worker.py", "initialize_cache", "self._warm_up_model()")]


# --------------------------------------------------------------------------- vLLM: failures


def merge(rng: random.Random, seqs: list[list[tuple[Proc, str]]]) -> list[tuple[Proc, str]]:
    """Interleave several processes' output in bursts, keeping each one's order."""
    seqs = [list(s) for s in seqs if s]
    out: list[tuple[Proc, str]] = []
    while seqs:
        i = rng.randrange(len(seqs))
        burst = rng.randrange(1, 6)
        out += seqs[i][:burst]
        del seqs[i][:burst]
        seqs = [s for s in seqs if s]
    return out


def worker_tb_records(ctx: Ctx, p: Proc, header: str, file: str,
                      lines: list[str]) -> list[tuple[Proc, str]]:
    """Pre-render a logger.exception record of one worker (for interleaving)."""
    assert ctx.group is not None
    ts = ctx.now().strftime("%m-%d %H:%M:%S")
    site = f"{file}:{ctx.lineno(file + ':' + header[:24])}"
    head = f"ERROR {ts} {site}] " if ctx.group.fmt == "plain" else f"ERROR {ts} [{site}] "
    pre = vprefix(ctx, p, raw=False)
    return [(p, (pre + head + ln).rstrip()) for ln in [header, *lines]]


def emit_merged(ctx: Ctx, recs: list[tuple[Proc, str]], keys: tuple[str, ...]) -> None:
    for _, text in recs:
        ctx.app(text, any(k in text for k in keys), "tbhead" if any(
            h in text for h in ("Traceback (most recent", "WorkerProc hit", "Exception in worker",
                                "WorkerProc failed to start")) else "")


def vllm_startup_failure(ctx: Ctx, phase: str, exc: list[str], inner: list[Frame] | None,
                         inner_exc: list[str] | None, keys: tuple[str, ...],
                         worker_frames: list[Frame], n_fail: int = 1) -> None:
    """Propagate a startup exception through the version's process layout: workers (logged,
    interleaved), EngineCore (logged and raw), API server, then exit."""
    rng, g = ctx.rng, ctx.grank
    def body(frames: list[Frame]) -> list[str]:
        if inner is not None and inner_exc is not None:
            return chained(tb(ctx, inner, inner_exc), tb(ctx, frames, exc))
        return tb(ctx, frames, exc)

    final = exc[0]
    if ctx.v0 or not (ctx.group and ctx.group.v1):
        vllm_v0_failure(ctx, phase, body, worker_frames, keys, n_fail)
        return
    if ctx.tp > 1:
        workers = ctx.workers[:]
        rng.shuffle(workers)
        failing = sorted(workers[:max(1, min(n_fail, ctx.tp, 3))], key=lambda p: p.rank)
        header = "WorkerProc failed to start." if phase == "load" else \
            "WorkerProc hit an exception."
        init = bool(worker_frames) and worker_frames[0][1] == "init_device"
        start = [(MPX, "__init__", "self.worker.init_device()" if init else
                  "self.worker.load_model()")] if phase == "load" else \
            [(MPX, "worker_busy_loop", "output = func(*args, **kwargs)")]
        recs = [worker_tb_records(ctx, p, header, "multiproc_executor.py",
                                  body(start + worker_frames))
                for p in failing]
        emit_merged(ctx, merge(rng, recs), keys)
        ctx.adv(0.05, 0.6)
        if phase == "load":
            ec_exc = ["Exception: WorkerProc initialization failed due to an exception in a "
                      "background process. See stack trace for root cause."]
            ec_frames = [*v1_ec_frames(ctx, "load"),
                         (MPX, "_init_executor",
                          "self.workers = WorkerProc.wait_for_ready(unready_workers)"),
                         (MPX, "wait_for_ready", "raise e from None")]
        else:
            short = final.split(": ", 1)[-1][:160]
            ec_exc = [f"RuntimeError: Worker failed with error '{short}', please check the "
                      "stack trace above for the root cause"]
            ec_frames = [*v1_ec_frames(ctx, phase), (MPX, "collective_rpc", "raise RuntimeError(")]
            if phase == "kv":
                ec_frames = v1_ec_frames(ctx, "kv")
                ec_exc = exc
        ec_lines = tb(ctx, ec_frames, ec_exc)
    else:
        frames = v1_ec_frames(ctx, phase)
        if phase != "kv":
            frames = frames + uniproc_frames(ctx) + worker_frames
        ec_lines = body(frames)
    vtb(ctx, ctx.ec, "EngineCore failed to start." if g >= 8 else
        "EngineCore hit an exception: Traceback (most recent call last):",
        "core.py", ec_lines, keys)
    if ctx.chance(0.55):
        name = {10: "EngineCore_0"}.get(g, "EngineCore" if g >= 20 else "EngineCore_DP0")
        if g <= 9:
            name = "EngineCore_0"
        raw = tb(ctx, [*mp_boot(ctx), (CORE, "run_engine_core", "raise e")], ec_lines[-len(exc):]
                 if len(ec_lines) >= len(exc) else exc)
        vraw(ctx, ctx.ec, [f"Process {name}:", *raw], keys)
    if ctx.tp > 1 and ctx.chance(0.3):
        vraw(ctx, ctx.ec, [f"[rank0]:[W{ctx.now():%m%d %H:%M:%S}.{rng.randrange(10**6):06d} "
                           f"{ctx.ec.pid} ProcessGroupNCCL.cpp:1496] Warning: WARNING: "
                           "destroy_process_group() was not called before program exit, which "
                           "can leak resources. For more info, please see "
                           "https://pytorch.org/docs/stable/distributed.html#shutdown "
                           "(function operator())"])
    ctx.adv(0.3, 3)
    vllm_api_init_failed(ctx)


def vllm_api_init_failed(ctx: Ctx) -> None:
    g = ctx.grank
    name = "EngineCore_0" if g <= 10 else ("EngineCore" if g >= 20 else "EngineCore_DP0")
    if g <= 9:
        msg = "RuntimeError: Engine core initialization failed. See root cause above."
    else:
        msg = ("RuntimeError: Engine core initialization failed. See root cause above. "
               f"Failed core proc(s): {{'{name}': 1}}" if ctx.chance(0.7) else
               "RuntimeError: Engine core initialization failed. See root cause above. "
               "Failed core proc(s): {}")
    api = "vllm/entrypoints/openai/api_server.py"
    frames: list[Frame] = [
        (bin_path(ctx, "vllm"),
         "<module>", "sys.exit(main())"),
        ("vllm/entrypoints/cli/main.py", "main", "args.dispatch_function(args)"),
        ("vllm/entrypoints/cli/serve.py", "cmd", "uvloop.run(run_server(args))"),
        ("uvloop/__init__.py", "run", "return __asyncio.run("),
        (api, "run_server",
         "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)"),
        (api, "run_server_worker", "async with build_async_engine_client("),
        (api, "build_async_engine_client_from_engine_args",
         "async_llm = AsyncLLM.from_vllm_config("),
        ("vllm/v1/engine/async_llm.py", "__init__",
         "self.engine_core = EngineCoreClient.make_async_mp_client("),
        ("vllm/v1/engine/core_client.py", "__init__", "with launch_core_engines(vllm_config, "
                                                      "executor_class,"),
        ("vllm/v1/engine/utils.py" if g >= 10 else "vllm/v1/engine/core_client.py",
         "wait_for_engine_startup", "raise RuntimeError("),
    ]
    if ctx.chance(0.35):
        vlog(ctx, ctx.api, "ERROR", "api_server.py", msg, keys=("initialization failed",))
    else:
        vraw(ctx, ctx.api, tb(ctx, frames if ctx.chance(0.7) else frames[-4:], [msg]))
    if ctx.chance(0.3):
        vraw(ctx, ctx.api, [
            f"{stdlib(ctx)}/multiprocessing/resource_tracker.py:279: UserWarning: "
            "resource_tracker: There appear to be 1 leaked shared_memory objects to clean up at "
            "shutdown",
            "  warnings.warn('resource_tracker: There appear to be %d '"])


def vllm_v0_failure(ctx: Ctx, phase: str, body: Callable[[list[Frame]], list[str]],
                    worker_frames: list[Frame], keys: tuple[str, ...], n_fail: int) -> None:
    rng = ctx.rng
    v0w = {"load": "load_model", "kv": "initialize_cache", "graphs": "initialize_cache",
           "profile": "determine_num_available_blocks"}.get(phase, "initialize_cache")
    if ctx.tp > 1 and phase != "kv":
        failing = ctx.workers[1:][:max(1, min(n_fail, 3))]
        recs = []
        for p in failing:
            lines = body([("vllm/executor/multiproc_worker_utils.py", "_run_worker_process",
                           "output = run_method(worker, method, args, kwargs)"),
                          ("vllm/utils.py", "run_method", "return func(*args, **kwargs)"),
                          *worker_frames])
            recs.append(worker_tb_records(
                ctx, p, f"Exception in worker VllmWorkerProcess while processing method {v0w}.",
                "multiproc_worker_utils.py", lines))
        emit_merged(ctx, merge(rng, recs), keys)
    mq = ctx.grank >= 6 and ctx.chance(0.6)
    eng_frames = v0_engine_frames(ctx, phase) + (worker_frames if phase != "kv" else [])
    if phase == "load":
        eng_frames = v0_engine_frames(ctx, "load") + worker_frames
    if mq:
        frames = [*mp_boot(ctx), ("vllm/engine/multiprocessing/engine.py", "run_mp_engine",
                             "engine = MQLLMEngine.from_engine_args(engine_args=engine_args,"),
                  ("vllm/engine/multiprocessing/engine.py", "from_engine_args", "return cls("),
                  ("vllm/engine/multiprocessing/engine.py", "__init__",
                   "self.engine = LLMEngine(*args, **kwargs)"), *eng_frames]
        vraw(ctx, ctx.ec, ["Process SpawnProcess-1:", *body(frames)], keys)
        ctx.adv(0.5, 3)
        vraw(ctx, ctx.api, tb(ctx, v0_api_frames(ctx, True), [
            "RuntimeError: Engine process failed to start. See stack trace for the root cause."]))
    else:
        vraw(ctx, ctx.api, body(v0_api_frames(ctx, False) + eng_frames), keys)
    if ctx.tp > 1 and ctx.chance(0.6):
        for p in ctx.workers[1:]:
            vlog(ctx, ctx.api, "ERROR", "multiproc_worker_utils.py",
                 f"Worker VllmWorkerProcess pid {p.pid} died, exit code: -15")
        vlog(ctx, ctx.api, "INFO", "multiproc_worker_utils.py",
             "Killing local vLLM worker processes")


# --------------------------------------------------------------------------- systemd, kernel


def sd_start(ctx: Ctx, starting: bool | None = None) -> None:
    if starting if starting is not None else ctx.chance(0.35):
        ctx.sys(f"Starting {ctx.status}...")
    ctx.adv(0.01, 0.2)
    ctx.sys(f"Started {ctx.status}.")
    ctx.run_start = ctx.t
    ctx.adv(0.2, 1.5)


def sd_consumed(ctx: Ctx) -> None:
    cpu = max(ctx.t - ctx.run_start, 3.0) * ctx.rng.uniform(0.4, 2.5)
    if ctx.sysd >= 255:
        peak = f"{ctx.rng.uniform(2, 90):.1f}G"
        extra = ", 0B memory swap peak" if ctx.sysd == 255 else ""
        ctx.sys(f"{ctx.unit}: Consumed {timespan(cpu)} CPU time, {peak} memory peak{extra}.")
    else:
        ctx.sys(f"{ctx.unit}: Consumed {timespan(cpu)} CPU time.")


def sd_fail(ctx: Ctx, code: str = "exited", status: str = "1/FAILURE",
            result: str = "exit-code", key: bool = False) -> None:
    ctx.adv(0.2, 3)
    ctx.sys(f"{ctx.unit}: Main process exited, code={code}, status={status}", key)
    ctx.sys(f"{ctx.unit}: Failed with result '{result}'.", key)
    if ctx.chance(0.8):
        sd_consumed(ctx)


def sd_clean_exit(ctx: Ctx) -> None:
    ctx.adv(0.2, 2)
    ctx.sys(f"{ctx.unit}: {'Deactivated successfully' if ctx.sysd >= 248 else 'Succeeded'}.")
    if ctx.chance(0.7):
        sd_consumed(ctx)


def sd_restart(ctx: Ctx, restart_sec: float | None = None) -> None:
    ctx.adv(restart_sec if restart_sec is not None else ctx.rng.choice((0.1, 5, 10, 30)))
    ctx.restarts += 1
    ctx.sys(f"{ctx.unit}: Scheduled restart job, restart counter is at {ctx.restarts}.")
    if ctx.sysd < 253:
        ctx.sys(f"Stopped {ctx.status}.")
    new_pids(ctx)
    sd_start(ctx, starting=ctx.chance(0.3))


def new_pids(ctx: Ctx) -> None:
    base = ctx.api.pid + ctx.rng.randrange(300, 4000)
    ctx.api = Proc("api", base)
    ctx.ec = Proc(ctx.ec.role, base + ctx.rng.randrange(60, 200))
    w0 = ctx.ec.pid + ctx.rng.randrange(30, 90)
    ctx.workers = [Proc("worker", w0 + r * ctx.rng.choice((1, 1, 2)), r) for r in range(ctx.tp)]


def comm(ctx: Ctx, p: Proc) -> str:
    """The 15-char kernel comm of a process, as systemd prints it."""
    if ctx.engine == "vllm":
        if p.role == "api":
            return ctx.ident if ctx.ident != "docker" else "python3"
        if ctx.grank >= 10:
            return "VLLM::EngineCor" if p.role == "ec" else "VLLM::Worker_TP"
        return "python3"
    if ctx.engine == "sglang":
        return "python3" if p.role == "api" else "sglang::schedul"
    return "text-generation" if p.role == "api" else "python3"


def all_procs(ctx: Ctx) -> list[Proc]:
    procs = [ctx.api]
    if ctx.engine != "vllm" or (ctx.group and ctx.group.v1 and not ctx.v0) or ctx.grank >= 6:
        procs.append(ctx.ec)
    if ctx.tp > 1:
        procs += ctx.workers if ctx.engine == "vllm" and ctx.group and ctx.group.v1 \
            else ctx.workers[1:]
    return procs


def pci_of(ctx: Ctx, rank: int) -> str:
    while len(ctx.pci) <= rank:
        ctx.pci.append(ctx.rng.choice(("0000:07:00", "0000:0f:00", "0000:3b:00", "0000:41:00",
                                       "0000:47:00", "0000:4e:00", "0000:87:00", "0000:90:00",
                                       "0000:b7:00", "0000:bd:00", "0000:c1:00", "0000:ca:00",
                                       "0000:18:00", "0000:86:00", "0000:af:00", "0000:d8:00")))
    return ctx.pci[rank]


def xid_line(ctx: Ctx, rank: int, xid: int, text: str, p: Proc | None) -> str:
    who = ""
    if p is not None:
        style = ctx.rng.random()
        if style < 0.8:
            who = f"pid={p.pid}, name={comm(ctx, p)}, "
        elif style < 0.9:
            who = "pid='<unknown>', name=<unknown>, "
    return f"NVRM: Xid (PCI:{pci_of(ctx, rank)}): {xid}, {who}{text}"


# --------------------------------------------------------------------------- vLLM: label bodies


def is_v1(ctx: Ctx) -> bool:
    return bool(ctx.group and ctx.group.v1 and not ctx.v0)


def vllm_exit_after_startup_failure(ctx: Ctx) -> None:
    sd_fail(ctx, status="1/FAILURE")
    if ctx.chance(0.45):
        sd_restart(ctx)
        if ctx.chance(0.6):
            vllm_prelude(ctx)


def vllm_sampler_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    pooler = ctx.chance(0.12)
    if pooler:
        ctx.model = rng.choice(EMBED_MODELS)
    ctx.max_seqs = rng.choice((256, 512, 1024, 1024, 1024, 2048))
    ctx.batched = rng.choice((8192, 16384, 2048)) if ctx.max_seqs > 256 else ctx.batched
    n = min(ctx.max_seqs, ctx.batched)
    vllm_startup(ctx, "graphs")
    vllm_graphs(ctx)
    ctx.adv(0.3, 4)
    outer, inner = sampler_frames(ctx, pooler)
    nums = oom_nums(ctx, private=not ctx.enforce_eager)
    inner_exc = oom_exc_lines(ctx, nums)
    what = f"pooler ({rng.choice(('embed', 'encode', 'classify'))})" if pooler else "sampler"
    canon = (f"RuntimeError: CUDA out of memory occurred when warming up {what} with {n} dummy "
             "requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when "
             "initializing the engine.")
    final = ctx.pick(canon, (
        f"RuntimeError: ran out of GPU memory while warming up the {what.split()[0]} ({n} dummy "
        "requests)",
        f"RuntimeError: Sampler warm-up with {n} dummy requests failed: CUDA out of memory. "
        "Reduce max_num_seqs.",
        f"vllm.exceptions.SamplerWarmupError: not enough device memory to warm up the "
        f"{what.split()[0]} for {n} concurrent sequences; lower --max-num-seqs or "
        "--gpu-memory-utilization",
        f"MemoryError: warmup of {what.split()[0]} (num_reqs={n}) exceeded available GPU memory",
        f"RuntimeError: OOM during {what.split()[0]} warmup with batch of {n} dummy requests. "
        "Try a smaller max_num_seqs.",
    ))
    keys = ("warming up", "warm-up", "warmup", "_dummy_sampler_run", "_dummy_pooler_run",
            inner_exc[0], final)
    if ctx.chance(0.12):  # only the torch OOM, traceback through _dummy_sampler_run
        vllm_startup_failure(ctx, "sampler", inner_exc, None, None, keys,
                             outer[:-1] + inner, n_fail=rng.randrange(1, ctx.tp + 1))
    else:
        vllm_startup_failure(ctx, "sampler", [final], inner, inner_exc, keys, outer,
                             n_fail=rng.randrange(1, ctx.tp + 1))
    vllm_exit_after_startup_failure(ctx)


def kv_sentences(ctx: Ctx, need: float, avail: float, est: int) -> str:
    g, L = ctx.grank, ctx.max_len
    rng = ctx.rng
    if not is_v1(ctx):
        if ctx.chance(0.5) or avail <= 0:
            canon = ("ValueError: No available memory for the cache blocks. Try increasing "
                     "`gpu_memory_utilization` when initializing the engine.")
        else:
            canon = (f"ValueError: The model's max seq len ({L}) is larger than the maximum number "
                     f"of tokens that can be stored in KV cache ({est}). Try increasing "
                     "`gpu_memory_utilization` or decreasing `max_model_len` when initializing "
                     "the engine.")
    elif avail <= 0 or ctx.chance(0.25):
        canon = ("ValueError: No available memory for the cache blocks. Try increasing "
                 "`gpu_memory_utilization` when initializing the engine.")
        if g >= 33:
            canon = canon[:-1] + (" (this flag also controls CPU memory reservation on the CPU "
                                  "backend, despite its name). See https://docs.vllm.ai/en/latest/"
                                  "configuration/conserving_memory/ for more details.")
    elif g <= 9:
        mid = rng.choice(("", " Based on the available memory,"))
        canon = (f"ValueError: To serve at least one request with the models's max seq len ({L}), "
                 f"({need:.2f} GiB KV cache is needed, which is larger than the available KV "
                 f"cache memory ({avail:.2f} GiB).{mid}  Try increasing `gpu_memory_utilization` "
                 "or decreasing `max_model_len` when initializing the engine.")
    elif g <= 25:
        mid = rng.choice(("", f"Based on the available memory, the estimated maximum model "
                              f"length is {est}."))
        canon = (f"ValueError: To serve at least one request with the models's max seq len ({L}), "
                 f"({need:.2f} GiB KV cache is needed, which is larger than the available KV "
                 f"cache memory ({avail:.2f} GiB). {mid} Try increasing `gpu_memory_utilization` "
                 "or decreasing `max_model_len` when initializing the engine.")
    else:
        canon = (f"ValueError: To serve at least one request with the model's max seq len ({L}), "
                 f"({round(need, 2)} GiB KV cache is needed, which is larger than the available "
                 f"KV cache memory ({round(avail, 2)} GiB). Based on the available memory, the "
                 f"estimated maximum model length is {est}. Try increasing "
                 "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
                 "decreasing `max_model_len` when initializing the engine. See "
                 "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more "
                 "details.")
    return ctx.pick(canon, (
        "ValueError: insufficient memory for KV cache blocks; increase gpu_memory_utilization",
        f"ValueError: KV cache cannot hold a single request of max_model_len={L}: needs "
        f"{need:.2f} GiB, only {max(avail, 0):.2f} GiB available",
        f"ValueError: Not enough GPU memory for the KV cache: {max(avail, 0):.2f} GiB left after "
        f"weights and activations, {need:.2f} GiB required for max_model_len {L}.",
        "RuntimeError: num_gpu_blocks is 0 - no memory left for the KV cache after loading the "
        "model.",
        f"ValueError: max_model_len ({L}) exceeds the KV cache capacity ({est} tokens). Lower "
        "--max-model-len or raise --gpu-memory-utilization.",
        f"vllm.exceptions.InsufficientKVCacheError: the KV cache pool ({max(avail, 0):.2f} GiB) "
        f"is smaller than one max-length sequence ({need:.2f} GiB).",
    ))


def vllm_kv_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    ctx.max_len = rng.choice((32768, 65536, 131072, 131072, 40960, 98304, 200000))
    vllm_startup(ctx, "profile")
    mem = vllm_mem_plan(ctx)
    need = mem["bpt"] * ctx.max_len / GIB
    avail = need * rng.uniform(0.05, 0.85) if ctx.chance(0.8) else -rng.uniform(0.1, 6)
    est = max(int(avail * GIB / mem["bpt"]) // 16 * 16, 0)
    vllm_profile(ctx, kv_gib=avail)
    if not is_v1(ctx) and avail > 0:
        mem["tokens"] = est
        vllm_kv(ctx)
    ctx.adv(0.1, 1)
    exc = [kv_sentences(ctx, need, avail, est)]
    keys = ("KV cache", "cache blocks", "max seq len", "check_enough_kv_cache_memory",
            "raise_if_cache_size_invalid", "max_model_len", exc[0])
    vllm_startup_failure(ctx, "kv", exc, None, None, keys, [], n_fail=1)
    vllm_exit_after_startup_failure(ctx)


def vllm_weights_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    # weights that do not fit: big model on few GPUs
    big = [m for m in MODELS if m.gib / ctx.tp > ctx.gpu.gib * 0.7]
    if big and ctx.chance(0.7):
        ctx.model = rng.choice(big)
    vllm_prelude(ctx)
    vllm_dist_init(ctx)
    vllm_load(ctx, fail_after=rng.randrange(0, 6))
    ctx.adv(0.2, 3)
    nums = oom_nums(ctx, dev=0)
    exc = oom_exc_lines(ctx, nums)
    wf = loader_frames(ctx)
    if is_v1(ctx):
        wf = [(W1, "load_model", "self.model_runner.load_model()"),
              (R1, "load_model", "self.model = model_loader.load_model("), *wf]
        if ctx.tp == 1:
            ex = "vllm/executor/uniproc_executor.py" if ctx.grank <= 11 else \
                "vllm/v1/executor/uniproc_executor.py"
            wf = [(ex, "_init_executor", 'self.collective_rpc("load_model")'), *wf[:]]
    keys = ("load_model", "load_weights", "initialize_model", "create_weights", "weight_loader",
            "process_weights_after_loading", "Starting to load model", exc[0])
    vllm_startup_failure(ctx, "load", exc, None, None, keys, wf,
                         n_fail=rng.randrange(1, ctx.tp + 1))
    vllm_exit_after_startup_failure(ctx)


def vllm_graph_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    ctx.enforce_eager = False
    if ctx.grank <= 5:
        pass
    vllm_startup(ctx, "graphs")
    vllm_graph_intro(ctx)
    p = model_procs(ctx)[0]
    if ctx.grank >= 6:
        desc, total = graph_desc(ctx)
        k = rng.randrange(0, total - 1)
        vraw(ctx, p, [tqdm_line(desc, k, total, rng.uniform(0.03, 0.4), False)],
             keys=("Capturing",))
        ctx.evs[-1].tag = "tqdm"
    ctx.adv(0.5, 20)
    nums = oom_nums(ctx, private=True)
    exc = oom_exc_lines(ctx, nums)
    if ctx.reword and ctx.chance(0.4):
        bs = rng.choice((1, 8, 64, 128, 256, 512))
        exc = [rng.choice((
            f"RuntimeError: CUDA graph capture ran out of memory (batch size {bs}). Consider "
            "--enforce-eager or a lower gpu_memory_utilization.",
            f"RuntimeError: CUDA out of memory occurred while capturing CUDA graphs for batch size "
            f"{bs}. Please try lowering `gpu_memory_utilization` or using `--enforce-eager`.",
            f"vllm.exceptions.CudaGraphCaptureError: failed to capture graph for num_tokens={bs}: "
            "out of memory",
        ))]
    keys = ("capture_model", "_capture_cudagraphs", "Capturing", "capture_end", "cuda_graph",
            "graph_runner", exc[0])
    vllm_startup_failure(ctx, "graphs", exc, None, None, keys, capture_frames(ctx),
                         n_fail=rng.randrange(1, ctx.tp + 1))
    vllm_exit_after_startup_failure(ctx)


# ---- serving


PROMPTS = (
    "How do I fix a memory leak in my Node.js service?",
    "Summarize the attached GPU memory report in three bullet points.",
    "What is the capital of Australia?",
    "Write a haiku about cache misses.",
    "Our Redis instance runs out of memory at night, what should we check?",
    "Explain the difference between RAM and VRAM.",
    "I get torch.OutOfMemoryError: CUDA out of memory when fine-tuning, any tips?",
    "Translate 'shared memory' into German.",
    "Generate SQL to find customers with more than 3 orders.",
    "Why does my laptop say 'Not enough memory to complete this operation'?",
    "List five uses of the KV cache in transformers.",
    "Refactor this function to avoid allocating memory in the loop.",
)


def vllm_stats(ctx: Ctx) -> str:
    rng = ctx.rng
    run, wait = rng.randrange(0, 90), rng.choice((0, 0, 0, rng.randrange(1, 40)))
    kv = rng.uniform(0.1, 97.9) if run else 0.0
    pt, gt = rng.uniform(0, 9000) if run else 0.0, rng.uniform(0, 4000) if run else 0.0
    if ctx.reword and ctx.chance(0.3):
        return (f"throughput prompt={pt:.1f} tok/s gen={gt:.1f} tok/s running={run} "
                f"waiting={wait} kv_cache_util={kv:.1f}%")
    if not is_v1(ctx):
        return (f"Avg prompt throughput: {pt:.1f} tokens/s, Avg generation throughput: {gt:.1f} "
                f"tokens/s, Running: {run} reqs, Swapped: 0 reqs, Pending: {wait} reqs, GPU KV "
                f"cache usage: {kv:.1f}%, CPU KV cache usage: 0.0%.")
    body = (f"Avg prompt throughput: {pt:.1f} tokens/s, Avg generation throughput: {gt:.1f} "
            f"tokens/s, Running: {run} reqs, Waiting: {wait} reqs, GPU KV cache usage: {kv:.1f}%, "
            f"Prefix cache hit rate: {rng.uniform(0, 80):.1f}%")
    return f"Engine 000: {body}" if ctx.grank >= 10 else body


def access_line(ctx: Ctx, status: str = "200 OK", path: str = "") -> str:
    rng = ctx.rng
    path = path or rng.choice(("/v1/chat/completions", "/v1/chat/completions", "/v1/completions",
                               "/health", "/metrics", "/v1/models", "/v1/embeddings"))
    meth = "GET" if path in ("/health", "/metrics", "/v1/models") else "POST"
    if rng.random() < 0.04 and status == "200 OK":
        path, meth, status = rng.choice((("/memory/stats", "GET", "404 Not Found"),
                                         ("/v1/memory", "POST", "404 Not Found")))
    return (f'INFO:     {rng.choice(IPS)}:{rng.randrange(30000, 65000)} - "{meth} {path} '
            f'HTTP/1.1" {status}')


def vllm_serve(ctx: Ctx, n: int) -> None:
    rng = ctx.rng
    api = ctx.api
    for _ in range(n):
        ctx.adv(0.05, 12)
        r = rng.random()
        if r < 0.42:
            uv(ctx, access_line(ctx))
        elif r < 0.70:
            vlog(ctx, api, "INFO", "loggers.py" if is_v1(ctx) else "metrics.py", vllm_stats(ctx))
        elif r < 0.86:
            req = rid(rng)
            if rng.random() < 0.5:
                prompt = rng.choice(PROMPTS)
                vlog(ctx, api, "INFO", "logger.py",
                     f"Received request {req}: prompt: '{prompt}', params: SamplingParams(n=1, "
                     f"temperature={rng.choice((0.0, 0.7, 1.0))}, top_p=1.0, top_k=-1, "
                     f"max_tokens={rng.choice((256, 512, 1024, 4096))}), prompt_token_ids: None, "
                     "lora_request: None.")
            vlog(ctx, api, "INFO", "async_llm.py" if is_v1(ctx) else "async_llm_engine.py",
                 f"Added request {req}.")
        elif r < 0.93 and not is_v1(ctx):
            vlog(ctx, model_procs(ctx)[0] if ctx.grank >= 6 else api, "WARNING", "scheduler.py",
                 f"Sequence group {rid(rng)} is preempted by PreemptionMode.RECOMPUTE mode "
                 "because there is not enough KV cache space. This can affect the end-to-end "
                 "performance. Increase gpu_memory_utilization or tensor_parallel_size to "
                 "provide more KV cache memory. total_num_cumulative_preemption="
                 f"{rng.randrange(1, 300)}")
        elif r < 0.97:
            vllm_request_error(ctx)
        else:
            uv(ctx, access_line(ctx))


def vllm_request_error(ctx: Ctx) -> None:
    """A request-level error: the server keeps running (healthy)."""
    rng = ctx.rng
    L = ctx.max_len
    asked = L + rng.randrange(10, 9000)
    if ctx.chance(0.5):
        vlog(ctx, ctx.api, "ERROR", "serving_chat.py", keys=("maximum context length",),
             msg="Error in preprocessing prompt inputs\n" +
             "\n".join(tb(ctx, [
                 ("vllm/entrypoints/openai/serving_chat.py", "create_chat_completion",
                  ") = await self._preprocess_chat("),
                 ("vllm/entrypoints/openai/serving_engine.py", "_validate_input",
                  "raise ValueError(")],
                 [f"ValueError: This model's maximum context length is {L} tokens. However, you "
                  f"requested {asked} tokens ({asked - 512} in the messages, 512 in the "
                  "completion). Please reduce the length of the messages or completion."]))
             if ctx.chance(0.5) else "Error in preprocessing prompt inputs")
    uv(ctx, access_line(ctx, rng.choice(("400 Bad Request", "400 Bad Request",
                                         "422 Unprocessable Entity")), "/v1/chat/completions"))


def v1_runtime_frames(ctx: Ctx) -> tuple[list[Frame], list[Frame]]:
    """(EngineCore frames down to the executor, worker frames down to the failing op)."""
    ec: list[Frame] = [
        (CORE, "run_engine_core", "engine_core.run_busy_loop()"),
        (CORE, "run_busy_loop", "self._process_engine_step()"),
        (CORE, "_process_engine_step", "outputs, model_executed = self.step_fn()"),
        (CORE, "step", "model_output = self.execute_model_with_error_logging("),
        (CORE, "execute_model_with_error_logging", "raise err"),
        (CORE, "execute_model_with_error_logging", "return model_fn(scheduler_output)"),
    ]
    wk: list[Frame] = [
        (W1, "execute_model", "output = self.model_runner.execute_model(scheduler_output,"),
        ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
    ]
    kind = ctx.rng.random()
    if kind < 0.5:
        wk += [(R1, "execute_model", "model_output = self.model("), *TORCH_CALL,
               *model_forward_frames(ctx)]
    elif kind < 0.75:
        wk += [(R1, "execute_model", "logits = self.model.compute_logits(sample_hidden_states, "
                                     "None)"),
               (mpath(ctx), "compute_logits", "logits = self.logits_processor(self.lm_head, "
                                              "hidden_states,"),
               *TORCH_CALL,
               ("vllm/model_executor/layers/logits_processor.py", "forward",
                "logits = self._get_logits(hidden_states, lm_head, embedding_bias)")]
    else:
        wk += [(R1, "execute_model", "sampler_output = self.sampler("), *TORCH_CALL,
               ("vllm/v1/sample/sampler.py", "forward", "logits = logits.to(torch.float32)")]
    return ec, wk


def vllm_runtime_death(ctx: Ctx, exc: list[str], wk_tail: list[Frame] | None,
                       keys: tuple[str, ...], worker_dies_hard: bool = False) -> None:
    """Engine death after readiness: worker/EngineCore tracebacks, API client shutdown, 500s."""
    rng, g = ctx.rng, ctx.grank
    if not is_v1(ctx):
        frames: list[Frame] = [
            ("vllm/engine/async_llm_engine.py", "run_engine_loop", "result = task.result()"),
            ("vllm/engine/async_llm_engine.py", "engine_step",
             "request_outputs = await self.engine.step_async(virtual_engine)"),
            ("vllm/engine/async_llm_engine.py", "step_async",
             "outputs = await self.model_executor.execute_model_async("),
            ("vllm/worker/worker_base.py", "execute_model",
             "output = self.model_runner.execute_model("),
            ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
            ("vllm/worker/model_runner.py", "execute_model",
             "hidden_or_intermediate_states = model_executable("),
            *TORCH_CALL, *(wk_tail or model_forward_frames(ctx))]
        if ctx.chance(0.5):
            vlog(ctx, ctx.api, "ERROR", "async_llm_engine.py",
                 "Engine background task failed\n" + "\n".join(tb(ctx, frames, exc)), keys=keys)
        else:
            vraw(ctx, ctx.ec, ["Process SpawnProcess-1:" if ctx.chance(0.3) else
                               "ERROR:    Exception in ASGI application", *tb(ctx, frames, exc)],
                 keys)
        ctx.adv(0.01, 1)
        for _ in range(rng.randrange(1, 4)):
            if ctx.chance(0.5):
                vraw(ctx, ctx.api, ["vllm.engine.async_llm_engine.AsyncEngineDeadError: Background "
                                    "loop has errored already."], key_all=True)
            else:
                vraw(ctx, ctx.api, [
                    "vllm.engine.multiprocessing.MQEngineDeadError: Engine loop is not running. "
                    "Inspect the stacktrace to find the original error: "
                    f"{exc[0].split(':', 1)[0]}('{exc[0].split(': ', 1)[-1][:80]}')"], key_all=True)
            uv(ctx, access_line(ctx, "500 Internal Server Error"))
        return
    ec_frames, wk = v1_runtime_frames(ctx)
    if wk_tail is not None:
        wk = wk[:2] + wk_tail
    exname = "vllm/v1/executor/multiproc_executor.py" if ctx.tp > 1 else \
        uniproc_frames(ctx)[0][0]
    if ctx.tp > 1:
        p = rng.choice(ctx.workers)
        if worker_dies_hard:
            vraw(ctx, p, exc, keys, key_all=True)
        else:
            rec = worker_tb_records(ctx, p, "WorkerProc hit an exception.",
                                    "multiproc_executor.py", tb(ctx, [
                (MPX, "worker_busy_loop", "output = func(*args, **kwargs)"), *wk], exc))
            others = []
            if ctx.chance(0.3):
                q = rng.choice([w for w in ctx.workers if w is not p])
                others = worker_tb_records(ctx, q, "WorkerProc hit an exception.",
                                           "multiproc_executor.py", tb(ctx, [
                    (MPX, "worker_busy_loop", "output = func(*args, **kwargs)"), *wk], exc))
            emit_merged(ctx, merge(rng, [rec, others]), keys)
        ctx.adv(0.01, 2)
        if g <= 11 and ctx.chance(0.5):
            vlog(ctx, ctx.ec, "ERROR", "multiproc_executor.py",
                 f"Worker proc VllmWorker-{p.rank} died unexpectedly, shutting down executor.")
        elif g >= 33 and ctx.chance(0.5):
            vlog(ctx, ctx.ec, "ERROR", "multiproc_executor.py",
                 f"Worker proc VllmWorker-{p.rank} died unexpectedly (exit code: "
                 f"{rng.choice((1, -6, -9))}), shutting down executor.")
        ec_lines = tb(ctx, [*ec_frames, (exname, "execute_model",
                                         "output = self.collective_rpc("),
                            (MPX, "collective_rpc", "raise RuntimeError(")],
                      [f"RuntimeError: Worker failed with error '{exc[0].split(': ', 1)[-1][:120]}'"
                       ", please check the stack trace above for the root cause"])
    else:
        ec_lines = tb(ctx, [*ec_frames, (exname, "execute_model", "output = self.collective_rpc("),
                            *uniproc_frames(ctx)[1:], *wk], exc)
    if g >= 9 and ctx.chance(0.5):
        vlog(ctx, ctx.ec, "ERROR", "dump_input.py",
             f"Dumping input data for V1 LLM engine (v{ctx.version}) with config: "
             f"model='{ctx.model.name}', tensor_parallel_size={ctx.tp}, "
             f"max_seq_len={ctx.max_len}, enforce_eager={ctx.enforce_eager}")
        vlog(ctx, ctx.ec, "ERROR", "dump_input.py",
             "Dumping scheduler output for model execution: SchedulerOutput(scheduled_new_reqs="
             f"[NewRequestData(req_id={rid(rng)},prompt_token_ids_len={rng.randrange(20, 30000)},"
             f"...)], num_scheduled_tokens={{...}}, total_num_scheduled_tokens="
             f"{rng.randrange(100, 16384)})")
    vtb(ctx, ctx.ec, "EngineCore encountered a fatal error.", "core.py", ec_lines, keys)
    ctx.adv(0.01, 1)
    if g >= 33:
        vlog(ctx, ctx.api, "WARNING", "core_client.py",
             "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup",
             keys=("exited unexpectedly",))
    elif g >= 10 and ctx.chance(0.6):
        name = "EngineCore_0" if g == 10 else ("EngineCore" if g >= 20 else "EngineCore_DP0")
        vlog(ctx, ctx.api, "ERROR", "core_client.py",
             f"Engine core proc {name} died unexpectedly, shutting down client.",
             keys=("died unexpectedly",))
    dead = ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.")
    if ctx.chance(0.6):
        vlog(ctx, ctx.api, "ERROR", "async_llm.py", "AsyncLLM output_handler failed.\n" +
             "\n".join(tb(ctx, [("vllm/v1/engine/async_llm.py", "output_handler",
                                 "outputs = await engine_core.get_output_async()"),
                                ("vllm/v1/engine/core_client.py", "get_output_async",
                                 "raise self._format_exception(outputs) from None")], [dead])),
             keys=("EngineDeadError",))
    for _ in range(rng.randrange(1, 4)):
        uv(ctx, access_line(ctx, "500 Internal Server Error"))


def vllm_http_shutdown(ctx: Ctx, complete: bool = True) -> None:
    g = ctx.grank
    if g <= 5:
        vlog(ctx, ctx.api, "INFO", "api_server.py", "Gracefully stopping http server")
    elif g <= 20:
        vlog(ctx, ctx.api, "INFO", "launcher.py", "Shutting down FastAPI HTTP server.")
    elif g <= 25:
        vlog(ctx, ctx.api, "INFO", "launcher.py",
             "[shutdown] API server: shutting down FastAPI HTTP server")
    else:
        vlog(ctx, ctx.api, "INFO", "launcher.py", "[shutdown] API server: shutdown triggered")
        vlog(ctx, ctx.api, "INFO", "api_server.py",
             "[shutdown] API server: stopping engine client mode=abort timeout=0s")
        vlog(ctx, ctx.ec, "INFO", "core.py", "[shutdown] EngineCore: trigger received "
                                             "signal=SIGTERM")
        if complete:
            vlog(ctx, ctx.ec, "INFO", "core.py", "[shutdown] EngineCore: exiting busy loop")
            vlog(ctx, ctx.api, "INFO", "core_client.py", "[shutdown] MPClient: complete")
            vlog(ctx, ctx.api, "INFO", "api_server.py", "[shutdown] API server: engine client "
                                                        "stopped")
    ctx.adv(0.05, 1)
    uv(ctx, "INFO:     Shutting down")
    if ctx.chance(0.4):
        uv(ctx, "INFO:     Waiting for connections to close. (CTRL+C to force quit)")
    uv(ctx, "INFO:     Waiting for application shutdown.")
    if complete:
        uv(ctx, "INFO:     Application shutdown complete.")
        if ctx.chance(0.7):
            uv(ctx, f"INFO:     Finished server process [{ctx.api.pid}]")


def vllm_runtime_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    vllm_startup(ctx, "ready")
    vllm_ready(ctx, key=True)
    vllm_serve(ctx, rng.randrange(3, 25))
    ctx.adv(1, 600)
    nums = oom_nums(ctx, private=not ctx.enforce_eager)
    exc = oom_exc_lines(ctx, nums)
    keys = ("execute_model", "EngineDeadError", "died unexpectedly", "fatal error",
            "Background loop", "background task failed", "exited unexpectedly", exc[0])
    vllm_runtime_death(ctx, exc, None, keys)
    ctx.adv(0.2, 3)
    if ctx.chance(0.12):  # the operator stops the dead server and the stop wedges (secondary)
        ctx.adv(30, 900)
        ctx.sys(f"Stopping {ctx.status}...")
        vllm_http_shutdown(ctx, complete=False)
        wedged_stop_tail(ctx, rng.choice((90, 45, 120)))
        return
    vllm_http_shutdown(ctx)
    if is_v1(ctx) and ctx.chance(0.4):
        sd_clean_exit(ctx)
    else:
        sd_fail(ctx)
        if ctx.chance(0.3):
            sd_restart(ctx)


def leftover_lines(ctx: Ctx, procs: list[Proc]) -> None:
    ctx.needs_sys = True
    for p in procs:
        ctx.sys(f"{ctx.unit}: Found left-over process {p.pid} ({comm(ctx, p)}) in control group "
                "while starting unit. Ignoring.\nThis usually indicates unclean termination of a "
                "previous run, or service implementation deficiencies.", key=True)


def previous_run_leftovers(ctx: Ctx) -> list[Proc]:
    """An earlier run whose children outlived it (KillMode=process, or killed main PID)."""
    rng = ctx.rng
    old = [ctx.ec, *ctx.workers] if ctx.tp > 1 and ctx.engine == "vllm" else [ctx.ec]
    old = [Proc(p.role, p.pid, p.rank) for p in old]
    if ctx.chance(0.5):
        ctx.sys(f"Stopping {ctx.status}...")
        ctx.adv(0.5, 8)
        if ctx.engine == "vllm" and ctx.group:
            vllm_http_shutdown(ctx, complete=ctx.chance(0.5))
        for p in old:
            ctx.sys(f"{ctx.unit}: Unit process {p.pid} ({comm(ctx, p)}) remains running after "
                    "unit stopped.")
        sd_clean_exit(ctx)
        ctx.sys(f"Stopped {ctx.status}.")
        ctx.adv(2, 400)
    new_pids(ctx)
    if rng.random() < 0.8:
        ctx.sys(f"Starting {ctx.status}...")
    leftover_lines(ctx, old[:rng.randrange(1, len(old) + 1)])
    ctx.sys(f"Started {ctx.status}.")
    ctx.needs_sys = True
    return old


def held_numbers(ctx: Ctx) -> tuple[float, float, float]:
    total = ctx.gpu.gib
    free = total * ctx.rng.uniform(0.03, 0.7)
    req = total * ctx.util
    return free, total, req


def vllm_gpu_held(ctx: Ctx) -> None:
    rng = ctx.rng
    leftovers: list[Proc] = []
    if ctx.chance(0.65):
        leftovers = previous_run_leftovers(ctx)
        if ctx.chance(0.3):
            used = int(ctx.gpu.mib * rng.uniform(0.6, 0.95))
            ctx.add("pre", f"Waiting for GPU memory to free (max used: {used} MiB)",
                    pid=ctx.api.pid - 1, ident="bash")
    else:
        sd_start(ctx)
    g = ctx.grank
    free, total, req = held_numbers(ctx)
    vllm_prelude(ctx)
    vllm_dist_init(ctx)
    ctx.adv(0.5, 4)
    variant = "free" if g >= 10 else rng.choice(("oom", "profile")) if not is_v1(ctx) or \
        g >= 8 else "oom"
    if g >= 10 and ctx.chance(0.15):
        variant = "oom"
    if variant == "oom" and not leftovers:
        leftovers = [Proc("ec", ctx.api.pid - rng.randrange(400, 4000))]
        leftover_lines(ctx, leftovers)
    dev = "cuda:0 " if g >= 33 else ""
    keys: tuple[str, ...] = ("Free memory on device", "init_device", "request_memory",
                             "left-over", "memory profiling", "in use", "other processes")
    if variant == "free":
        canon = (f"ValueError: Free memory on device {dev}({free:.2f}/{total:.2f} GiB) on startup "
                 f"is less than desired GPU memory utilization ({ctx.util}, {req:.2f} GiB). "
                 "Decrease GPU memory utilization or reduce GPU memory used by other processes.")
        exc = [ctx.pick(canon, (
            f"ValueError: Insufficient free GPU memory at startup: {free:.2f}/{total:.2f} GiB "
            f"free, but gpu_memory_utilization={ctx.util} requires {req:.2f} GiB. Other processes "
            "are using the device.",
            f"RuntimeError: GPU 0 already has {total - free:.2f} GiB in use by other processes; "
            f"requested utilization {ctx.util} ({req:.2f} GiB) cannot be satisfied.",
            f"ValueError: Startup memory check failed on cuda:0: only {free:.2f} GiB of "
            f"{total:.2f} GiB free (need {req:.2f} GiB for utilization {ctx.util}).",
            f"vllm.exceptions.GPUMemoryInUseError: {total - free:.2f} GiB of device memory is "
            "held by another process; free it or lower --gpu-memory-utilization.",
        ))]
        frames: list[Frame] = [(W1, "init_device", "raise ValueError(" if g < 33 else
                                "self.requested_memory = request_memory(")]
        if g >= 33:
            frames.append(("vllm/v1/worker/utils.py", "request_memory", "raise ValueError("))
        if is_v1(ctx) and ctx.tp == 1:
            ex = uniproc_frames(ctx)[0][0]
            frames = [(ex, "_init_executor", 'self.collective_rpc("init_device")'),
                      *uniproc_frames(ctx), *frames]
        elif ctx.tp > 1:
            frames = [(MPX, "__init__", "self.worker.init_device()"), *frames]
        vllm_startup_failure(ctx, "load", exc, None, None, (*keys, exc[0]), frames[1:]
                             if ctx.tp > 1 else frames, n_fail=ctx.tp)
    elif variant == "profile":
        vllm_load(ctx)
        init = int(gib(free) * rng.uniform(0.3, 0.9))
        cur = init + int(rng.uniform(2, 30) * GIB)
        exc = [f"AssertionError: Error in memory profiling. Initial free memory {init}, current "
               f"free memory {cur}. This happens when the GPU memory was not properly cleaned up "
               "before initializing the vLLM instance."]
        keys = (*keys, exc[0])
        vllm_startup_failure(ctx, "profile", exc, None, None, keys, [], n_fail=1)
    else:
        vllm_load(ctx, fail_after=rng.randrange(0, 3))
        others = tuple((p.pid, gib(ctx.gpu.gib * rng.uniform(0.55, 0.9))) for p in leftovers[:1])
        nums = oom_nums(ctx, others=others)
        exc = [f"{oom_class(ctx)}: {oom_message(ctx, nums)}"]
        wf = loader_frames(ctx)
        if is_v1(ctx):
            wf = [(W1, "load_model", "self.model_runner.load_model()"),
                  (R1, "load_model", "self.model = model_loader.load_model("), *wf]
        vllm_startup_failure(ctx, "load", exc, None, None, (*keys, exc[0]), wf, n_fail=ctx.tp)
    if variant != "oom":
        ctx.needs_sys = False
    vllm_exit_after_startup_failure(ctx)


def hung_task(ctx: Ctx, p: Proc) -> None:
    secs = ctx.rng.choice((120, 122, 241, 245, 362, 483))
    ctx.kern(f"INFO: task {comm(ctx, p)}:{p.pid} blocked for more than {secs} seconds.")
    kv = ctx.rng.choice(("6.8.0-45-generic #45-Ubuntu", "5.15.0-119-generic #129-Ubuntu",
                         "6.1.0-25-amd64 #1 Debian 6.1.106-3", "5.14.0-427.13.1.el9_4.x86_64 #1"))
    ctx.kern(f"      Tainted: P           OE      {kv}")
    ctx.kern('"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.')
    ctx.kern(f"task:{comm(ctx, p)} state:D stack:0     pid:{p.pid}  ppid:1      flags:0x00004002")


def wedged_stop_tail(ctx: Ctx, timeout: float) -> None:
    """systemd giving up on a stop: timed out, SIGKILLs, result 'timeout' (DOMAIN 2.3 E)."""
    rng = ctx.rng
    ctx.adv(timeout)
    skip = ctx.chance(0.07)
    abort = not skip and ctx.chance(0.05)
    verb = "Skipping SIGKILL" if skip else ("Aborting" if abort else "Killing")
    ctx.sys(ctx.pick(f"{ctx.unit}: State 'stop-sigterm' timed out. {verb}.", (
        f"{ctx.unit}: stop-sigterm timed out after {timeout:.0f}s, sending SIGKILL.",
        f"{ctx.unit}: Stop operation timed out. Killing remaining processes.",
        f"{ctx.unit}: Timeout while waiting for processes to exit after SIGTERM. Killing.")),
        key=True)
    procs = all_procs(ctx)
    if not skip:
        sig = "SIGABRT" if abort else "SIGKILL"
        for p in procs:
            if ctx.chance(0.9):
                ctx.sys(f"{ctx.unit}: Killing process {p.pid} ({comm(ctx, p)}) with signal {sig}.",
                        key=True)
    ctx.adv(0.01, 1)
    stuck = ctx.chance(0.35)
    if ctx.chance(0.85):
        sig = "6/ABRT" if abort else "9/KILL"
        ctx.sys(f"{ctx.unit}: Main process exited, code={'dumped' if abort else 'killed'}, "
                f"status={sig}")
    if stuck:
        if ctx.chance(0.4):
            hung_task(ctx, rng.choice(procs[1:] or procs))
        ctx.adv(timeout)
        ctx.sys(f"{ctx.unit}: Processes still around after SIGKILL. Ignoring.", key=True)
        if ctx.chance(0.5):
            ctx.adv(timeout)
            ctx.sys(f"{ctx.unit}: State 'final-sigterm' timed out. Killing.", key=True)
            ctx.adv(timeout)
            ctx.sys(f"{ctx.unit}: Processes still around after final SIGKILL. Entering failed "
                    "mode.", key=True)
    ctx.sys(f"{ctx.unit}: Failed with result 'timeout'.", key=True)
    if ctx.chance(0.7):
        ctx.sys(f"Stopped {ctx.status}." if ctx.chance(0.8) else f"Timed out stopping "
                                                                 f"{ctx.status}.")
    if ctx.chance(0.6):
        sd_consumed(ctx)


def vllm_wedged(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    where = rng.random()
    if where < 0.65:
        vllm_startup(ctx, "ready")
        vllm_ready(ctx)
        vllm_serve(ctx, rng.randrange(2, 30))
    elif where < 0.85:
        vllm_startup(ctx, rng.choice(("profile", "graphs", "done")))
    else:
        vllm_prelude(ctx)
        vllm_dist_init(ctx)
        vllm_load(ctx, fail_after=rng.randrange(1, 8))
    ctx.adv(1, 300)
    ctx.sys(f"Stopping {ctx.status}...", key=True)
    ctx.adv(0.05, 1)
    if where < 0.65 and ctx.chance(0.7):
        vllm_http_shutdown(ctx, complete=False)
    if ctx.grank >= 33 and ctx.chance(0.5):
        vlog(ctx, ctx.api, "WARNING", "multiproc_executor.py",
             "[shutdown] Executor: workers still running after grace period; sending SIGKILL")
    ctx.needs_sys = True
    wedged_stop_tail(ctx, rng.choice((90, 90, 90, 45, 30, 120, 300)))
    if ctx.chance(0.25):
        ctx.adv(1, 60)
        new_pids(ctx)
        sd_start(ctx)
        vllm_prelude(ctx)


# ---- NCCL


def nccl_tag(ctx: Ctx, p: Proc) -> str:
    return f"{ctx.host}:{p.pid}:{p.pid + ctx.rng.randrange(20, 400)} [{p.rank}]"


def nccl_error_text(ctx: Ctx) -> tuple[str, list[str]]:
    """(short NCCL error text, detail lines as torch/NCCL print them)."""
    rng = ctx.rng
    kind = rng.choice(("system", "cuda", "internal", "remote", "invalid"))
    peer = f"10.{rng.randrange(0, 255)}.{rng.randrange(0, 255)}.{rng.randrange(2, 250)}"
    if kind == "system":
        return ("unhandled system error (run with NCCL_DEBUG=INFO for details)",
                ["ncclSystemError: System call (e.g. socket, malloc) or external library call "
                 "failed or device error. ", "Last error:",
                 rng.choice((f"socketStartConnect: Connect to {peer}<{rng.randrange(30000, 60000)}"
                             "> failed : Software caused connection abort",
                             "Error while creating shared memory segment /dev/shm/nccl-"
                             f"{hexs(rng, 6)} (size 9637888)"))])
    if kind == "cuda":
        return ("unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
                ["ncclUnhandledCudaError: Call to CUDA function failed.", "Last error:",
                 rng.choice(("Cuda failure 'peer access is not supported between these two "
                             "devices'", "Cuda failure 'invalid argument'",
                             "Failed to CUDA calloc async 608 bytes"))])
    if kind == "internal":
        return ("internal error - please report this issue to the NCCL developers",
                ["ncclInternalError: Internal check failed.", "Last error:",
                 f"Message truncated : received {rng.randrange(1024, 9000)} bytes instead of 256"])
    if kind == "remote":
        return ("remote process exited or there was a network error",
                ["ncclRemoteError: A call failed possibly due to a network error or a remote "
                 "process exiting prematurely.", "Last error:",
                 f"NET/IB : Got completion from peer {peer}<{rng.randrange(30000, 60000)}> with "
                 "status=12 opcode=0 len=0 vendor err 129 (Recv)"])
    return ("invalid usage (run with NCCL_DEBUG=WARN for details)",
            ["ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
             "Last error:", "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000"])


def nccl_warn_lines(ctx: Ctx, p: Proc) -> list[str]:
    rng = ctx.rng
    t = nccl_tag(ctx, p)
    return [rng.choice((
        f"{t} NCCL INFO Bootstrap : Using eth0:10.0.{rng.randrange(255)}.{rng.randrange(255)}<0>",
        f"{t} NCCL INFO NET/Plugin: Could not find: libnccl-net.so.",
        f"{t} NCCL INFO cudaDriverVersion {rng.choice((12020, 12040, 12060, 12080))}",
    )), rng.choice((
        f"{t} transport/p2p.cc:{rng.randrange(200, 400)} NCCL WARN Cuda failure 'peer access is "
        "not supported between these two devices'",
        f"{t} misc/socket.cc:{rng.randrange(400, 600)} NCCL WARN socketStartConnect: Connect to "
        f"10.0.0.{rng.randrange(2, 200)}<{rng.randrange(30000, 60000)}> failed : Connection "
        "refused",
        f"{t} include/shm.h:{rng.randrange(20, 60)} NCCL WARN Error while creating shared memory "
        f"segment /dev/shm/nccl-{hexs(rng, 6)} (size 9637888)",
        f"{t} proxy.cc:{rng.randrange(1000, 1600)} NCCL WARN [Proxy Service {p.rank}] Failed to "
        "execute operation Connect from rank 1, retcode 3",
    ))]


def pynccl_frames(init: bool) -> list[Frame]:
    pw = "vllm/distributed/device_communicators/pynccl_wrapper.py"
    if init:
        return [("vllm/distributed/parallel_state.py", "__init__",
                 "self.device_communicator = device_comm_cls("),
                ("vllm/distributed/device_communicators/cuda_communicator.py", "__init__",
                 "self.pynccl_comm = PyNcclCommunicator("),
                ("vllm/distributed/device_communicators/pynccl.py", "__init__",
                 "self.comm: ncclComm_t = self.nccl.ncclCommInitRank("),
                (pw, "ncclCommInitRank", 'self.NCCL_CHECK(self._funcs["ncclCommInitRank"]'
                                         '(ctypes.byref(comm),'),
                (pw, "NCCL_CHECK", 'raise RuntimeError(f"NCCL error: {error_str}")')]
    return [("vllm/distributed/communication_op.py", "tensor_model_parallel_all_reduce",
             "return get_tp_group().all_reduce(input_)"),
            ("vllm/distributed/parallel_state.py", "all_reduce",
             "return self.device_communicator.all_reduce(input_)"),
            ("vllm/distributed/device_communicators/cuda_communicator.py", "all_reduce",
             "out = pynccl_comm.all_reduce(input_)"),
            ("vllm/distributed/device_communicators/pynccl.py", "all_reduce",
             "self.nccl.ncclAllReduce(buffer_type(in_tensor.data_ptr()),"),
            (pw, "ncclAllReduce", 'self.NCCL_CHECK(self._funcs["ncclAllReduce"](sendbuff, '
                                  'recvbuff, count,'),
            (pw, "NCCL_CHECK", 'raise RuntimeError(f"NCCL error: {error_str}")')]


def dist_backend_lines(ctx: Ctx, short: str, detail: list[str]) -> list[str]:
    ver = ctx.rng.choice(("2.20.5", "2.21.5", "2.26.2", "2.27.3"))
    src = ctx.rng.choice(("ProcessGroupNCCL.cpp:1970", "NCCLUtils.hpp:317",
                          "ProcessGroupNCCL.cpp:2785", "NCCLUtils.cpp:77"))
    return [f"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
            f"{src}, {short}, NCCL version {ver}", *detail]


def watchdog_lines(ctx: Ctx, p: Proc) -> list[str]:
    rng = ctx.rng
    seq = rng.randrange(1000, 900000)
    op = rng.choice(("ALLREDUCE", "ALLGATHER", "_ALLGATHER_BASE", "BROADCAST", "ALLTOALL_BASE"))
    numel = rng.choice((8388608, 4194304, 1048576, 65536, 29360128))
    tmo = rng.choice((600000, 1800000, 300000))
    ran = tmo + rng.randrange(1, 900)
    ts = f"{ctx.now():%m%d %H:%M:%S}.{rng.randrange(10**6):06d}"
    pre = f"[rank{p.rank}]:[E{ts} {p.pid} ProcessGroupNCCL.cpp:{rng.randrange(600, 1900)}]"
    pg = f"[PG ID {rng.randrange(0, 3)} PG GUID {rng.randrange(0, 5)} Rank {p.rank}]"
    work = (f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
            f"Timeout(ms)={tmo}) ran for {ran} milliseconds before timing out.")
    msg = ctx.pick(f"Watchdog caught collective operation timeout: {work}", (
        f"collective {op} (SeqNum={seq}) timed out after {tmo} ms on rank {p.rank}",
        f"NCCL watchdog: operation {op} #{seq} exceeded its timeout ({tmo} ms)",
    ))
    out = [f"{pre} {pg} {msg}",
           f"{pre} {pg} Exception (either an error or timeout) detected by watchdog at work: {seq},"
           f" last enqueued NCCL work: {seq + rng.randrange(0, 4)}, last completed NCCL work: "
           f"{seq - 1}.",
           f"{pre} {pg} Timeout at NCCL work: {seq}, last enqueued NCCL work: {seq}, last "
           f"completed NCCL work: {seq - 1}.",
           f"{pre} {pg} To avoid data inconsistency, we are taking the entire process down."]
    if ctx.chance(0.7):
        lib = f"{ctx.site}/torch/lib"
        out += [f"{pre} {pg} Process group watchdog thread terminated with exception: {pg} {msg}",
                "terminate called after throwing an instance of 'c10::DistBackendError'",
                f"  what():  {pg} Process group watchdog thread terminated with exception: {pg} "
                f"{msg}",
                "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/"
                f"ProcessGroupNCCL.cpp:{rng.randrange(600, 700)} (most recent call first):",
                "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 "
                f"(0x7f{hexs(rng, 10)} in {lib}/libc10.so)",
                "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::"
                "chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x23d "
                f"(0x7f{hexs(rng, 10)} in {lib}/libtorch_cuda.so)",
                "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + "
                f"0x{rng.randrange(0x100, 0xfff):x} (0x7f{hexs(rng, 10)} in "
                f"{lib}/libtorch_cuda.so)"]
        if ctx.chance(0.6):
            out += ["", "Fatal Python error: Aborted", ""]
    return out


def vllm_nccl(ctx: Ctx) -> None:
    rng = ctx.rng
    if ctx.tp < 2:
        ctx.tp = 2
        new_pids(ctx)
    sd_start(ctx)
    short, detail = nccl_error_text(ctx)
    kind = rng.choice(("init", "init", "runtime", "watchdog", "watchdog"))
    keys = ("NCCL", "nccl", "Watchdog", "watchdog", "DistBackendError", "collective")
    if kind == "init":
        vllm_prelude(ctx)
        procs = model_procs(ctx)
        for p in procs:
            ver = rng.choice(("2.21.5", "2.26.2"))
            vlog(ctx, p, "INFO", "pynccl.py", f"vLLM is using nccl=={ver}")
        if ctx.chance(0.6):
            p = rng.choice(procs)
            vraw(ctx, p, nccl_warn_lines(ctx, p))
        if ctx.chance(0.5):
            exc = [f"RuntimeError: NCCL error: {short}"]
        else:
            exc = dist_backend_lines(ctx, short, detail)
        exc[0] = ctx.pick(exc[0], (f"RuntimeError: NCCL communicator failure: {short}",
                                   f"NcclError: ncclCommInitRank failed: {short}",
                                   "RuntimeError: failed to initialise the NCCL communicator "
                                   "(collective backend error)"))
        frames: list[Frame] = [(W1 if is_v1(ctx) else "vllm/worker/worker.py", "init_device",
                                "init_worker_distributed_environment(self.vllm_config, self.rank,"),
                               ("vllm/distributed/parallel_state.py",
                                "ensure_model_parallel_initialized",
                                "initialize_model_parallel(tensor_model_parallel_size,"),
                               ("vllm/distributed/parallel_state.py", "initialize_model_parallel",
                                "_TP = init_model_parallel_group(group_ranks,"),
                               ("vllm/distributed/parallel_state.py", "init_model_parallel_group",
                                "return GroupCoordinator("), *pynccl_frames(True)]
        if exc[0].startswith("torch.distributed"):
            frames = [*frames[:3], ("torch/distributed/c10d_logger.py", "wrapper",
                                    "return func(*args, **kwargs)"),
                                   ("torch/distributed/distributed_c10d.py", "barrier",
                                    "work = group.barrier(opts=opts)")]
        if is_v1(ctx):
            frames = [(MPX, "__init__", "self.worker.init_device()"), *frames]
        vllm_startup_failure(ctx, "load", exc, None, None, (*keys, *exc), frames[1:]
                             if is_v1(ctx) else frames, n_fail=rng.randrange(1, ctx.tp + 1))
        vllm_exit_after_startup_failure(ctx)
        return
    vllm_startup(ctx, "ready")
    vllm_ready(ctx)
    vllm_serve(ctx, rng.randrange(3, 20))
    ctx.adv(5, 3000)
    if kind == "runtime":
        exc = [ctx.pick(f"RuntimeError: NCCL error: {short}",
                        (f"RuntimeError: NCCL all_reduce failed: {short}",
                         "NcclError: collective all_reduce returned ncclSystemError"))]
        tail = [*model_forward_frames(ctx)[:1], (mpath(ctx), "forward",
                                                 "output_parallel = self.quant_method.apply("),
                *pynccl_frames(False)]
        vllm_runtime_death(ctx, exc, tail, (*keys, exc[0]))
    else:
        p = rng.choice(model_procs(ctx))
        lines = watchdog_lines(ctx, p)
        vraw(ctx, p, lines, keys)
        ctx.adv(0.1, 3)
        if is_v1(ctx):
            vlog(ctx, ctx.ec, "ERROR", "multiproc_executor.py",
                 f"Worker proc VllmWorker-{p.rank} died unexpectedly, shutting down executor.")
            if ctx.chance(0.6):
                vlog(ctx, ctx.api, "ERROR", "async_llm.py", "AsyncLLM output_handler failed.")
                vraw(ctx, ctx.api, ["vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
                                    "encountered an issue. See stack trace (above) for the root "
                                    "cause."])
        uv(ctx, access_line(ctx, "500 Internal Server Error"))
    ctx.adv(0.2, 5)
    if ctx.chance(0.5):
        vllm_http_shutdown(ctx)
        sd_clean_exit(ctx) if ctx.chance(0.3) else sd_fail(ctx)
    else:
        sd_fail(ctx, "dumped" if ctx.chance(0.4) else "killed", "6/ABRT",
                "core-dump" if ctx.chance(0.5) else "signal")


# ---- hardware faults

HW_XIDS = {
    79: "GPU has fallen off the bus.",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
        "partition {a}, subpartition {b}.",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    64: "Row Remapper: Failed to remap row, reset gpu to activate.",
    74: "NVLink: fatal error detected on link {a}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    92: "High single-bit ECC error rate",
    119: "Timeout after 6s of waiting for RPC response from GPU{a} GSP! Expected function 76 "
         "(GSP_RM_CONTROL) (0x20800a4c 0x4).",
    120: "GSP task exception: task 1 raised error code 0x{b}5 at 0x6d03f78 (0 more errors "
         "skipped)",
}
HW_CUDA = {79: ("unspecified launch failure", "unknown error", "an illegal memory access was "
                                                               "encountered"),
           48: ("uncorrectable ECC error encountered",),
           94: ("uncorrectable ECC error encountered",),
           95: ("uncorrectable ECC error encountered", "unspecified launch failure"),
           63: ("uncorrectable ECC error encountered",),
           64: ("uncorrectable ECC error encountered",),
           74: ("unspecified launch failure", "unknown error"), 92: ("unknown error",),
           119: ("unspecified launch failure", "unknown error"),
           120: ("unspecified launch failure",)}


def hw_kernel(ctx: Ctx, xid: int, rank: int, p: Proc | None) -> None:
    rng = ctx.rng
    pci = pci_of(ctx, rank)
    if xid == 79 and ctx.chance(0.5):
        ctx.kern(f"NVRM: GPU at PCI:{pci}: GPU-{hexs(rng, 8)}-{hexs(rng, 4)}-{hexs(rng, 4)}-"
                 f"{hexs(rng, 4)}-{hexs(rng, 12)}")
        ctx.kern(f"NVRM: GPU Board Serial Number: {rng.randrange(10**12, 10**13)}")
    text = HW_XIDS[xid].format(a=rng.randrange(0, 8), b=rng.randrange(0, 2))
    text = ctx.pick(text, ()) if xid != 79 else ctx.pick(text, ("GPU has fallen off the bus",
                                                                "GPU fell off the bus."))
    ctx.kern(xid_line(ctx, rank, xid, text, p), key=True)
    if xid == 79:
        ctx.kern(f"NVRM: GPU {pci}.0: GPU has fallen off the bus.", key=True)
        if ctx.chance(0.5):
            ctx.kern("NVRM: A GPU crash dump has been created. If possible, please run")
            ctx.kern("NVRM: nvidia-bug-report.sh as root to collect this data before")
            ctx.kern("NVRM: the NVIDIA kernel module is unloaded.")
    elif xid in (48, 94, 95) and ctx.chance(0.4):
        ctx.adv(0.001, 0.05)
        ctx.kern(xid_line(ctx, rank, 63, HW_XIDS[63], p), key=True)


def hw_app_error(ctx: Ctx, xid: int) -> list[str]:
    what = ctx.rng.choice(HW_CUDA[xid])
    lines = cuda_error_lines(ctx, what)
    if ctx.reword and "ECC" in what:
        lines[0] = lines[0].replace("uncorrectable ECC error encountered", ctx.rng.choice((
            "GPU reported an uncorrectable memory (ECC) error",
            "uncorrectable ECC error detected on device")))
    return lines


def vllm_hw_fault(ctx: Ctx) -> None:
    rng = ctx.rng
    xid = rng.choice((79, 79, 79, 48, 94, 95, 63, 74, 119, 64, 92, 120))
    variant = rng.random()
    if variant < 0.15:
        # ExecStartPre nvidia-smi check finds the GPU lost
        hw_kernel(ctx, 79, rng.randrange(ctx.tp), None)
        ctx.adv(60, 3600)
        ctx.sys(f"Starting {ctx.status}...")
        pre = ctx.api.pid - rng.randrange(2, 30)
        for r in range(ctx.tp if ctx.chance(0.5) else 1):
            ctx.add("pre", f"Unable to determine the device handle for GPU "
                           f"{pci_of(ctx, r).upper()}.0: GPU is lost.  Reboot the system to "
                           "recover this GPU", key=True, pid=pre, ident="nvidia-smi")
        ctx.sys(f"{ctx.unit}: Control process exited, code=exited, status=15/n/a", key=True)
        ctx.sys(f"{ctx.unit}: Failed with result 'exit-code'.")
        ctx.sys(f"Failed to start {ctx.status}.")
        ctx.needs_sys = True
        if ctx.chance(0.5):
            sd_restart_pre_fail(ctx, pre)
        return
    if variant < 0.3:
        sd_start(ctx)
        vllm_prelude(ctx)
        ctx.adv(0.5, 3)
        exc = ["pynvml.NVMLError_GpuIsLost: GPU is lost" if ctx.chance(0.6) else
               "vllm.third_party.pynvml.NVMLError_GpuIsLost: GPU is lost"]
        frames: list[Frame] = [
            ("vllm/platforms/cuda.py", "get_device_name", "return cls._get_physical_device_name("
                                                          "physical_device_id)"),
            ("vllm/platforms/cuda.py", "_get_physical_device_name",
             "return pynvml.nvmlDeviceGetName(handle)"),
            ("vllm/third_party/pynvml.py" if ctx.grank >= 11 else "pynvml.py",
             "nvmlDeviceGetName", "_nvmlCheckReturn(ret)"),
            ("vllm/third_party/pynvml.py" if ctx.grank >= 11 else "pynvml.py",
             "_nvmlCheckReturn", "raise NVMLError(ret)")]
        if ctx.chance(0.5):
            hw_kernel(ctx, 79, 0, None)
        vraw(ctx, ctx.api, tb(ctx, frames, exc), key_all=False, keys=("GPU is lost",))
        sd_fail(ctx)
        return
    sd_start(ctx)
    runtime = variant < 0.8
    if runtime:
        vllm_startup(ctx, "ready")
        vllm_ready(ctx)
        vllm_serve(ctx, rng.randrange(2, 20))
        ctx.adv(10, 5000)
    else:
        vllm_prelude(ctx)
        vllm_dist_init(ctx)
        vllm_load(ctx, fail_after=rng.randrange(0, 5))
    procs = model_procs(ctx)
    rank = rng.randrange(len(procs))
    hw_kernel(ctx, xid, rank, procs[rank])
    ctx.needs_kern = True
    ctx.adv(0.01, 2)
    exc = hw_app_error(ctx, xid)
    keys = ("ECC", "fallen off", "GPU is lost", exc[0])
    if "ECC" in exc[0]:
        ctx.needs_kern = False
    if runtime:
        vllm_runtime_death(ctx, exc, None, keys)
        ctx.adv(0.2, 4)
        if ctx.chance(0.3) and xid == 79:
            ctx.sys(f"Stopping {ctx.status}...")
            wedged_stop_tail(ctx, 90)
            return
        vllm_http_shutdown(ctx, complete=ctx.chance(0.6))
        sd_fail(ctx) if ctx.chance(0.7) else sd_clean_exit(ctx)
    else:
        wf = [(W1, "load_model", "self.model_runner.load_model()"),
              (R1, "load_model", "self.model = model_loader.load_model("),
              *loader_frames(ctx)] if is_v1(ctx) else loader_frames(ctx)
        vllm_startup_failure(ctx, "load", exc, None, None, keys, wf, n_fail=1)
        vllm_exit_after_startup_failure(ctx)


def sd_restart_pre_fail(ctx: Ctx, pre: int) -> None:
    ctx.adv(5, 30)
    ctx.restarts += 1
    ctx.sys(f"{ctx.unit}: Scheduled restart job, restart counter is at {ctx.restarts}.")
    ctx.sys(f"Starting {ctx.status}...")
    ctx.add("pre", f"Unable to determine the device handle for GPU {pci_of(ctx, 0).upper()}.0: "
                   "GPU is lost.  Reboot the system to recover this GPU", pid=pre + 40,
            ident="nvidia-smi")
    ctx.sys(f"{ctx.unit}: Control process exited, code=exited, status=15/n/a")
    ctx.sys(f"{ctx.unit}: Failed with result 'exit-code'.")
    ctx.sys(f"Failed to start {ctx.status}.")


# ---- other crashes

IMPORT_ERRORS = (
    "ModuleNotFoundError: No module named 'vllm._C'",
    "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
    "ImportError: {site}/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEab",
    "ImportError: cannot import name 'AutoModelForVision2Seq' from 'transformers' "
    "({site}/transformers/__init__.py)",
    "ModuleNotFoundError: No module named 'flash_attn'",
    "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
    "ModuleNotFoundError: No module named 'triton'",
    "ImportError: numpy.core.multiarray failed to import",
)


def other_import(ctx: Ctx) -> None:
    sd_start(ctx)
    err = ctx.rng.choice(IMPORT_ERRORS).format(site=ctx.site)
    mod = "vllm" if ctx.engine == "vllm" else ("sglang" if ctx.engine == "sglang" else
                                               "text_generation_server")
    frames: list[Frame] = [
        (bin_path(ctx, {"vllm": "vllm", "sglang": "python3",
                        "tgi": "text-generation-server"}[ctx.engine]), "<module>",
         f"from {mod}.entrypoints.cli.main import main" if ctx.engine == "vllm" else
         f"from {mod}.cli import app"),
        (f"{mod}/__init__.py", "<module>", "from .version import __version__" if
         ctx.chance(0.5) or ctx.engine != "vllm" else
         f"from {mod}.engine.arg_utils import AsyncEngineArgs, EngineArgs"),
        (f"{mod}/_custom_ops.py" if ctx.engine == "vllm" else f"{mod}/utils.py", "<module>",
         "import vllm._C  # noqa" if "_C" in err else "import torch"),
    ]
    if ctx.engine == "vllm" and ctx.grank >= 8 and ctx.chance(0.4):
        vlog(ctx, ctx.api, "INFO", "__init__.py", "Automatically detected platform cuda.")
    ctx.adv(0.5, 6)
    lines = tb(ctx, frames[:ctx.rng.randrange(1, 4)], [err])
    ctx.apps(lines[:-1])
    ctx.app(lines[-1], key=True)
    sd_fail(ctx)
    crash_loop(ctx, 1.0, lines[-1:])


def crash_loop(ctx: Ctx, p: float, repeat: list[str], status: str = "1/FAILURE") -> None:
    """Restart a few times with the same failure; maybe hit the start limit."""
    if not ctx.chance(p):
        return
    for _ in range(ctx.rng.randrange(1, 5)):
        sd_restart(ctx, ctx.rng.choice((0.1, 0.1, 1, 5)))
        ctx.adv(0.3, 4)
        ctx.apps(repeat)
        sd_fail(ctx, status=status)
    if ctx.chance(0.4):
        ctx.restarts += 1
        ctx.sys(f"{ctx.unit}: Scheduled restart job, restart counter is at {ctx.restarts}.")
        ctx.sys(f"{ctx.unit}: Start request repeated too quickly.")
        ctx.sys(f"{ctx.unit}: Failed with result "
                f"'{ctx.rng.choice(('exit-code', 'start-limit-hit'))}'.")
        ctx.sys(f"Failed to start {ctx.status}.")


def other_argparse(ctx: Ctx) -> None:
    rng = ctx.rng
    ln_ = rng.choice((8192, 32768))
    prog = {"vllm": rng.choice(("vllm serve", "api_server.py")),
            "sglang": "launch_server.py", "tgi": "text-generation-launcher"}[ctx.engine]
    if ctx.engine == "tgi":
        bad = rng.choice(("--max-model-len", "--gpu-memory-utilization", "--quantise"))
        sim = rng.choice(("max-input-tokens", "quantize"))
        lines = [f"error: unexpected argument '{bad}' found", "",
                 f"  tip: a similar argument exists: '--{sim}'", "",
                 "Usage: text-generation-launcher <--model-id <MODEL_ID>|--revision <REVISION>|"
                 "--validation-workers <VALIDATION_WORKERS>|--sharded <SHARDED>>", "",
                 "For more information, try '--help'."]
        key = lines[0]
    else:
        err = rng.choice((
            f"{prog}: error: unrecognized arguments: --max-model-length {ln_}",
            f"{prog}: error: argument --dtype: invalid choice: 'bf16' (choose from 'auto', "
            "'half', 'float16', 'bfloat16', 'float', 'float32')",
            f"{prog}: error: argument --gpu-memory-utilization: invalid float value: '90%'",
            f"{prog}: error: the following arguments are required: --model-path",
            f"{prog}: error: argument --tensor-parallel-size/-tp: invalid int value: 'auto'",
        ))
        usage = (f"usage: {prog} [-h] [--host HOST] [--port PORT] [--model MODEL]" if
                 ctx.engine == "vllm" else f"usage: {prog} [-h] --model-path MODEL_PATH "
                                           "[--tokenizer-path TOKENIZER_PATH]")
        lines = [usage, " " * (len(prog) + 7) + "[--tensor-parallel-size TENSOR_PARALLEL_SIZE]",
                 " " * (len(prog) + 7) + "[--gpu-memory-utilization GPU_MEMORY_UTILIZATION]",
                 err]
        key = err
    sd_start(ctx)
    if ctx.engine == "vllm" and ctx.grank >= 8 and ctx.chance(0.5):
        vlog(ctx, ctx.api, "INFO", "__init__.py", "Automatically detected platform cuda.")
    ctx.adv(0.3, 3)
    for ln in lines:
        ctx.app(ln, key=ln == key)
    sd_fail(ctx, status="2/INVALIDARGUMENT")
    crash_loop(ctx, 0.8, [key], status="2/INVALIDARGUMENT")


def other_exec(ctx: Ctx) -> None:
    rng = ctx.rng
    step, code, why = rng.choice((
        ("EXEC", "203/EXEC", "No such file or directory"),
        ("EXEC", "203/EXEC", "Permission denied"),
        ("EXEC", "203/EXEC", "Exec format error"),
        ("USER", "217/USER", "No such process"),
        ("CHDIR", "200/CHDIR", "No such file or directory"),
    ))
    path = rng.choice(("/opt/vllm/bin/vllm", "/home/ubuntu/.venv/bin/vllm", "/usr/local/bin/vllm",
                       "/srv/llm/venv/bin/python3", "/opt/sglang/bin/python",
                       "/usr/local/bin/text-generation-launcher"))
    ctx.needs_sys = True
    for i in range(rng.randrange(1, 6)):
        if i:
            ctx.adv(0.1, 5)
            ctx.restarts += 1
            ctx.sys(f"{ctx.unit}: Scheduled restart job, restart counter is at {ctx.restarts}.")
            if ctx.sysd < 253:
                ctx.sys(f"Stopped {ctx.status}.")
        if ctx.chance(0.3):
            ctx.sys(f"Starting {ctx.status}...")
        ctx.sys(f"Started {ctx.status}.")
        ctx.add("sys", f"{ctx.unit}: Failed at step {step} spawning {path}: {why}", key=True,
                pid=ctx.api.pid + i * 3, ident="(vllm)" if ctx.chance(0.4) else "systemd")
        ctx.sys(f"{ctx.unit}: Main process exited, code=exited, status={code}", key=True)
        ctx.sys(f"{ctx.unit}: Failed with result 'exit-code'.")
    if ctx.chance(0.6):
        ctx.sys(f"{ctx.unit}: Start request repeated too quickly.")
        ctx.sys(f"{ctx.unit}: Failed with result 'exit-code'.")
        ctx.sys(f"Failed to start {ctx.status}.")


def fault_lines(ctx: Ctx, sig: str = "Segmentation fault") -> list[str]:
    rng = ctx.rng
    out = [f"Fatal Python error: {sig}", ""]
    for t in range(rng.randrange(1, 3)):
        out.append(f"Thread 0x00007f{hexs(rng, 8)} (most recent call first):" if t else
                   f"Current thread 0x00007f{hexs(rng, 8)} (most recent call first):")
        for path, func in rng.sample((
                ("torch/cuda/graphs.py", "replay"), ("vllm/v1/worker/gpu_model_runner.py",
                                                     "execute_model"),
                ("threading.py", "wait"), ("vllm/_custom_ops.py", "paged_attention_v2"),
                ("torch/_ops.py", "__call__"), ("flashinfer/decode.py", "run"),
                ("vllm/v1/engine/core.py", "run_busy_loop"),
                ("zmq/sugar/socket.py", "recv_multipart"),
                ("multiprocessing/connection.py", "_recv_bytes")), rng.randrange(3, 6)):
            out.append(f'  File "{ctx.site}/{path}", line {ctx.lineno(path + func)} in {func}')
        out.append("")
    if ctx.chance(0.5):
        out.append("Extension modules: numpy.core._multiarray_umath, torch._C, zmq.backend.cython."
                   "context, psutil._psutil_linux, msgspec._core, sentencepiece._sentencepiece "
                   f"(total: {rng.randrange(20, 90)})")
    return out


def coredump_lines(ctx: Ctx, pid: int, comm_: str, sig: int) -> None:
    rng = ctx.rng
    ctx.add("other", f"Process {pid} ({comm_}) of user {rng.choice((0, 998, 1000))} dumped core.",
            key=True, pid=rng.randrange(100000, 300000), ident="systemd-coredump")
    if ctx.chance(0.6):
        ctx.add("other", f"\nModule libcuda.so.1 without build-id.\nStack trace of thread {pid}:\n"
                         f"#0  0x00007f{hexs(rng, 10)} n/a (libcuda.so.1 + 0x{hexs(rng, 6)})\n"
                         f"#1  0x00007f{hexs(rng, 10)} n/a (libtorch_cuda.so + 0x{hexs(rng, 7)})\n"
                         f"#2  0x00007f{hexs(rng, 10)} n/a (libpython3.12.so.1.0 + 0x"
                         f"{hexs(rng, 6)})\nELF object binary architecture: AMD x86-64",
                pid=rng.randrange(100000, 300000), ident="systemd-coredump")


def other_segv(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    if ctx.engine == "vllm":
        if ctx.chance(0.5):
            vllm_startup(ctx, "ready")
            vllm_ready(ctx)
            vllm_serve(ctx, rng.randrange(2, 12))
        else:
            vllm_startup(ctx, rng.choice(("kv", "graphs")))
    else:
        engine_serve_generic(ctx)
    ctx.adv(1, 900)
    sig, num, name = rng.choice((("Segmentation fault", 11, "SEGV"),
                                 ("Segmentation fault", 11, "SEGV"), ("Bus error", 7, "BUS"),
                                 ("Aborted", 6, "ABRT")))
    lines = fault_lines(ctx, sig)
    for ln in lines:
        ctx.app(ln, key=ln.startswith("Fatal Python error"))
    ctx.sys(f"{ctx.unit}: Main process exited, code=dumped, status={num}/{name}", key=True)
    if ctx.chance(0.6):
        coredump_lines(ctx, ctx.api.pid, comm(ctx, ctx.api), num)
    ctx.sys(f"{ctx.unit}: Failed with result 'core-dump'.", key=True)
    if ctx.chance(0.5):
        sd_consumed(ctx)


def other_hf(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    m = rng.choice(("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct",
                    "google/gemma-2-27b-it", "mistralai/Mistral-Small-24B-Instruct-2501",
                    "acme-corp/internal-llm-13b"))
    rid_ = f"Root=1-{hexs(rng, 8)}-{hexs(rng, 24)}"
    url = f"https://huggingface.co/{m}/resolve/main/config.json"
    kind = rng.random()
    if kind < 0.45:
        exc = [f"huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: {rid_})", "",
               f"Cannot access gated repo for url {url}.",
               f"Access to model {m} is restricted. You must have access to it and be "
               "authenticated to access it. Please log in."]
    elif kind < 0.7:
        exc = [f"huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: "
               f"{rid_})", "", f"Repository Not Found for url: {url}.",
               "Please make sure you specified the correct `repo_id` and `repo_type`.",
               "If you are trying to access a private or gated repo, make sure you are "
               "authenticated.", "Invalid username or password."]
    elif kind < 0.85:
        exc = [f"OSError: You are trying to access a gated repo.\nMake sure to have access to it "
               f"at https://huggingface.co/{m}.",
               f"401 Client Error. (Request ID: {rid_})"]
        exc = [*exc[0].split("\n"), exc[1]]
    else:
        exc = [f"OSError: We couldn't connect to 'https://huggingface.co' to load this file, "
               f"couldn't find it in the cached files and it looks like {m} is not the path to a "
               "directory containing a file named config.json.",
               "Checkout your internet connection or see how to run the library in offline mode "
               "at 'https://huggingface.co/docs/transformers/installation#offline-mode'."]
    frames: list[Frame] = [
        ("transformers/utils/hub.py", "cached_file", "resolved_file = hf_hub_download("),
        ("huggingface_hub/utils/_validators.py", "_inner_fn", "return fn(*args, **kwargs)"),
        ("huggingface_hub/file_download.py", "hf_hub_download", "return _hf_hub_download_to_"
                                                                "cache_dir("),
        ("huggingface_hub/file_download.py", "_raise_on_head_call_error", "raise head_call_error"),
        ("huggingface_hub/utils/_http.py", "hf_raise_for_status", "raise _format(GatedRepoError, "
                                                                  "message, response) from e"),
    ]
    if ctx.chance(0.5):
        first = tb(ctx, [("huggingface_hub/utils/_http.py", "hf_raise_for_status",
                          "response.raise_for_status()"),
                         ("requests/models.py", "raise_for_status",
                          "raise HTTPError(http_error_msg, response=self)")],
                   [f"requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
                    f"{url}"])
        lines = chained(first, tb(ctx, frames, exc), cause=True)
    else:
        lines = tb(ctx, frames[rng.randrange(0, 3):], exc)
    if ctx.engine == "vllm" and ctx.grank >= 8:
        vlog(ctx, ctx.api, "INFO", "__init__.py", "Automatically detected platform cuda.")
    ctx.adv(0.5, 8)
    for ln in lines:
        ctx.app(ln, key=any(s in ln for s in ("401", "gated", "Gated", "Repository Not Found",
                                              "couldn't connect")))
    sd_fail(ctx)
    crash_loop(ctx, 0.4, exc[:1])


def other_value(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    cap = rng.choice(("7.0", "7.5"))
    arch = rng.choice(("MambaForCausalLM", "FooLMForCausalLM", "Qwen3NextForCausalLM"))
    exc = rng.choice((
        f"ValueError: Model architectures ['{arch}'] are not "
        "supported for now. Supported architectures: dict_keys(['AquilaModel', "
        "'AquilaForCausalLM', 'ArcticForCausalLM', 'BaiChuanForCausalLM', ...])",
        f"ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
        f"Your Tesla V100-SXM2-32GB GPU has compute capability {cap}. You can use float16 instead "
        "by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.",
        f"ValueError: Total number of attention heads ({rng.choice((32, 40, 64))}) must be "
        f"divisible by tensor parallel size ({rng.choice((3, 6))}).",
        f"ValueError: User-specified max_model_len ({rng.choice((65536, 262144))}) is greater "
        "than the derived max_model_len (max_position_embeddings=32768 or model_max_length=None "
        "in model's config.json). This may lead to incorrect model outputs or CUDA errors. To "
        "allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        f"ValueError: The quantization method fp8 is not supported for the current GPU. Minimum "
        f"capability: 80. Current capability: {cap.replace('.', '')}.",
        "ValueError: Tokenizer class Qwen2Tokenizer does not exist or is not currently imported.",
        f"KeyError: 'model.layers.{rng.randrange(0, 40)}.mlp.experts.0.gate_proj.weight'",
        "NotImplementedError: Speculative decoding is not supported with pipeline parallelism.",
    ))
    if ctx.engine == "vllm":
        vllm_prelude(ctx)
        frames: list[Frame] = [
            ("vllm/engine/arg_utils.py", "create_engine_config",
             "model_config = self.create_model_config()"),
            ("vllm/config.py" if ctx.grank < 10 else "vllm/config/model.py", "__post_init__",
             "self._verify_quantization()" if "quantization" in exc else
             "self.max_model_len = _get_and_verify_max_len("),
        ]
        if exc.startswith("KeyError"):
            frames = [*loader_frames(ctx)[:1], (mpath(ctx), "load_weights",
                                               "param = params_dict[name]")]
    else:
        frames = [("sglang/srt/configs/model_config.py" if ctx.engine == "sglang" else
                   "text_generation_server/models/__init__.py", "__init__" if ctx.engine ==
                   "sglang" else "get_model", "raise ValueError(")]
    ctx.adv(0.5, 20)
    for ln in tb(ctx, frames, [exc]):
        ctx.app(ln, key=ln == exc)
    sd_fail(ctx)
    crash_loop(ctx, 0.3, [exc])


def oom_killer(ctx: Ctx, victim: Proc) -> None:
    rng = ctx.rng
    c = comm(ctx, victim)
    memcg = ctx.chance(0.6)
    ctx.kern(f"{c} invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), "
             f"order=0, oom_score_adj=0", key=True)
    if ctx.chance(0.5):
        ctx.kern(f"CPU: {rng.randrange(0, 128)} PID: {victim.pid} Comm: {c} Tainted: P           "
                 "OE      6.8.0-45-generic #45-Ubuntu")
        ctx.kern("Call Trace:")
        ctx.kern(" <TASK>")
        ctx.kern(" dump_stack_lvl+0x76/0xa0")
        ctx.kern(" dump_header+0x4a/0x240")
        ctx.kern(" oom_kill_process+0x101/0x180")
    cg = f"/system.slice/{ctx.unit}"
    ctx.kern(f"oom-kill:constraint=CONSTRAINT_{'MEMCG' if memcg else 'NONE'},nodemask=(null),"
             f"cpuset={ctx.unit},mems_allowed=0-1,oom_memcg={cg if memcg else '/'},"
             f"task_memcg={cg},task={c},pid={victim.pid},uid={rng.choice((0, 998, 1000))}")
    rss = rng.randrange(40, 480) * 1024 * 1024
    pre = "Memory cgroup out of memory: " if memcg else "Out of memory: "
    ctx.kern(f"{pre}Killed process {victim.pid} ({c}) total-vm:{rss * 3}kB, anon-rss:{rss}kB, "
             f"file-rss:{rng.randrange(10000, 900000)}kB, shmem-rss:{rng.randrange(0, 9000000)}kB, "
             f"UID:{rng.choice((0, 998, 1000))} pgtables:{rng.randrange(1000, 90000)}kB "
             "oom_score_adj:0", key=True)


def other_host_oom(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    if ctx.engine == "vllm":
        vllm_prelude(ctx)
        vllm_dist_init(ctx)
        vllm_load(ctx, fail_after=rng.randrange(1, 9))
    else:
        engine_serve_generic(ctx)
    ctx.adv(1, 60)
    victim = ctx.api if ctx.chance(0.6) else (ctx.ec if ctx.engine == "vllm" else ctx.api)
    oom_killer(ctx, victim)
    ctx.sys(f"{ctx.unit}: A process of this unit has been killed by the OOM killer.", key=True)
    ctx.needs_sys = True
    if ctx.chance(0.5):
        for p in all_procs(ctx)[1:]:
            if p is not victim and ctx.chance(0.7):
                ctx.sys(f"{ctx.unit}: Killing process {p.pid} ({comm(ctx, p)}) with signal "
                        "SIGKILL.")
    if victim is ctx.api:
        ctx.sys(f"{ctx.unit}: Main process exited, code=killed, status=9/KILL")
    ctx.sys(f"{ctx.unit}: Failed with result 'oom-kill'.", key=True)
    if ctx.chance(0.6):
        sd_consumed(ctx)
    if ctx.chance(0.4):
        sd_restart(ctx)


def other_illegal(ctx: Ctx) -> None:
    rng = ctx.rng
    sd_start(ctx)
    vllm_startup(ctx, "ready")
    vllm_ready(ctx)
    vllm_serve(ctx, rng.randrange(2, 15))
    ctx.adv(5, 2000)
    procs = model_procs(ctx)
    rank = rng.randrange(len(procs))
    if ctx.chance(0.7):
        xid = rng.choice((13, 31, 43))
        text = {13: f"Graphics SM Warp Exception on (GPC {rng.randrange(0, 8)}, TPC "
                    f"{rng.randrange(0, 9)}, SM {rng.randrange(0, 2)}): Out Of Range Address",
                31: f"Ch 000000{rng.randrange(10, 99)}, intr 00000000. MMU Fault: ENGINE GRAPHICS "
                    f"GPCCLIENT_T1_{rng.randrange(0, 16)} faulted @ "
                    f"0x7f{hexs(rng, 2)}_{hexs(rng, 8)}"
                    ". Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
                43: f"Ch 000000{rng.randrange(10, 99)}"}[xid]
        ctx.kern(xid_line(ctx, rank, xid, text, procs[rank]))
    what = rng.choice(("an illegal memory access was encountered",
                       "an illegal memory access was encountered",
                       "misaligned address", "an illegal instruction was encountered",
                       "device-side assert triggered"))
    exc = cuda_error_lines(ctx, what)
    keys = ("CUDA error", exc[0])
    vllm_runtime_death(ctx, exc, None, keys)
    vllm_http_shutdown(ctx, complete=ctx.chance(0.6))
    sd_fail(ctx) if ctx.chance(0.7) else sd_clean_exit(ctx)


def other_driver(ctx: Ctx) -> None:
    rng = ctx.rng
    pre = ctx.api.pid - rng.randrange(2, 30)
    if ctx.chance(0.5):
        ctx.sys(f"Starting {ctx.status}...")
        if ctx.chance(0.5):
            ctx.add("pre", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                           "driver. Make sure that the latest NVIDIA driver is installed and "
                           "running.", key=True, pid=pre, ident="nvidia-smi")
            code = "9/n/a"
        else:
            ctx.add("pre", "Failed to initialize NVML: Driver/library version mismatch", key=True,
                    pid=pre, ident="nvidia-smi")
            ctx.add("pre", f"NVML library version: {rng.choice(('550.127', '560.35', '570.86'))}",
                    pid=pre, ident="nvidia-smi")
            code = "18/n/a"
        ctx.sys(f"{ctx.unit}: Control process exited, code=exited, status={code}", key=True)
        ctx.sys(f"{ctx.unit}: Failed with result 'exit-code'.")
        ctx.sys(f"Failed to start {ctx.status}.")
        ctx.needs_sys = True
        return
    sd_start(ctx)
    exc = rng.choice((
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an "
        "NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
        f"RuntimeError: The NVIDIA driver on your system is too old (found version "
        f"{rng.choice((11040, 12020, 11080))}). Please update your GPU driver by downloading and "
        "installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
        "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been "
        "compiled with your version of the CUDA driver.",
        "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
        "multiprocessing, you must use the 'spawn' start method",
        f"OSError: [Errno 98] error while attempting to bind on address ('0.0.0.0', {ctx.port}): "
        "address already in use",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    ))
    if ctx.engine == "vllm":
        vllm_prelude(ctx)
    ctx.adv(0.3, 10)
    frames: list[Frame] = [("torch/cuda/__init__.py", "_lazy_init", "torch._C._cuda_init()")]
    if "bind" in exc:
        frames = [("vllm/entrypoints/openai/api_server.py", "create_server_socket",
                   "sock.bind(addr)")]
    for ln in tb(ctx, frames, [exc]):
        ctx.app(ln, key=ln == exc)
    sd_fail(ctx)
    crash_loop(ctx, 0.3, [exc])


def other_timeout(ctx: Ctx) -> None:
    """vLLM 0.33: the API server gives up waiting for the engine (slow weight loading)."""
    rng = ctx.rng
    sd_start(ctx)
    vllm_prelude(ctx)
    vllm_dist_init(ctx)
    vllm_load(ctx, fail_after=rng.randrange(3, 12))
    ctx.adv(600)
    exc = ("TimeoutError: Timed out waiting for engine core processes to start. This is often "
           "caused by slow weight loading for large models. Waited 600s (configured by "
           "VLLM_ENGINE_READY_TIMEOUT_S). To increase the timeout, set the environment variable: "
           "VLLM_ENGINE_READY_TIMEOUT_S=<seconds>")
    for ln in tb(ctx, [("vllm/v1/engine/core_client.py", "_wait_for_engine_startup",
                        "raise TimeoutError(")], [exc]):
        vraw(ctx, ctx.api, [ln], key_all=ln == exc)
    sd_fail(ctx)


def vllm_other(ctx: Ctx) -> None:
    fams: list[tuple[Callable[[Ctx], None], float]] = [
        (other_import, 1.0), (other_argparse, 1.0), (other_exec, 0.8), (other_segv, 1.0),
        (other_hf, 1.0), (other_value, 1.2), (other_host_oom, 1.0), (other_illegal, 1.0),
        (other_driver, 0.8)]
    if ctx.grank >= 33:
        fams.append((other_timeout, 0.6))
    funcs = [f for f, _ in fams]
    ctx.rng.choices(funcs, weights=[w for _, w in fams])[0](ctx)


# ---- healthy vLLM


def vllm_stop_noise(ctx: Ctx) -> None:
    """Harmless lines after SIGTERM reached every process (DOMAIN 3.8)."""
    rng = ctx.rng
    procs = model_procs(ctx)
    if ctx.tp > 1 and ctx.chance(0.4):
        p = rng.choice(procs)
        vraw(ctx, p, tb(ctx, [(MPX if is_v1(ctx) else
                               "vllm/executor/multiproc_worker_utils.py",
                               "worker_busy_loop" if is_v1(ctx) else "_run_worker_process",
                               "method, args, kwargs, output_rank = self.rpc_broadcast_mq."
                               "dequeue(" if is_v1(ctx) else "for items in iter(task_queue.get, "
                                                              "_TERMINATE):"),
                              ("vllm/distributed/device_communicators/shm_broadcast.py",
                               "acquire_read", "time.sleep(RINGBUFFER_SLEEP_INTERVAL)")],
                        ["KeyboardInterrupt"]))
    if ctx.tp > 1 and ctx.chance(0.5):
        p = rng.choice(procs)
        vraw(ctx, p, [f"[rank{p.rank}]:[W{ctx.now():%m%d %H:%M:%S}.{rng.randrange(10**6):06d} "
                      f"{p.pid} ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has "
                      "NOT been destroyed before we destruct ProcessGroupNCCL. On normal program "
                      "exit, the application should call destroy_process_group to ensure that any "
                      "pending NCCL operations have finished in this process. In rare cases this "
                      "process can exit before this point and block the progress of another "
                      "member of the process group. This constraint has always been present,  but "
                      "this warning has only recently been added. For more info, please see "
                      "https://pytorch.org/docs/stable/distributed.html#shutdown (function "
                      "operator())"])
    if not is_v1(ctx) and ctx.tp > 1 and ctx.chance(0.6):
        for p in ctx.workers[1:]:
            vlog(ctx, p, "INFO", "multiproc_worker_utils.py", "Worker exiting")
    if ctx.chance(0.35):
        vraw(ctx, ctx.api, [
            f"{stdlib(ctx)}/multiprocessing/resource_tracker.py:279: UserWarning: "
            f"resource_tracker: There appear to be {rng.randrange(1, 4)} leaked semaphore objects "
            "to clean up at shutdown",
            "  warnings.warn('resource_tracker: There appear to be %d '"])


def vllm_healthy(ctx: Ctx) -> None:
    rng = ctx.rng
    kind = rng.choice(("ready", "ready", "serve", "stop", "stop", "restart", "busy"))
    if kind != "busy" and ctx.chance(0.06):
        # left-overs of an earlier run that exit in time: the start still succeeds
        old = [Proc("ec", ctx.api.pid - rng.randrange(300, 3000))]
        ctx.sys(f"Starting {ctx.status}...")
        leftover_lines(ctx, old)
        ctx.needs_sys = False
        ctx.sys(f"Started {ctx.status}.")
    elif kind != "busy" or ctx.chance(0.3):
        sd_start(ctx)
    if kind == "busy":
        ctx.t += rng.uniform(3600, 86400)
        vllm_serve(ctx, rng.randrange(40, 110))
        return
    vllm_startup(ctx, "ready")
    vllm_ready(ctx)
    vllm_serve(ctx, rng.randrange(0, 8) if kind == "ready" else rng.randrange(8, 60))
    if kind in ("stop", "restart"):
        ctx.adv(30, 90000)
        ctx.sys(f"Stopping {ctx.status}...")
        ctx.adv(0.05, 1)
        vllm_http_shutdown(ctx)
        vllm_stop_noise(ctx)
        ctx.adv(0.5, 12)
        sd_clean_exit(ctx)
        ctx.sys(f"Stopped {ctx.status}.")
        if kind == "restart":
            new_pids(ctx)
            sd_start(ctx)
            vllm_startup(ctx, "ready")
            vllm_ready(ctx)
            vllm_serve(ctx, rng.randrange(0, 6))


# --------------------------------------------------------------------------- SGLang


def sg(ctx: Ctx, rank: int | None, msg: str, key: bool = False, dp: bool = False) -> None:
    ts = ctx.now().strftime("%Y-%m-%d %H:%M:%S")
    if "ms" in ctx.flags:
        ts += f".{int((ctx.t % 1) * 1000):03d}"
    pre = "" if rank is None else (f" DP0 TP{rank}" if dp else f" TP{rank}")
    for part in msg.split("\n"):
        ctx.app(f"[{ts}{pre}] {part}".rstrip(), key)


def sg_raw(ctx: Ctx, lines: list[str], keys: tuple[str, ...] = ()) -> None:
    for ln in lines:
        ctx.app(ln, any(k in ln for k in keys), "blank" if not ln else
                ("tbhead" if _is_tb_head(ln) else ""))


def sg_startup(ctx: Ctx, upto: str) -> None:
    """SGLang launch: args, distributed init, weights, memory pool, CUDA graphs, ready."""
    rng = ctx.rng
    new = ctx.version.startswith("0.5")
    ranks = list(range(ctx.tp))
    frac = ctx.util
    sg(ctx, None, f"server_args=ServerArgs(model_path='{ctx.model.name}', tokenizer_path="
                  f"'{ctx.model.name}', tokenizer_mode='auto', load_format='auto', dtype='auto', "
                  f"trust_remote_code=False, context_length=None, host='0.0.0.0', "
                  f"port={ctx.port}, mem_fraction_static={frac}, max_running_requests=None, "
                  f"chunked_prefill_size=8192, tp_size={ctx.tp}, stream_interval=1, "
                  f"random_seed={rng.randrange(10**8, 10**9)}, log_level='info', "
                  "disable_cuda_graph=False, enable_torch_compile=False)")
    ctx.adv(2, 10)
    if not new and ctx.chance(0.5):
        sg(ctx, 0, "Attention backend not set. Use flashinfer backend by default.")
    for r in ranks:
        sg(ctx, r, "Init torch distributed begin.")
    ctx.adv(1, 6)
    if upto == "dist":
        return
    if new:
        for r in ranks:
            sg(ctx, r, f"Init torch distributed ends. mem usage={rng.uniform(0.1, 1.2):.2f} GB")
    avail0 = ctx.gpu.gib * rng.uniform(0.97, 0.995)
    for r in ranks:
        sg(ctx, r, f"Load weight begin. avail mem={avail0:.2f} GB")
    if upto == "load":
        return
    shards = rng.choice((2, 4, 5, 8))
    per = rng.uniform(0.5, 6)
    for i in range(0, shards + 1, rng.choice((1, 2))):
        ctx.app(tqdm_line("Loading safetensors checkpoint shards", i, shards, per, True),
                tag="tqdm")
        ctx.adv(per)
    w = ctx.model.gib / ctx.tp
    avail1 = avail0 - w
    for r in ranks:
        if new:
            sg(ctx, r, f"Load weight end. elapsed={per * shards:.2f} s, type={ctx.model.arch}, "
                       f"dtype=torch.bfloat16, avail mem={avail1:.2f} GB, mem usage={w:.2f} GB.")
        else:
            sg(ctx, r, f"Load weight end. type={ctx.model.arch}, dtype=torch.bfloat16, avail "
                       f"mem={avail1:.2f} GB")
    if upto == "pool":
        return
    tokens = rng.randrange(50000, 1500000)
    if new:
        kvs = rng.uniform(2, 60)
        sg(ctx, 0, f"KV Cache is allocated. #tokens: {tokens}, K size: {kvs:.2f} GB, V size: "
                   f"{kvs:.2f} GB")
    avail2 = ctx.gpu.gib * (1 - frac) + rng.uniform(-0.5, 1.5)
    for r in ranks:
        sg(ctx, r, f"Memory pool end. avail mem={avail2:.2f} GB")
    if upto == "graphs":
        return
    if ctx.enforce_eager:
        pass
    else:
        sg(ctx, 0, "Capture cuda graph begin. This can take up to several minutes.")
        secs = rng.uniform(3, 60)
        if new:
            n = rng.choice((23, 35, 52))
            ctx.app(tqdm_line(f"Capturing batches (bs=1 avail_mem={avail2 - 1:.2f} GB)", n, n,
                              secs / n, False), tag="tqdm")
        ctx.adv(secs)
        sg(ctx, 0, f"Capture cuda graph end. Time elapsed: {secs:.2f} s")
    sg(ctx, 0, f"max_total_num_tokens={tokens}, chunked_prefill_size=8192, max_prefill_tokens="
               f"16384, max_running_requests={rng.choice((2048, 4097, 1024))}, context_len="
               f"{ctx.max_len}")
    if upto == "ready":
        return
    sg_ready(ctx)


def sg_uv(ctx: Ctx, text: str) -> None:
    if "uvts" in ctx.flags:
        sg(ctx, None, text)
    else:
        ctx.app(text)


def sg_ready(ctx: Ctx, key: bool = False) -> None:
    sg_uv(ctx, f"INFO:     Started server process [{ctx.api.pid}]")
    sg_uv(ctx, "INFO:     Waiting for application startup.")
    sg_uv(ctx, "INFO:     Application startup complete.")
    sg_uv(ctx, f"INFO:     Uvicorn running on http://0.0.0.0:{ctx.port} (Press CTRL+C to quit)")
    ctx.adv(0.5, 3)
    sg_uv(ctx, 'INFO:     127.0.0.1:51234 - "GET /get_model_info HTTP/1.1" 200 OK')
    sg(ctx, 0, "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
               "#running-req: 0, #queue-req: 0")
    sg_uv(ctx, f'INFO:     127.0.0.1:{ctx.rng.randrange(30000, 60000)} - "POST /generate '
               'HTTP/1.1" 200 OK')
    sg(ctx, None, ctx.pick("The server is fired up and ready to roll!",
                           ("The server is up and ready to serve requests.",)), key=key)


def sg_serve(ctx: Ctx, n: int) -> None:
    rng = ctx.rng
    for _ in range(n):
        ctx.adv(0.05, 10)
        r = rng.random()
        run = rng.randrange(0, 120)
        if r < 0.35:
            sg(ctx, 0, f"Decode batch. #running-req: {run}, #token: {rng.randrange(100, 400000)}, "
                       f"token usage: {rng.uniform(0, 0.97):.2f}, "
                       f"gen throughput (token/s): {rng.uniform(5, 4000):.2f}, #queue-req: "
                       f"{rng.choice((0, 0, rng.randrange(1, 50)))}")
        elif r < 0.6:
            sg(ctx, 0, f"Prefill batch. #new-seq: {rng.randrange(1, 9)}, #new-token: "
                       f"{rng.randrange(5, 8192)}, #cached-token: {rng.randrange(0, 4000)}, "
                       f"token usage: {rng.uniform(0, 0.97):.2f}, #running-req: {run}, "
                       f"#queue-req: {rng.choice((0, 0, rng.randrange(1, 50)))}")
        else:
            path = rng.choice(("/v1/chat/completions", "/generate", "/v1/completions", "/health",
                               "/flush_cache"))
            sg_uv(ctx, f'INFO:     {rng.choice(IPS)}:{rng.randrange(30000, 65000)} - "POST {path} '
                       'HTTP/1.1" 200 OK')


SG_SCHED = "sglang/srt/managers/scheduler.py"
SG_MR = "sglang/srt/model_executor/model_runner.py"


def sg_init_frames(ctx: Ctx) -> list[Frame]:
    return [(SG_SCHED, "run_scheduler_process", "scheduler = Scheduler(server_args, port_args, "
                                                "gpu_id, tp_rank, dp_rank)"),
            (SG_SCHED, "__init__", "self.tp_worker = TpWorkerClass("),
            ("sglang/srt/managers/tp_worker_overlap_thread.py", "__init__",
             "self.worker = TpModelWorker(server_args, gpu_id, tp_rank, dp_rank, nccl_port)"),
            ("sglang/srt/managers/tp_worker.py", "__init__", "self.model_runner = ModelRunner("),
            (SG_MR, "__init__", "self.initialize(min_per_gpu_memory)")]


def sg_fail(ctx: Ctx, lines: list[str], keys: tuple[str, ...], rank: int = 0,
            died: bool = True) -> None:
    """Scheduler exception with its traceback, the SIGQUIT to the launcher, exit."""
    sg(ctx, rank, "Scheduler hit an exception: " + lines[0])
    ctx.evs[-1].tag = "tbhead"
    sg_raw(ctx, lines[1:], keys)
    if ctx.chance(0.3) and ctx.tp > 1:
        other = ctx.rng.choice([r for r in range(ctx.tp) if r != rank])
        sg(ctx, other, "Scheduler hit an exception: " + lines[0])
        sg_raw(ctx, lines[1:len(lines) // 2])
    ctx.adv(0.05, 2)
    sg(ctx, None, "Received sigquit from a child process. It usually means the child failed.")
    if ctx.chance(0.3):
        ctx.app("Killed")
    if died:
        if ctx.chance(0.6):
            sd_fail(ctx, "killed", "9/KILL", "signal")
        else:
            sd_fail(ctx)
        if ctx.chance(0.35):
            sd_restart(ctx)


def sg_kv(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "pool")
    ctx.adv(0.5, 3)
    canon = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    if ctx.version.startswith("0.5") and ctx.chance(0.6):
        canon = canon[:-1] + f". Current value: mem_fraction_static={ctx.util}"
    exc = ctx.pick(canon, (
        "RuntimeError: KV cache pool is too small: not enough memory left after loading the "
        "weights. Increase --mem-fraction-static.",
        "RuntimeError: Not enough memory for the KV cache pool (max_total_num_tokens <= 0).",
        f"RuntimeError: insufficient GPU memory to allocate the token pool with "
        f"mem_fraction_static={ctx.util}",
    ))
    pool = "sglang/srt/model_executor/pool_configurator.py" if ctx.version.startswith("0.5") \
        else SG_MR
    frames = [*sg_init_frames(ctx), (SG_MR, "initialize", "self.init_memory_pool("),
              (SG_MR, "init_memory_pool", "self.max_total_num_tokens = "
                                          "self.profile_max_num_token(total_gpu_memory)"
               if pool != SG_MR else "raise RuntimeError("),
              ]
    if pool != SG_MR:
        frames.append((pool, "configure", "raise RuntimeError("))
    lines = tb(ctx, frames, [exc])
    sg_fail(ctx, lines, ("memory", "init_memory_pool", exc))


def sg_weights(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "load")
    for i in range(ctx.rng.randrange(0, 3)):
        ctx.app(tqdm_line("Loading safetensors checkpoint shards", i, 8, 3.1, True), tag="tqdm")
        ctx.adv(3)
    exc = oom_exc_lines(ctx, oom_nums(ctx))
    frames = [*sg_init_frames(ctx), (SG_MR, "initialize", "self.load_model()"),
              (SG_MR, "load_model", "self.model = get_model("),
              ("sglang/srt/model_loader/__init__.py", "get_model",
               "return loader.load_model("),
              ("sglang/srt/model_loader/loader.py", "load_model",
               "model.load_weights(self._get_all_weights(model_config, model))"),
              (f"sglang/srt/models/{ctx.model.file}.py", "load_weights",
               "weight_loader(param, loaded_weight, shard_id)")]
    sg_fail(ctx, tb(ctx, frames, exc), ("load_model", "load_weights", exc[0]))


def sg_graphs(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "graphs")
    sg(ctx, 0, "Capture cuda graph begin. This can take up to several minutes.", key=True)
    ctx.adv(1, 20)
    oom = oom_message(ctx, oom_nums(ctx, private=True))
    new = ctx.version.startswith("0.5")
    sol = ["Possible solutions:", "1. disable cuda graph by --disable-cuda-graph",
           "2. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
           "3. disable torch compile by not using --enable-torch-compile"]
    if new:
        sol = ["Possible solutions:", "1. set --mem-fraction-static to a smaller value (e.g., "
                                      "0.8 or 0.7)",
               "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)",
               "3. disable CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. "
               "Huge performance loss)"]
    sol.append("Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ")
    head = ctx.pick(f"Exception: Capture cuda graph failed: {oom}",
                    (f"RuntimeError: CUDA graph capture failed (out of memory): {oom}",
                     f"Exception: cuda graph capture ran out of GPU memory: {oom}"))
    frames = [*sg_init_frames(ctx), (SG_MR, "initialize", "self.init_cuda_graphs()"),
              (SG_MR, "init_cuda_graphs", "self.cuda_graph_runner = CudaGraphRunner(self)"),
              ("sglang/srt/model_executor/cuda_graph_runner.py", "__init__", "raise Exception(")]
    sg_fail(ctx, tb(ctx, frames, [head, *sol]), ("Capture cuda graph", "cuda_graph",
                                                 "CudaGraphRunner", head))


def sg_runtime(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "ready")
    sg_ready(ctx, key=True)
    sg_serve(ctx, ctx.rng.randrange(3, 30))
    ctx.adv(5, 3000)
    exc = oom_exc_lines(ctx, oom_nums(ctx, private=True))
    frames: list[Frame] = [
        (SG_SCHED, "run_scheduler_process", "scheduler.event_loop_overlap()"
         if ctx.chance(0.5) else "scheduler.event_loop_normal()"),
        ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
        (SG_SCHED, "event_loop_normal", "result = self.run_batch(batch)"),
        (SG_SCHED, "run_batch", "logits_output, next_token_ids, can_run_cuda_graph = "
                                "self.tp_worker.forward_batch_generation("),
        ("sglang/srt/managers/tp_worker.py", "forward_batch_generation",
         "logits_output, can_run_cuda_graph = self.model_runner.forward("),
        (SG_MR, "forward", "return self.forward_extend("),
        (SG_MR, "forward_extend", "return self.model.forward("),
        (f"sglang/srt/models/{ctx.model.file}.py", "forward",
         "hidden_states = self.model(input_ids, positions, forward_batch, input_embeds)"),
    ]
    sg_fail(ctx, tb(ctx, frames, exc), ("forward_batch_generation", "run_batch", exc[0]),
            rank=ctx.rng.randrange(ctx.tp))


def sg_nccl(ctx: Ctx) -> None:
    if ctx.tp < 2:
        ctx.tp = 2
        new_pids(ctx)
    sd_start(ctx)
    short, detail = nccl_error_text(ctx)
    if ctx.chance(0.5):
        sg_startup(ctx, "dist")
        exc = dist_backend_lines(ctx, short, detail)
        frames = [*sg_init_frames(ctx), (SG_MR, "__init__", "min_per_gpu_memory = "
                                                            "self.init_torch_distributed()"),
                  (SG_MR, "init_torch_distributed", "initialize_model_parallel("
                                                    "tensor_model_parallel_size=self.tp_size)"),
                  ("torch/distributed/distributed_c10d.py", "barrier",
                   "work = group.barrier(opts=opts)")]
        sg_fail(ctx, tb(ctx, frames, exc), ("NCCL", "DistBackendError", "nccl"),
                rank=ctx.rng.randrange(ctx.tp))
        return
    sg_startup(ctx, "ready")
    sg_ready(ctx)
    sg_serve(ctx, ctx.rng.randrange(3, 20))
    ctx.adv(60, 5000)
    p = ctx.workers[ctx.rng.randrange(ctx.tp)]
    sg_raw(ctx, watchdog_lines(ctx, p), ("Watchdog", "watchdog", "NCCL", "collective"))
    ctx.adv(0.1, 2)
    sg(ctx, None, "Received sigquit from a child process. It usually means the child failed.")
    sd_fail(ctx, "killed", "9/KILL", "signal")


def sg_held(ctx: Ctx) -> None:
    leftovers = previous_run_leftovers(ctx)
    if ctx.chance(0.5):
        sg_startup(ctx, "dist")
        lo = ctx.gpu.gib * ctx.rng.uniform(0.05, 0.4)
        exc = ("RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by "
               f"other processes. min_per_gpu_memory={lo:.2f}, local_gpu_memory={ctx.gpu.gib:.2f}, "
               f"local_gpu_memory * 0.9={ctx.gpu.gib * 0.9:.2f}")
        frames = [*sg_init_frames(ctx), (SG_MR, "__init__", "min_per_gpu_memory = "
                                                            "self.init_torch_distributed()"),
                  (SG_MR, "init_torch_distributed", "raise RuntimeError(")]
        sg_fail(ctx, tb(ctx, frames, [exc]), ("unbalanced", "occupied", exc))
        return
    sg_startup(ctx, "load")
    others = tuple((p.pid, gib(ctx.gpu.gib * ctx.rng.uniform(0.55, 0.9))) for p in leftovers[:1])
    oom = [f"{oom_class(ctx)}: {oom_message(ctx, oom_nums(ctx, others=others))}"]
    frames = [*sg_init_frames(ctx), (SG_MR, "initialize", "self.load_model()"),
              (SG_MR, "load_model", "self.model = get_model(")]
    sg_fail(ctx, tb(ctx, frames, oom), ("memory in use", oom[0]))


def sg_healthy(ctx: Ctx) -> None:
    rng = ctx.rng
    kind = rng.choice(("ready", "serve", "stop", "busy"))
    if kind == "busy":
        ctx.t += rng.uniform(600, 80000)
        sg_serve(ctx, rng.randrange(40, 100))
        return
    sd_start(ctx)
    sg_startup(ctx, "serve")
    sg_serve(ctx, rng.randrange(0, 6) if kind == "ready" else rng.randrange(6, 50))
    if kind == "stop":
        ctx.adv(60, 80000)
        ctx.sys(f"Stopping {ctx.status}...")
        ctx.adv(0.1, 2)
        for ln in ("INFO:     Shutting down", "INFO:     Waiting for application shutdown.",
                   "INFO:     Application shutdown complete.",
                   f"INFO:     Finished server process [{ctx.api.pid}]"):
            sg_uv(ctx, ln)
        sd_clean_exit(ctx)
        ctx.sys(f"Stopped {ctx.status}.")


def sg_wedged(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "serve" if ctx.chance(0.7) else "graphs")
    sg_serve(ctx, ctx.rng.randrange(0, 25))
    ctx.adv(60, 50000)
    ctx.sys(f"Stopping {ctx.status}...", key=True)
    if ctx.chance(0.5):
        sg_uv(ctx, "INFO:     Shutting down")
        sg_uv(ctx, "INFO:     Waiting for application shutdown.")
    ctx.needs_sys = True
    wedged_stop_tail(ctx, ctx.rng.choice((90, 90, 45, 120)))


def sg_hw(ctx: Ctx) -> None:
    sd_start(ctx)
    sg_startup(ctx, "ready")
    sg_ready(ctx)
    sg_serve(ctx, ctx.rng.randrange(2, 20))
    ctx.adv(60, 5000)
    xid = ctx.rng.choice((79, 79, 48, 94, 95, 74, 119))
    rank = ctx.rng.randrange(ctx.tp)
    hw_kernel(ctx, xid, rank, ctx.workers[rank])
    exc = hw_app_error(ctx, xid)
    ctx.needs_kern = "ECC" not in exc[0]
    frames = [(SG_SCHED, "event_loop_normal", "result = self.run_batch(batch)"),
              ("sglang/srt/managers/tp_worker.py", "forward_batch_generation",
               "logits_output, can_run_cuda_graph = self.model_runner.forward(")]
    sg_fail(ctx, tb(ctx, frames, exc), ("ECC", exc[0]), rank=rank)


def sg_other(ctx: Ctx) -> None:
    fams: list[Callable[[Ctx], None]] = [other_import, other_argparse, other_exec, other_segv,
                                         other_hf, other_value, other_host_oom]
    ctx.rng.choice(fams)(ctx)


# --------------------------------------------------------------------------- TGI


def tg(ctx: Ctx, level: str, target: str, msg: str, key: bool = False) -> None:
    ts = ctx.now().strftime("%Y-%m-%dT%H:%M:%S") + f".{int((ctx.t % 1) * 1e6):06d}Z"
    ctx.app(f"{ts} {level:>5} {target}: {msg}", key)


def tg_startup(ctx: Ctx, upto: str) -> None:
    rng = ctx.rng
    new = ctx.version >= "2.2"
    prefill = ctx.batched
    tg(ctx, "INFO", "text_generation_launcher",
       f'Args {{ model_id: "{ctx.model.name}", revision: None, validation_workers: 2, '
       f"sharded: {'Some(true)' if ctx.tp > 1 else 'None'}, num_shard: "
       f"{f'Some({ctx.tp})' if ctx.tp > 1 else 'None'}, quantize: None, speculate: None, "
       "dtype: None, trust_remote_code: false, max_concurrent_requests: 128, max_best_of: 2, "
       "max_stop_sequences: 4, max_top_n_tokens: 5, max_input_tokens: None, max_input_length: "
       f"None, max_total_tokens: None, waiting_served_ratio: 0.3, max_batch_prefill_tokens: "
       f"Some({prefill}), max_batch_total_tokens: None, max_waiting_tokens: 20, max_batch_size: "
       f'None, cuda_graphs: None, hostname: "{ctx.host}", port: {ctx.port}, shard_uds_path: '
       '"/tmp/text-generation-server", master_addr: "localhost", master_port: 29500, '
       'huggingface_hub_cache: Some("/data"), weights_cache_override: None, '
       f"disable_custom_kernels: false, cuda_memory_fraction: {ctx.util}, json_output: false }}")
    if new and ctx.chance(0.6):
        tg(ctx, "INFO", "text_generation_launcher",
           f"Model supports up to {ctx.model.ctx} but tgi will now set its default to 4096 "
           "instead. This is to save VRAM by refusing large prompts in order to allow more users "
           "on the same hardware. You can increase that size using `--max-batch-prefill-tokens="
           f"{ctx.model.ctx + 50} --max-total-tokens={ctx.model.ctx} --max-input-tokens="
           f"{ctx.model.ctx - 1}`.")
    if ctx.chance(0.5):
        tg(ctx, "INFO", "text_generation_launcher", "Using default cuda graphs [1, 2, 4, 8, 16, "
                                                    "32]")
    tg(ctx, "INFO", "download: text_generation_launcher",
       f"Starting check and download process for {ctx.model.name}")
    ctx.adv(2, 60)
    if upto == "download":
        return
    tg(ctx, "INFO", "download: text_generation_launcher",
       f"Successfully downloaded weights for {ctx.model.name}")
    for r in range(ctx.tp):
        tg(ctx, "INFO", "shard-manager: text_generation_launcher", f"Starting shard rank={r}")
    if new and ctx.chance(0.5):
        tg(ctx, "INFO", "text_generation_launcher", "Using prefix caching = True")
        attn = rng.choice(("flashinfer", "flashdecoding"))
        tg(ctx, "INFO", "text_generation_launcher", f"Using Attention = {attn}")
    ctx.adv(5, 30)
    for r in range(ctx.tp):
        tg(ctx, "INFO", "shard-manager: text_generation_launcher",
           f"Waiting for shard to be ready... rank={r}")
    if upto == "load":
        return
    ctx.adv(5, 60)
    for r in range(ctx.tp):
        tg(ctx, "INFO", "text_generation_launcher",
           f"Server started at unix:///tmp/text-generation-server-{r}")
        tg(ctx, "INFO", "shard-manager: text_generation_launcher",
           f"Shard ready in {rng.uniform(8, 200):.2f}s rank={r}")
    tg(ctx, "INFO", "text_generation_launcher", "Starting Webserver")
    router = "text_generation_router_v3" if new else "text_generation_router"
    src = "backends/v3/src/lib.rs" if new else "router/src/main.rs"
    tg(ctx, "INFO", router, f"{src}:{ctx.lineno('warm' + src)}: Warming up model")
    if upto == "warmup":
        return
    if ctx.chance(0.6):
        tg(ctx, "INFO", "text_generation_launcher",
           "Cuda Graphs are enabled for sizes [32, 16, 8, 4, 2, 1]")
    blocks = rng.randrange(2000, 90000)
    if new:
        tg(ctx, "INFO", "text_generation_launcher", f"KV-cache blocks: {blocks}, size: 1")
    tg(ctx, "INFO", router, f"{src}:{ctx.lineno('set' + src)}: Setting max batch total tokens to "
                            f"{blocks * (1 if new else 16)}")
    tg(ctx, "INFO", "text_generation_router::server",
       f"router/src/server.rs:{ctx.lineno('hfapi')}: Using the Hugging Face API")
    if upto == "connected":
        return
    tg_ready(ctx)


def tg_ready(ctx: Ctx, key: bool = False) -> None:
    tg(ctx, "INFO", "text_generation_router::server",
       f"router/src/server.rs:{ctx.lineno('connected')}: Connected", key)


def tg_serve(ctx: Ctx, n: int) -> None:
    rng = ctx.rng
    for _ in range(n):
        ctx.adv(0.05, 20)
        span = rng.choice(("chat_completions", "generate_stream", "compat_generate", "generate"))
        tot = rng.uniform(0.05, 30)
        tg(ctx, "INFO", f"{span}{{parameters=GenerateParameters {{ best_of: None, temperature: "
                        f"Some({rng.choice((0.7, 1.0, 0.2))}), repetition_penalty: None, "
                        f"max_new_tokens: Some({rng.choice((256, 512, 1024))}), ... }} "
                        f'total_time="{tot:.6f}s" validation_time="{rng.uniform(0.1, 3):.6f}ms" '
                        f'queue_time="{rng.uniform(30, 900):.3f}µs" inference_time='
                        f'"{tot * 0.99:.6f}s" time_per_token="{rng.uniform(8, 60):.6f}ms" '
                        'seed="None"}',
           f"text_generation_router::server: router/src/server.rs:{ctx.lineno('ok')}: Success")
        if rng.random() < 0.08:
            tg(ctx, "ERROR", "chat_completions:async_stream:generate_stream: "
                             "text_generation_router::infer",
               f"router/src/infer/mod.rs:{ctx.lineno('inputerr')}: `inputs` tokens + "
               f"`max_new_tokens` must be <= 4096. Given: {rng.randrange(3600, 9000)} `inputs` "
               f"tokens and {rng.choice((512, 1024))} `max_new_tokens`")


def tg_shard_tb(ctx: Ctx, method: str, frames: list[Frame], exc: list[str],
                keys: tuple[str, ...]) -> None:
    tg(ctx, "ERROR", "text_generation_launcher", f"Method {method} encountered an error.")
    ctx.evs[-1].tag = "tbhead"
    for ln in tb(ctx, [("text_generation_server/interceptor.py", "intercept",
                        "return await response"), *frames], exc):
        ctx.app(ln, any(k in ln for k in keys), "blank" if not ln else "")


def tg_shutdown_failed(ctx: Ctx, err: str) -> None:
    ctx.adv(0.05, 2)
    if err == "WebserverFailed":
        tg(ctx, "ERROR", "text_generation_launcher", "Webserver Crashed")
    tg(ctx, "INFO", "text_generation_launcher", "Shutting down shards")
    for r in range(ctx.tp):
        if ctx.chance(0.7):
            tg(ctx, "INFO", "shard-manager: text_generation_launcher",
               f"Terminating shard rank={r}")
            tg(ctx, "INFO", "shard-manager: text_generation_launcher",
               f"Waiting for shard to gracefully shutdown rank={r}")
            tg(ctx, "INFO", "shard-manager: text_generation_launcher", f"shard terminated rank={r}")
    ctx.app(f"Error: {err}")
    sd_fail(ctx)
    if ctx.chance(0.35):
        sd_restart(ctx)


TG_FCL = "text_generation_server/models/flash_causal_lm.py"


def tg_kv(ctx: Ctx) -> None:
    sd_start(ctx)
    ctx.batched = ctx.rng.choice((4096, 8192, 16384, 32768))
    tg_startup(ctx, "warmup")
    ctx.adv(1, 30)
    n = ctx.batched
    msg = ctx.pick(f"Not enough memory to handle {n} prefill tokens. You need to decrease "
                   "`--max-batch-prefill-tokens`",
                   (f"Insufficient memory for {n} prefill tokens during warmup; lower "
                    "--max-batch-prefill-tokens",
                    f"Warmup failed: {n} prefill tokens do not fit in GPU memory. Reduce "
                    "`--max-batch-prefill-tokens`."))
    inner = tb(ctx, [(TG_FCL, "warmup", "_, batch, _ = self.generate_token(batch)"),
                     (f"{stdlib(ctx)}/contextlib.py", "inner",
                      "return func(*args, **kwds)"),
                     (TG_FCL, "generate_token", "out, speculative_logits = self.forward(batch, "
                                                "adapter_data)")],
               oom_exc_lines(ctx, oom_nums(ctx)))
    outer = tb(ctx, [("text_generation_server/server.py", "Warmup",
                      "max_supported_total_tokens = self.model.warmup(batch)"),
                     (TG_FCL, "warmup", "raise RuntimeError(")], [f"RuntimeError: {msg}"])
    tg(ctx, "ERROR", "text_generation_launcher", "Method Warmup encountered an error.")
    ctx.evs[-1].tag = "tbhead"
    for ln in chained(inner, outer):
        ctx.app(ln, "prefill tokens" in ln or msg in ln, "blank" if not ln else "")
    new = ctx.version >= "2.2"
    router = "text_generation_router_v3::client" if new else "text_generation_client"
    src = "backends/client/src/lib.rs" if new else "router/client/src/lib.rs"
    tg(ctx, "ERROR", f"warmup{{max_input_length={n - 1} max_prefill_tokens={n} max_total_tokens="
                     f"{n} max_batch_size=None}}:warmup: {router}",
       f"{src}:{ctx.lineno('srverr')}: Server error: {msg}", key=True)
    wrapped = f'Warmup(Generation("{msg}"))'
    ctx.app(f"Error: Backend({wrapped})" if new else f"Error: {wrapped}", key=True)
    tg_shutdown_failed(ctx, "WebserverFailed")


def tg_load_frames(ctx: Ctx) -> list[Frame]:
    return [("text_generation_server/cli.py", "serve", "server.serve("),
            ("text_generation_server/server.py", "serve_inner", "model = get_model_with_lora_"
                                                               "adapters("),
            ("text_generation_server/models/__init__.py", "get_model", "return FlashCausalLM("),
            (TG_FCL, "__init__", "model = model_class(prefix, config, weights)"),
            ("text_generation_server/models/custom_modeling/flash_llama_modeling.py", "__init__",
             "self.model = FlashLlamaModel(prefix, config, weights)"),
            ("text_generation_server/layers/linear.py" if ctx.chance(0.5) else
             "text_generation_server/utils/weights.py", "get_sharded" if ctx.chance(0.5) else
             "get_tensor", "tensor = tensor.to(device=self.device)")]


def tg_shard_fail(ctx: Ctx, lines: list[str], keys: tuple[str, ...], rank: int = 0) -> None:
    tg(ctx, "ERROR", "shard-manager: text_generation_launcher",
       f"Shard complete standard error output:\n\n{lines[0]}".split("\n")[0])
    ctx.evs[-1].tag = "tbhead"
    for ln in ["", *lines]:
        ctx.app(ln, any(k in ln for k in keys), "blank" if not ln else "")
    ctx.app(f" rank={rank}")
    tg(ctx, "ERROR", "text_generation_launcher", f"Shard {rank} failed to start")
    tg_shutdown_failed(ctx, "ShardCannotStart")


def tg_weights(ctx: Ctx) -> None:
    sd_start(ctx)
    tg_startup(ctx, "load")
    exc = oom_exc_lines(ctx, oom_nums(ctx))
    tg_shard_fail(ctx, tb(ctx, tg_load_frames(ctx), exc), ("get_model", "model_class",
                                                          "get_sharded", "get_tensor", exc[0]))


def tg_runtime(ctx: Ctx) -> None:
    sd_start(ctx)
    tg_startup(ctx, "connected")
    tg_ready(ctx, key=True)
    tg_serve(ctx, ctx.rng.randrange(3, 25))
    ctx.adv(10, 5000)
    exc = oom_exc_lines(ctx, oom_nums(ctx))
    tg_shard_tb(ctx, ctx.rng.choice(("Decode", "Prefill")), [
        ("text_generation_server/server.py", "Decode", "generations, next_batch, timings = "
                                                       "self.model.generate_token(batch)"),
        (TG_FCL, "generate_token", "out, speculative_logits = self.forward(batch, adapter_data)"),
        (TG_FCL, "forward", "logits, speculative_logits = self.model.forward(")], exc,
        ("generate_token", exc[0]))
    tg(ctx, "ERROR", "batch{batch_size=8}:decode:decode{size=8}:decode{size=8}: "
                     "text_generation_router_v3::client",
       f"backends/client/src/lib.rs:{ctx.lineno('srverr')}: Server error: "
       f"{exc[0].split(': ', 1)[-1][:200]}", key=True)
    ctx.adv(0.1, 5)
    tg(ctx, "ERROR", "shard-manager: text_generation_launcher",
       f"Shard process was signaled to shutdown with signal 9 rank={ctx.rng.randrange(ctx.tp)}")
    tg(ctx, "ERROR", "text_generation_launcher", "Shard 0 crashed")
    tg_shutdown_failed(ctx, "ShardFailed")


def tg_nccl(ctx: Ctx) -> None:
    if ctx.tp < 2:
        ctx.tp = 2
        new_pids(ctx)
    sd_start(ctx)
    tg_startup(ctx, "load")
    short, detail = nccl_error_text(ctx)
    exc = dist_backend_lines(ctx, short, detail)
    frames = [("text_generation_server/cli.py", "serve", "server.serve("),
              ("text_generation_server/server.py", "serve_inner",
               "model = get_model_with_lora_adapters("),
              (TG_FCL, "__init__", "self.process_group, rank, world_size = "
                                   "initialize_torch_distributed()"),
              ("text_generation_server/utils/dist.py", "initialize_torch_distributed",
               "torch.distributed.barrier(group=process_group)"),
              ("torch/distributed/distributed_c10d.py", "barrier",
               "work = group.barrier(opts=opts)")]
    tg_shard_fail(ctx, tb(ctx, frames, exc), ("NCCL", "nccl", "DistBackendError"),
                  rank=ctx.rng.randrange(ctx.tp))


def tg_held(ctx: Ctx) -> None:
    leftovers = previous_run_leftovers(ctx)
    tg_startup(ctx, "load")
    others = tuple((p.pid, gib(ctx.gpu.gib * ctx.rng.uniform(0.55, 0.9))) for p in leftovers[:1])
    exc = [f"{oom_class(ctx)}: {oom_message(ctx, oom_nums(ctx, others=others))}"]
    tg_shard_fail(ctx, tb(ctx, tg_load_frames(ctx), exc), ("memory in use", exc[0]))


def tg_hw(ctx: Ctx) -> None:
    sd_start(ctx)
    tg_startup(ctx, "connected")
    tg_ready(ctx)
    tg_serve(ctx, ctx.rng.randrange(2, 15))
    ctx.adv(10, 5000)
    xid = ctx.rng.choice((79, 79, 48, 94, 95, 119))
    hw_kernel(ctx, xid, 0, ctx.ec)
    exc = hw_app_error(ctx, xid)
    ctx.needs_kern = "ECC" not in exc[0]
    tg_shard_tb(ctx, "Decode", [("text_generation_server/server.py", "Decode",
                                 "generations, next_batch, timings = "
                                 "self.model.generate_token(batch)")], exc, ("ECC", exc[0]))
    tg(ctx, "ERROR", "text_generation_launcher", "Shard 0 crashed")
    tg_shutdown_failed(ctx, "ShardFailed")


def tg_healthy(ctx: Ctx) -> None:
    rng = ctx.rng
    kind = rng.choice(("ready", "serve", "stop", "busy"))
    if kind == "busy":
        ctx.t += rng.uniform(600, 80000)
        tg_serve(ctx, rng.randrange(30, 90))
        return
    sd_start(ctx)
    tg_startup(ctx, "serve")
    tg_serve(ctx, rng.randrange(0, 6) if kind == "ready" else rng.randrange(6, 40))
    if kind == "stop":
        ctx.adv(60, 80000)
        ctx.sys(f"Stopping {ctx.status}...")
        tg(ctx, "INFO", "text_generation_launcher", "Terminating webserver")
        tg(ctx, "INFO", "text_generation_launcher", "Waiting for webserver to gracefully shutdown")
        tg(ctx, "INFO", "text_generation_router::server",
           f"router/src/server.rs:{ctx.lineno('sig')}: signal received, starting graceful shutdown")
        tg(ctx, "INFO", "text_generation_launcher", "webserver terminated")
        tg(ctx, "INFO", "text_generation_launcher", "Shutting down shards")
        for r in range(ctx.tp):
            tg(ctx, "INFO", "shard-manager: text_generation_launcher",
               f"Terminating shard rank={r}")
            tg(ctx, "INFO", "shard-manager: text_generation_launcher", f"shard terminated rank={r}")
        sd_clean_exit(ctx)
        ctx.sys(f"Stopped {ctx.status}.")


def tg_wedged(ctx: Ctx) -> None:
    sd_start(ctx)
    tg_startup(ctx, "serve")
    tg_serve(ctx, ctx.rng.randrange(0, 20))
    ctx.adv(60, 50000)
    ctx.sys(f"Stopping {ctx.status}...", key=True)
    if ctx.chance(0.6):
        tg(ctx, "INFO", "text_generation_launcher", "Terminating webserver")
        tg(ctx, "INFO", "text_generation_launcher", "Waiting for webserver to gracefully shutdown")
    ctx.needs_sys = True
    wedged_stop_tail(ctx, ctx.rng.choice((90, 90, 45, 120)))


def tg_other(ctx: Ctx) -> None:
    rng = ctx.rng
    if ctx.chance(0.25):
        sd_start(ctx)
        tg_startup(ctx, "download")
        m = ctx.model.name
        tg(ctx, "ERROR", "download: text_generation_launcher", "Download encountered an error:")
        ctx.evs[-1].tag = "tbhead"
        for ln in tb(ctx, [("text_generation_server/cli.py", "download_weights",
                            "utils.weight_files(model_id, revision, extension)"),
                           ("huggingface_hub/utils/_http.py", "hf_raise_for_status",
                            "raise _format(GatedRepoError, message, response) from e")],
                     [f"huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: "
                      f"Root=1-{hexs(rng, 8)}-{hexs(rng, 24)})", "",
                      f"Cannot access gated repo for url https://huggingface.co/api/models/{m}.",
                      f"Access to model {m} is restricted. You must have access to it and be "
                      "authenticated to access it. Please log in."]):
            ctx.app(ln, "401" in ln or "gated" in ln)
        ctx.app("Error: DownloadError", key=True)
        sd_fail(ctx)
        return
    ctx.rng.choice((other_argparse, other_exec, other_segv, other_host_oom, other_import))(ctx)


def engine_serve_generic(ctx: Ctx) -> None:
    if ctx.engine == "sglang":
        sg_startup(ctx, "serve")
        sg_serve(ctx, ctx.rng.randrange(2, 10))
    elif ctx.engine == "tgi":
        tg_startup(ctx, "serve")
        tg_serve(ctx, ctx.rng.randrange(2, 10))
    else:
        vllm_startup(ctx, "ready")
        vllm_ready(ctx)
        vllm_serve(ctx, ctx.rng.randrange(2, 10))


# --------------------------------------------------------------------------- context setup


def pick_engine(rng: random.Random, label: str) -> str:
    if label == "sampler_warmup_oom":
        return "vllm"
    weights = {"cuda_graph_oom": (85, 15, 0), "gpu_memory_held": (76, 12, 12),
               "healthy": (68, 18, 14)}.get(label, (70, 17, 13))
    return rng.choices(("vllm", "sglang", "tgi"), weights=weights)[0]


def pick_hardware(rng: random.Random, models: tuple[Model, ...]) -> tuple[Model, Gpu, int]:
    while True:
        model, gpu = rng.choice(models), rng.choice(GPUS)
        tp = 1
        while model.gib / tp > gpu.gib * 0.78 and tp < 8:
            tp *= 2
        if model.gib / tp <= gpu.gib * 0.78:
            if tp == 1 and rng.random() < 0.15 and gpu.gib < 100:
                tp = 2
            return model, gpu, tp


def new_ctx(rng: random.Random, label: str) -> Ctx:
    engine = pick_engine(rng, label)
    group: VGroup | None = None
    if engine == "vllm":
        groups = [g for g in VGROUPS if label != "sampler_warmup_oom" or g.rank >= 8]
        group = rng.choice(groups)
        version = rng.choice(group.versions)
        torch = rng.choice(group.torch)
        year = group.year
    elif engine == "sglang":
        major = rng.choice(("0.4", "0.5", "0.5"))
        version = rng.choice(SGLANG_VERSIONS[major])
        torch = "2.5.1" if major == "0.4" else rng.choice(("2.8.0", "2.9.1"))
        year = 2024 if major == "0.4" else rng.choice((2025, 2026))
    else:
        version = rng.choice(TGI_VERSIONS)
        torch = {"1": "2.1.2", "2": rng.choice(("2.3.0", "2.4.0"))}.get(version[0], "2.6.0")
        year = 2024 if version < "3" else 2025
    model, gpu, tp = pick_hardware(rng, MODELS)
    site = rng.choice(SITES)
    py = re.search(r"python(3\.\d+)", site)
    unit_base = {"vllm": rng.choice(UNITS), "sglang": rng.choice(("sglang", "sglang-server",
                                                                  "llm-inference", "sgl-qwen")),
                 "tgi": rng.choice(("tgi", "text-generation-inference", "tgi-llama",
                                    "llm-inference"))}[engine]
    desc = {"vllm": rng.choice(("vLLM OpenAI server", "vLLM Inference Server",
                                f"vLLM {model.name.split('/')[-1]}", "LLM inference API",
                                "OpenAI-compatible model server")),
            "sglang": rng.choice(("SGLang server", "SGLang inference runtime",
                                  "LLM inference (SGLang)")),
            "tgi": rng.choice(("Text Generation Inference", "Hugging Face TGI",
                               "LLM inference (TGI)"))}[engine]
    ident = {"vllm": rng.choice(("vllm", "vllm", "python3", "python", "docker")),
             "sglang": rng.choice(("python3", "python", "sglang", "docker")),
             "tgi": rng.choice(("text-generation-launcher", "text-generation-launcher",
                                "docker"))}[engine]
    sysd = rng.choice((245, 247, 249, 252, 252, 252, 255, 257, 257))
    start = datetime(year, rng.randrange(1, 13), rng.randrange(1, 29), rng.randrange(0, 24),
                     rng.randrange(0, 60), rng.randrange(0, 60), tzinfo=UTC)
    reword = rng.random() < (0.27 if label != "healthy" else 0.08)
    ctx = Ctx(rng=rng, label=label, engine=engine, version=version, group=group, model=model,
              gpu=gpu, tp=tp, host=rng.choice(HOSTS), unit=f"{unit_base}.service", desc=desc,
              ident=ident, start=start, site=site, py=py.group(1) if py else "3.12", torch=torch,
              sysd=sysd, status_fmt="description" if sysd <= 247 else
              rng.choice(("combined", "combined", "combined", "description", "name")),
              reword=reword, keep_ansi=rng.random() < 0.55)
    v1 = bool(group and group.v1)
    if group and group.rank in (8, 9) and label != "sampler_warmup_oom" and rng.random() < 0.12:
        ctx.v0 = True
        v1 = False
    base = rng.randrange(900, 3_900_000)
    ctx.api = Proc("api", base)
    ctx.ec = Proc("ec" if (v1 or engine != "vllm") else "engine", base + rng.randrange(40, 200))
    w0 = ctx.ec.pid + rng.randrange(20, 90)
    ctx.workers = [Proc("worker", w0 + r, r) for r in range(tp)]
    ctx.util = rng.choice((0.9, 0.9, 0.9, 0.85, 0.95, 0.8, 0.97, 0.92, 0.88))
    ctx.max_len = rng.choice((model.ctx, 8192, 16384, 32768, 4096, model.ctx))
    ctx.max_len = min(ctx.max_len, model.ctx)
    big = gpu.gib >= 70 and "A100" not in gpu.name and v1
    ctx.max_seqs = 1024 if big else 256
    ctx.batched = 8192 if big or not v1 else 2048
    ctx.enforce_eager = rng.random() < 0.12 and label != "cuda_graph_oom"
    ctx.port = {"vllm": rng.choice((8000, 8000, 8000, 8080, 9000)),
                "sglang": rng.choice((30000, 30000, 8000)),
                "tgi": rng.choice((80, 3000, 8080))}[engine]
    if engine == "sglang":
        ctx.util = rng.choice((0.88, 0.85, 0.9, 0.8, 0.75, 0.7))
        if rng.random() < 0.5:
            ctx.flags.add("ms")
        if rng.random() < 0.4:
            ctx.flags.add("uvts")
    if engine == "tgi":
        ctx.util = rng.choice((1.0, 1.0, 0.9, 0.95))
    ctx.kbase = rng.uniform(1e4, 5e6)
    ctx.cpu_s = rng.uniform(15, 4000)
    return ctx


def prior_healthy_run(ctx: Ctx) -> None:
    """An earlier run of the unit that started, served and stopped cleanly."""
    rng = ctx.rng
    sd_start(ctx)
    engine_serve_generic(ctx)
    ctx.adv(60, 200000)
    ctx.sys(f"Stopping {ctx.status}...")
    if ctx.engine == "vllm":
        vllm_http_shutdown(ctx)
    sd_clean_exit(ctx)
    ctx.sys(f"Stopped {ctx.status}.")
    ctx.adv(5, 90000)
    new_pids(ctx)
    if rng.random() < 0.3:
        ctx.evs = ctx.evs[rng.randrange(0, max(1, len(ctx.evs) // 2)):]


def vllm_oom_wrapped(body: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
    def run(ctx: Ctx) -> None:
        sd_start(ctx)
        body(ctx)
    return run


BUILDERS: dict[tuple[str, str], Callable[[Ctx], None]] = {
    ("sampler_warmup_oom", "vllm"): vllm_oom_wrapped(vllm_sampler_oom),
    ("kv_cache_oom", "vllm"): vllm_oom_wrapped(vllm_kv_oom),
    ("kv_cache_oom", "sglang"): sg_kv,
    ("kv_cache_oom", "tgi"): tg_kv,
    ("weights_load_oom", "vllm"): vllm_oom_wrapped(vllm_weights_oom),
    ("weights_load_oom", "sglang"): sg_weights,
    ("weights_load_oom", "tgi"): tg_weights,
    ("cuda_graph_oom", "vllm"): vllm_oom_wrapped(vllm_graph_oom),
    ("cuda_graph_oom", "sglang"): sg_graphs,
    ("runtime_oom", "vllm"): vllm_oom_wrapped(vllm_runtime_oom),
    ("runtime_oom", "sglang"): sg_runtime,
    ("runtime_oom", "tgi"): tg_runtime,
    ("gpu_memory_held", "vllm"): vllm_gpu_held,
    ("gpu_memory_held", "sglang"): sg_held,
    ("gpu_memory_held", "tgi"): tg_held,
    ("wedged_stop", "vllm"): vllm_wedged,
    ("wedged_stop", "sglang"): sg_wedged,
    ("wedged_stop", "tgi"): tg_wedged,
    ("nccl_error", "vllm"): vllm_nccl,
    ("nccl_error", "sglang"): sg_nccl,
    ("nccl_error", "tgi"): tg_nccl,
    ("gpu_hardware_fault", "vllm"): vllm_hw_fault,
    ("gpu_hardware_fault", "sglang"): sg_hw,
    ("gpu_hardware_fault", "tgi"): tg_hw,
    ("other_crash", "vllm"): vllm_other,
    ("other_crash", "sglang"): sg_other,
    ("other_crash", "tgi"): tg_other,
    ("healthy", "vllm"): vllm_healthy,
    ("healthy", "sglang"): sg_healthy,
    ("healthy", "tgi"): tg_healthy,
}


# --------------------------------------------------------------------------- perturbations


def drop_tb_head(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    """Lose the first line of one traceback (its ``Traceback …``/``… failed to start`` line)."""
    heads = [i for i, e in enumerate(evs) if e.tag == "tbhead" and not e.key]
    if not heads:
        return evs
    i = ctx.rng.choice(heads)
    return evs[:i] + evs[i + 1:]


def drop_lines(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    p = ctx.rng.uniform(0.10, 0.30)
    return [e for e in evs if e.key or ctx.rng.random() >= p]


def swap_neighbours(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    """stdout/stderr are two journald streams: small inversions happen."""
    evs = evs[:]
    for _ in range(ctx.rng.randrange(1, 4)):
        if len(evs) < 3:
            break
        i = ctx.rng.randrange(len(evs) - 1)
        if evs[i].src == evs[i + 1].src == "app":
            evs[i], evs[i + 1] = evs[i + 1], evs[i]
    return evs


def suppressed(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    """A journald rate-limit gap inside a burst of app lines."""
    apps = [i for i, e in enumerate(evs) if e.src == "app" and not e.key]
    if len(apps) < 6:
        return evs
    i = ctx.rng.choice(apps[2:-2])
    j = min(i + ctx.rng.randrange(2, 6), len(evs))
    if any(e.key for e in evs[i:j]):
        return evs
    gap = Ev("journald", f"Suppressed {ctx.rng.randrange(200, 40000)} messages from {ctx.unit}",
             evs[i].t, pid=ctx.rng.randrange(300, 900), ident="systemd-journald")
    return [*evs[:i], gap, *evs[j:]]


PROC_TAG = re.compile(r"\((?:VllmWorkerProcess|VllmWorker[^)]*|Worker_[^)]*|EngineCore[^)]*|"
                      r"APIServer) pid=(\d+)\)|^\[[\d\-: .]+ (TP\d+)\]")


def proc_of(e: Ev) -> str | None:
    if e.src != "app":
        return None
    m = PROC_TAG.search(e.text[:80])
    return (m.group(1) or m.group(2)) if m else None


def interleave_processes(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    """Concurrent processes' lines written within the same moment arrive interleaved."""
    out: list[Ev] = []
    i = 0
    while i < len(evs):
        j = i
        while (j < len(evs) and proc_of(evs[j]) is not None
               and int(evs[j].t) == int(evs[i].t)):
            j += 1
        block = evs[i:j]
        if len(block) > 2 and len({proc_of(e) for e in block}) > 1:
            groups: dict[str, list[Ev]] = {}
            for e in block:
                groups.setdefault(proc_of(e) or "", []).append(e)
            times = sorted(e.t for e in block)
            seqs = [[(Proc("x", 0), str(k)) for k in range(len(g))] for g in groups.values()]
            order = merge(ctx.rng, [[(Proc("x", n), str(k)) for _, k in seq]
                                    for n, seq in enumerate(seqs)])
            lists = list(groups.values())
            mixed = [lists[p.pid][int(k)] for p, k in order]
            for t, e in zip(times, mixed, strict=True):
                e.t = t
            out += mixed
            i = j
        else:
            out.append(evs[i])
            i += 1
    return out


def perturb(ctx: Ctx, evs: list[Ev], journal: bool,
            window: bool = False) -> tuple[list[Ev], list[str]]:
    """Perturb the event list; ``window`` (systemctl status) shows the last lines itself."""
    done: list[str] = []
    rng = ctx.rng
    if rng.random() < 0.75:
        evs = interleave_processes(ctx, [Ev(e.src, e.text, e.t, e.key, e.tag, e.pid, e.ident)
                                         for e in evs])
    if rng.random() < 0.2 and any(e.tag == "tbhead" for e in evs):
        evs = drop_tb_head(ctx, evs)
        done.append("tb_head_removed")
    if rng.random() < 0.3:
        evs = drop_lines(ctx, evs)
        done.append("dropped_lines")
    if rng.random() < 0.1:
        evs = swap_neighbours(ctx, evs)
        done.append("stream_reorder")
    if journal and rng.random() < 0.04:
        evs = suppressed(ctx, evs)
        done.append("journald_suppressed")
    keys = [i for i, e in enumerate(evs) if e.key]
    if not keys and len(evs) > 30 and rng.random() < 0.35:
        evs = evs[rng.randrange(0, len(evs) // 2):]
        done.append("head_truncated")
    if keys and rng.random() < 0.35:
        cut = rng.randrange(0, keys[0] + 1)
        evs = evs[cut:]
        done.append("head_truncated")
        keys = [i - cut for i in keys]
    if keys and not window and rng.random() < 0.3 and keys[-1] < len(evs) - 1:
        evs = evs[:rng.randrange(keys[-1] + 1, len(evs))]
        done.append("tail_cut")
    return evs, done


# --------------------------------------------------------------------------- shapes


SHAPES = ("journalctl-short", "journalctl-short-iso", "journalctl-short-precise", "raw",
          "docker", "kubectl", "compose", "systemctl-status")
SHAPE_WEIGHTS = (36, 6, 6, 20, 10, 6, 4, 12)
JOURNAL_SHAPES = SHAPES[:3]


def pick_shape(ctx: Ctx) -> str:
    allowed = []
    has_app = any(e.src == "app" for e in ctx.evs)
    has_kern = any(e.src == "kern" for e in ctx.evs)
    key_in_app = any(e.key and e.src == "app" for e in ctx.evs)
    for s, w in zip(SHAPES, SHAPE_WEIGHTS, strict=True):
        plain = s not in JOURNAL_SHAPES and s != "systemctl-status"
        weak = not key_in_app and not has_kern and ctx.label != "healthy"
        if plain and (ctx.needs_sys or not has_app or weak):
            continue
        if s == "systemctl-status" and (ctx.needs_kern or (has_kern and not key_in_app
                                                           and not ctx.needs_sys)):
            continue
        if plain and ctx.engine != "vllm" and s == "compose" and ctx.rng.random() < 0.5:
            continue
        allowed.append((s, w))
    return ctx.rng.choices([s for s, _ in allowed], weights=[w for _, w in allowed])[0]


@dataclass
class Out:
    text: str
    key: bool


def jtime(ctx: Ctx, t: float, style: str) -> str:
    d = ctx.start + timedelta(seconds=t)
    if style == "journalctl-short-iso":
        tz = "+00:00" if ctx.sysd >= 257 else "+0000"
        return d.strftime("%Y-%m-%dT%H:%M:%S") + tz
    base = f"{MONTHS[d.month - 1]} {d.day:02d} {d:%H:%M:%S}"
    if style == "journalctl-short-precise":
        return f"{base}.{d.microsecond:06d}"
    return base


def app_text(ctx: Ctx, e: Ev, journal: bool, blob: bool) -> str | None:
    text = e.text.replace("\r", "")
    if journal and not text.strip():
        return None  # journald drops lines that are empty after stripping
    if journal and e.tag == "tqdm" and blob:
        return f"[{len(e.text.encode()) + 1}B blob data]"
    if not ctx.keep_ansi:
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return text


def render_journal(ctx: Ctx, evs: list[Ev], style: str, kern_inline: bool) -> list[Out]:
    out: list[Out] = []
    blob = ctx.rng.random() < 0.4
    kern_block: list[Ev] = []
    for e in evs:
        if e.src == "kern" and not kern_inline:
            kern_block.append(e)
            continue
        if e.src == "app":
            text = app_text(ctx, e, True, blob)
            if text is None:
                continue
            who = f"{e.ident}[{e.pid}]"
        elif e.src == "kern":
            text, who = e.text, "kernel"
        elif e.ident == "systemd" and e.src == "sys":
            text, who = e.text, "systemd[1]"
        else:
            text, who = e.text, f"{e.ident}[{e.pid}]"
        head = f"{jtime(ctx, e.t, style)} {ctx.host} {who}: "
        parts = text.split("\n")
        out.append(Out(head + parts[0], e.key))
        out += [Out(" " * len(head) + p, e.key) for p in parts[1:]]
    if kern_block:
        if ctx.rng.random() < 0.5:
            out.append(Out(ctx.rng.choice(("---", "", "$ journalctl -k --since today",
                                           "kernel log:")), False))
        for e in kern_block:
            out.append(Out(f"{jtime(ctx, e.t, style)} {ctx.host} kernel: {e.text}", e.key))
    return out


def dmesg_block(ctx: Ctx, evs: list[Ev]) -> list[Out]:
    kern = [e for e in evs if e.src == "kern"]
    if not kern:
        return []
    rng = ctx.rng
    out = []
    head = rng.choice(("", "$ sudo dmesg -T | tail -n 30", "dmesg:", "$ dmesg | grep -i nvrm",
                       "--- dmesg ---", "$ journalctl -k -n 20"))
    if head:
        out.append(Out(head, False))
    human = rng.random() < 0.5
    for e in kern:
        if human:
            d = ctx.start + timedelta(seconds=e.t)
            pre = f"[{DAYS[d.weekday()]} {MONTHS[d.month - 1]} {d.day:2d} {d:%H:%M:%S} {d.year}]"
        else:
            pre = f"[{ctx.kbase + e.t:12.6f}]"
        out.append(Out(f"{pre} {e.text}", e.key))
    return out


def render_plain(ctx: Ctx, evs: list[Ev], shape: str) -> list[Out]:
    rng = ctx.rng
    pod = f"{ctx.unit.split('.')[0].replace('@', '-')}-{hexs(rng, 9)}-{hexs(rng, 5)}"
    svc = ctx.engine if ctx.engine != "tgi" else "tgi"
    kube_ts = rng.random() < 0.6
    kube_prefix = rng.random() < 0.4
    out: list[Out] = []
    for e in evs:
        if e.src != "app":
            continue
        text = app_text(ctx, e, False, False)
        if text is None:
            continue
        d = ctx.start + timedelta(seconds=e.t)
        nano = f"{d:%Y-%m-%dT%H:%M:%S}.{d.microsecond:06d}{rng.randrange(1000):03d}Z"
        if shape == "docker":
            text = f"{nano} {text}"
        elif shape == "kubectl":
            text = (f"{nano} " if kube_ts else "") + text
            if kube_prefix:
                text = f"[pod/{pod}/{svc}] {text}"
        elif shape == "compose":
            text = f"{svc}-1  | {text}"
        out.append(Out(text.rstrip() if shape != "raw" else text, e.key))
    if any(e.src == "kern" for e in evs) and (ctx.needs_kern or rng.random() < 0.6):
        out += dmesg_block(ctx, evs)
    return out


def unit_state(ctx: Ctx, evs: list[Ev]) -> tuple[str, str, float]:
    """(Active: text, Main PID: text, since-time) from the last systemd lines shown."""
    state, main, since = "active (running)", f"{ctx.api.pid} ({comm(ctx, ctx.api)})", 0.0
    exit_part = ""
    for e in evs:
        if e.src != "sys":
            continue
        m = re.search(r"Main process exited, code=(\w+), status=(\S+)", e.text)
        if m:
            exit_part = f"code={m.group(1)}, status={m.group(2)}"
        if e.text.startswith("Started "):
            state, since, exit_part = "active (running)", e.t, ""
            main = f"{e.pid if e.pid != 1 else ctx.api.pid} ({comm(ctx, ctx.api)})"
        elif e.text.startswith("Stopping "):
            state, since = "deactivating (stop-sigterm)", e.t
        elif "Failed with result" in e.text:
            res = e.text.split("'")[1]
            state, since = f"failed (Result: {res})", e.t
        elif "Scheduled restart job" in e.text:
            state, since = "activating (auto-restart) (Result: exit-code)", e.t
        elif e.text.endswith(("Deactivated successfully.", "Succeeded.")):
            state, since = "inactive (dead)", e.t
    if exit_part and not state.startswith("active"):
        main = f"{ctx.api.pid} ({exit_part})"
    return state, main, since


def render_status(ctx: Ctx, evs: list[Ev], now_extra: float,
                  state_evs: list[Ev]) -> list[Out]:
    rng = ctx.rng
    state, main, since = unit_state(ctx, state_evs)
    d = ctx.start + timedelta(seconds=since)
    preset = "preset" if ctx.sysd >= 252 else "vendor preset"
    out = [Out(f"{'●' if not state.startswith('failed') else '×'} {ctx.unit} - {ctx.desc}",
               False),
           Out(f"     Loaded: loaded (/etc/systemd/system/{ctx.unit}; enabled; {preset}: "
               "enabled)", False)]
    if rng.random() < 0.3:
        out += [Out(f"    Drop-In: /etc/systemd/system/{ctx.unit}.d", False),
                Out("             └─override.conf", False)]
    out.append(Out(f"     Active: {state} since {DAYS[d.weekday()]} {d:%Y-%m-%d %H:%M:%S} UTC; "
                   f"{ago(now_extra)}", state.startswith("deactivating")))
    running = state.startswith(("active", "deactivating"))
    if running:
        out.append(Out(f"   Main PID: {ctx.api.pid} ({comm(ctx, ctx.api)})", False))
        limit = rng.randrange(10**5, 10**6)
        out.append(Out(f"      Tasks: {rng.randrange(40, 900)} (limit: {limit})", False))
        out.append(Out(f"     Memory: {rng.uniform(2, 90):.1f}G", False))
        out.append(Out(f"        CPU: {timespan(ctx.cpu_s)}", False))
        out.append(Out(f"     CGroup: /system.slice/{ctx.unit}", False))
        procs = all_procs(ctx)
        for i, p in enumerate(procs):
            branch = "└─" if i == len(procs) - 1 else "├─"
            cmd = {"vllm": f"/opt/venv/bin/python3 /opt/venv/bin/vllm serve {ctx.model.name}",
                   "sglang": f"/opt/venv/bin/python3 -m sglang.launch_server --model-path "
                             f"{ctx.model.name} --tp {ctx.tp}",
                   "tgi": f"/usr/local/bin/text-generation-launcher --model-id "
                          f"{ctx.model.name}"}[ctx.engine] if p.role == "api" else comm(ctx, p)
            out.append(Out(f"             {branch}{p.pid} {cmd}", False))
    else:
        if ctx.sysd >= 252 and rng.random() < 0.5:
            dur = max(since - ctx.run_start, 1.0)
            out.append(Out(f"   Duration: {timespan(dur)}", False))
        out.append(Out(f"   Main PID: {main}", False))
        out.append(Out(f"        CPU: {timespan(ctx.cpu_s)}", False))
    out.append(Out("", False))
    body = render_journal(ctx, [e for e in evs if e.src != "kern"], "journalctl-short", True)
    n = rng.choice((10, 10, 20, 30, 50))
    keys = [i for i, o in enumerate(body) if o.key]
    if keys:
        n = max(n, len(body) - keys[0])
    body = body[-n:]
    if rng.random() < 0.25:
        width = rng.randrange(200, 260)
        body = [Out(o.text[:width - 1] + "…" if len(o.text) > width else o.text, o.key)
                for o in body]
    return out + body


def assemble(ctx: Ctx, shape: str) -> tuple[list[str], list[str]]:
    rng = ctx.rng
    journal = shape in JOURNAL_SHAPES
    evs = ctx.evs
    now_extra = rng.uniform(2, 7200)
    if shape == "systemctl-status" and ctx.label == "wedged_stop" and rng.random() < 0.5:
        cut = next((i for i, e in enumerate(evs) if "timed out" in e.text and e.src == "sys"),
                   None)
        stop = next((i for i, e in enumerate(evs) if e.text.startswith("Stopping ")), None)
        if cut is not None and stop is not None:
            evs = evs[:cut]
            now_extra = rng.uniform(60, 900)
    if shape == "systemctl-status":
        evs = [e for e in evs if e.src != "kern"]
    state_evs = evs
    evs, done = perturb(ctx, evs, journal or shape == "systemctl-status",
                        window=shape == "systemctl-status")
    if shape == "systemctl-status":
        out = render_status(ctx, evs, now_extra, state_evs)
    elif journal:
        inline = rng.random() < 0.7
        if inline and rng.random() < 0.25:
            evs = add_host_noise(ctx, evs)
            done.append("other_units_noise")
        out = render_journal(ctx, evs, shape, inline)
        if rng.random() < 0.06 and ctx.sysd <= 249 and "head_truncated" not in done:
            d = ctx.start - timedelta(days=rng.randrange(1, 40))
            word = "Logs begin at" if ctx.sysd <= 247 else "Journal begins at"
            out.insert(0, Out(f"-- {word} {DAYS[d.weekday()]} {d:%Y-%m-%d %H:%M:%S} UTC. --",
                              False))
    else:
        out = render_plain(ctx, evs, shape)
    if rng.random() < 0.08:
        cmd = {"systemctl-status": f"$ systemctl status {ctx.unit.removesuffix('.service')}",
               "docker": "$ docker logs --timestamps --tail 200 llm", "raw": "$ tail -n 80 "
               "/var/log/llm/server.log", "kubectl": "$ kubectl logs deploy/llm --timestamps",
               "compose": "$ docker compose logs --tail 100"}.get(
            shape, f"$ journalctl -u {ctx.unit} --no-pager -n 100")
        out.insert(0, Out(cmd, False))
        done.append("shell_prompt")
    out = fit_length(ctx, out)
    return [o.text for o in out], done


def fit_length(ctx: Ctx, out: list[Out]) -> list[Out]:
    if len(out) <= MAX_LINES:
        return out
    keys = [i for i, o in enumerate(out) if o.key]
    first = keys[0] if keys else len(out) - MAX_LINES
    cut = min(len(out) - MAX_LINES, first)
    out = out[cut:]
    if len(out) > MAX_LINES:
        extra = len(out) - MAX_LINES
        cand = [i for i, o in enumerate(out) if not o.key]
        drop = set(ctx.rng.sample(cand, min(extra, len(cand))))
        out = [o for i, o in enumerate(out) if i not in drop]
    return out[-MAX_LINES:]


NOISE = (
    ("systemd", 1, "Starting Daily apt download activities..."),
    ("systemd", 1, "Started Daily apt download activities."),
    ("CRON", 0, "(root) CMD (command -v debian-sa1 > /dev/null && debian-sa1 1 1)"),
    ("systemd-logind", 812, "New session 42 of user ubuntu."),
    ("sshd", 0, "Accepted publickey for ubuntu from 10.0.0.5 port 52344 ssh2: RSA SHA256:"
                "kM2b0c9q1T3Xr8fYwQe7p5nGJtVh4aLzUo6iD"),
    ("nvidia-persistenced", 1543, "Started Persistence Daemon"),
    ("systemd", 1, "Starting Cleanup of Temporary Directories..."),
    ("dockerd", 1187, 'time="{iso}" level=info msg="ignoring event" container=4f2a9c module=libcont'
                      'ainerd namespace=moby topic=/tasks/delete type="*events.TaskDelete"'),
    ("kernel", 0, "[UFW BLOCK] IN=eth0 OUT= MAC=00:16:3e:5a:7b:9c SRC=185.220.101.4 DST=10.0.3.7 "
                  "LEN=44 PROTO=TCP SPT=49152 DPT=22 WINDOW=1024 RES=0x00 SYN URGP=0"),
    ("systemd", 1, "session-42.scope: Deactivated successfully."),
    ("node_exporter", 1422, 'ts={iso} caller=collector.go:169 level=error msg="collector failed" '
                            'name=nvme err="open /sys/class/nvme: no such file or directory"'),
)


def add_host_noise(ctx: Ctx, evs: list[Ev]) -> list[Ev]:
    if not evs:
        return evs
    evs = evs[:]
    for _ in range(ctx.rng.randrange(1, 5)):
        ident, pid, text = ctx.rng.choice(NOISE)
        i = ctx.rng.randrange(len(evs))
        t = evs[i].t
        iso = (ctx.start + timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        src = "kern" if ident == "kernel" else "other"
        evs.insert(i, Ev(src, text.replace("{iso}", iso), t,
                         pid=pid or ctx.rng.randrange(2000, 99999), ident=ident))
        if ident == "systemd":
            evs[i].src, evs[i].pid = "other", 1
    return evs


# --------------------------------------------------------------------------- corpus


READY_MARKS = ("Application startup complete.", "ready to roll!", "ready to serve requests.",
               ": Connected")


def make_example(label: str, idx: int) -> dict[str, object]:
    lines: list[str] = []
    ctx: Ctx | None = None
    shape = ""
    for attempt in range(12):
        rng = random.Random(f"{SEED}:{label}:{idx}:{attempt}")
        ctx = new_ctx(rng, label)
        if rng.random() < 0.12:
            prior_healthy_run(ctx)
        BUILDERS[(label, ctx.engine)](ctx)
        if label == "healthy":
            for e in ctx.evs:
                if e.src == "sys" and e.text.endswith(("Deactivated successfully.", "Succeeded.")):
                    e.key = True
                if e.src == "app" and e.text.endswith(READY_MARKS):
                    e.key = True
        shape = pick_shape(ctx)
        lines, _ = assemble(ctx, shape)
        if MIN_LINES <= len(lines) <= MAX_LINES:
            break
    assert ctx is not None
    return {"id": f"{label}-{idx:04d}", "label": label, "engine": ctx.engine,
            "version": ctx.version, "shape": shape, "lines": lines}


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Write the learned model's training corpus.")
    parser.add_argument("--out", type=Path, default=OUT, help=f"default: {OUT}")
    out: Path = parser.parse_args().out
    labels = [(lab, PER_FAILURE) for lab in FAILURE_LABELS] + [("healthy", HEALTHY)]
    buf = bytearray()
    for label, n in labels:
        for i in range(n):
            ex = make_example(label, i)
            buf += (json.dumps(ex, ensure_ascii=False) + "\n").encode()
    with out.open("wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0,
                                            compresslevel=9) as gz:
        gz.write(bytes(buf))


if __name__ == "__main__":
    main()
