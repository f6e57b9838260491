"""What examples are drawn from: models, GPUs, hosts, unit names, install sites and the
engines' versions (vLLM version groups with their logger format and torch pins)."""

from __future__ import annotations

from dataclasses import dataclass

CYAN1, CYAN0, RESET = "\x1b[1;36m", "\x1b[0;36m", "\x1b[0;0m"


GIB = 1024**3


MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


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
    Model(
        "meta-llama/Llama-3.1-8B-Instruct",
        "LlamaForCausalLM",
        128256,
        14.99,
        32,
        8,
        128,
        131072,
        "llama",
    ),
    Model(
        "meta-llama/Llama-3.1-70B-Instruct",
        "LlamaForCausalLM",
        128256,
        131.4,
        80,
        8,
        128,
        131072,
        "llama",
    ),
    Model(
        "meta-llama/Llama-3.3-70B-Instruct",
        "LlamaForCausalLM",
        128256,
        131.4,
        80,
        8,
        128,
        131072,
        "llama",
    ),
    Model(
        "meta-llama/Llama-3.2-3B-Instruct",
        "LlamaForCausalLM",
        128256,
        6.0,
        28,
        8,
        128,
        131072,
        "llama",
    ),
    Model("Qwen/Qwen2.5-7B-Instruct", "Qwen2ForCausalLM", 152064, 14.2, 28, 4, 128, 32768, "qwen2"),
    Model(
        "Qwen/Qwen2.5-14B-Instruct", "Qwen2ForCausalLM", 152064, 27.5, 48, 8, 128, 32768, "qwen2"
    ),
    Model(
        "Qwen/Qwen2.5-32B-Instruct", "Qwen2ForCausalLM", 152064, 61.0, 64, 8, 128, 32768, "qwen2"
    ),
    Model(
        "Qwen/Qwen2.5-72B-Instruct", "Qwen2ForCausalLM", 152064, 135.4, 80, 8, 128, 32768, "qwen2"
    ),
    Model(
        "Qwen/Qwen2.5-Coder-32B-Instruct",
        "Qwen2ForCausalLM",
        152064,
        61.0,
        64,
        8,
        128,
        32768,
        "qwen2",
    ),
    Model("Qwen/Qwen3-8B", "Qwen3ForCausalLM", 151936, 15.3, 36, 8, 128, 40960, "qwen3"),
    Model("Qwen/Qwen3-32B", "Qwen3ForCausalLM", 151936, 61.0, 64, 8, 128, 40960, "qwen3"),
    Model(
        "Qwen/Qwen3-30B-A3B",
        "Qwen3MoeForCausalLM",
        151936,
        56.9,
        48,
        4,
        128,
        40960,
        "qwen3_moe",
        True,
    ),
    Model(
        "mistralai/Mistral-7B-Instruct-v0.3",
        "MistralForCausalLM",
        32768,
        13.5,
        32,
        8,
        128,
        32768,
        "llama",
    ),
    Model(
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "MixtralForCausalLM",
        32000,
        87.0,
        32,
        8,
        128,
        32768,
        "mixtral",
        True,
    ),
    Model(
        "mistralai/Mistral-Small-24B-Instruct-2501",
        "MistralForCausalLM",
        131072,
        44.0,
        40,
        8,
        128,
        32768,
        "llama",
    ),
    Model("google/gemma-2-27b-it", "Gemma2ForCausalLM", 256000, 50.7, 46, 16, 128, 8192, "gemma2"),
    Model(
        "google/gemma-3-27b-it",
        "Gemma3ForConditionalGeneration",
        262208,
        51.0,
        62,
        16,
        128,
        131072,
        "gemma3_mm",
    ),
    Model(
        "microsoft/Phi-3-medium-128k-instruct",
        "Phi3ForCausalLM",
        32064,
        26.0,
        40,
        10,
        128,
        131072,
        "phi3",
    ),
    Model("microsoft/phi-4", "Phi3ForCausalLM", 100352, 27.3, 40, 10, 128, 16384, "phi3"),
    Model(
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
        "Qwen2ForCausalLM",
        152064,
        61.0,
        64,
        8,
        128,
        131072,
        "qwen2",
    ),
    Model(
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
        "DeepseekV2ForCausalLM",
        102400,
        29.3,
        27,
        16,
        192,
        32768,
        "deepseek_v2",
        True,
    ),
    Model(
        "ibm-granite/granite-3.1-8b-instruct",
        "GraniteForCausalLM",
        49155,
        15.2,
        40,
        8,
        128,
        131072,
        "granite",
    ),
    Model(
        "openai/gpt-oss-20b", "GptOssForCausalLM", 201088, 12.8, 24, 8, 64, 131072, "gpt_oss", True
    ),
    Model(
        "openai/gpt-oss-120b", "GptOssForCausalLM", 201088, 60.8, 36, 8, 64, 131072, "gpt_oss", True
    ),
    Model(
        "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
        "LlamaForCausalLM",
        128256,
        37.1,
        80,
        8,
        128,
        131072,
        "llama",
    ),
    Model(
        "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8",
        "LlamaForCausalLM",
        128256,
        8.5,
        32,
        8,
        128,
        131072,
        "llama",
    ),
    Model(
        "/models/llama-3.1-8b-instruct",
        "LlamaForCausalLM",
        128256,
        14.99,
        32,
        8,
        128,
        131072,
        "llama",
    ),
    Model(
        "/data/hf/Qwen2.5-14B-Instruct-AWQ",
        "Qwen2ForCausalLM",
        152064,
        9.4,
        48,
        8,
        128,
        32768,
        "qwen2",
    ),
    Model(
        "/mnt/models/mixtral-8x22b-instruct",
        "MixtralForCausalLM",
        32768,
        262.0,
        56,
        8,
        128,
        65536,
        "mixtral",
        True,
    ),
)


EMBED_MODELS = (
    Model("BAAI/bge-m3", "XLMRobertaModel", 250002, 2.1, 24, 16, 64, 8192, "roberta"),
    Model(
        "intfloat/e5-mistral-7b-instruct", "MistralModel", 32000, 13.5, 32, 8, 128, 32768, "llama"
    ),
    Model("Qwen/Qwen3-Embedding-8B", "Qwen3ForCausalLM", 151665, 15.1, 36, 8, 128, 32768, "qwen3"),
)


@dataclass(frozen=True)
class Gpu:
    name: str
    gib: float  # total as torch reports it
    mib: int  # total as nvidia-smi reports it


GPUS = (
    Gpu("NVIDIA A100-SXM4-80GB", 79.15, 81920),
    Gpu("NVIDIA A100-SXM4-40GB", 39.39, 40960),
    Gpu("NVIDIA A100 80GB PCIe", 79.14, 81920),
    Gpu("NVIDIA H100 80GB HBM3", 79.19, 81559),
    Gpu("NVIDIA H100 NVL", 93.02, 95830),
    Gpu("NVIDIA H200", 139.81, 143771),
    Gpu("NVIDIA L40S", 44.39, 46068),
    Gpu("NVIDIA A10G", 22.19, 23028),
    Gpu("NVIDIA L4", 22.05, 23034),
    Gpu("NVIDIA GeForce RTX 4090", 23.64, 24564),
    Gpu("NVIDIA RTX 6000 Ada Generation", 47.50, 49140),
    Gpu("NVIDIA RTX A6000", 47.53, 49140),
    Gpu("NVIDIA B200", 178.36, 183359),
    Gpu("NVIDIA GH200 480GB", 94.50, 97871),
)


HOSTS = (
    "gpu-node-03",
    "gpu01",
    "dgx-a100-2",
    "ip-10-0-12-34",
    "inference-7",
    "h100-sxm-04",
    "worker-gpu-b12",
    "llm-prod-1",
    "gpu-srv-17",
    "ml-box",
    "node-a6000-2",
    "hpc-gpu041",
    "infer-eu-west-3",
    "l40s-03",
    "ws-lab",
    "kube-gpu-pool-8x2k",
    "rtx-server",
    "gpu-h200-1",
)


UNITS = (
    "vllm",
    "vllm-server",
    "llm-inference",
    "vllm-llama70b",
    "vllm-qwen",
    "inference-api",
    "model-server",
    "openai-api",
    "vllm@qwen7b",
    "llm",
)


SITES = (
    "/usr/local/lib/python3.12/dist-packages",
    "/opt/vllm/lib/python3.12/site-packages",
    "/home/ubuntu/.venv/lib/python3.10/site-packages",
    "/opt/conda/lib/python3.11/site-packages",
    "/root/miniconda3/envs/vllm/lib/python3.11/site-packages",
    "/app/.venv/lib/python3.12/site-packages",
    "/srv/llm/venv/lib/python3.12/site-packages",
    "/usr/local/lib/python3.10/dist-packages",
)


PROMPT_WORDS = (
    "memory",
    "summary",
    "report",
    "translate",
    "code",
    "memory leak",
    "recall",
    "KV",
    "cache",
    "invoice",
    "poem",
    "sql",
)


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
    VGroup(
        "0.5", ("0.5.3.post1", "0.5.4", "0.5.5"), "plain", False, CYAN1, ("2.3.1", "2.4.0"), 2024, 5
    ),
    VGroup(
        "0.6",
        ("0.6.1.post2", "0.6.3.post1", "0.6.4.post1", "0.6.6.post1"),
        "plain",
        False,
        CYAN1,
        ("2.4.0", "2.5.1"),
        2024,
        6,
    ),
    VGroup("0.7", ("0.7.2", "0.7.3"), "plain", False, CYAN1, ("2.5.1",), 2025, 7),
    VGroup("0.8.5", ("0.8.5", "0.8.5.post1"), "bracket", True, CYAN1, ("2.6.0",), 2025, 8),
    VGroup("0.9", ("0.9.0.1", "0.9.1", "0.9.2"), "bracket", True, CYAN1, ("2.7.0",), 2025, 9),
    VGroup(
        "0.10",
        ("0.10.0", "0.10.1.1", "0.10.2"),
        "bracket",
        True,
        CYAN1,
        ("2.7.1", "2.8.0"),
        2025,
        10,
    ),
    VGroup("0.11", ("0.11.0", "0.11.1"), "bracket", True, CYAN1, ("2.8.0",), 2025, 11),
    VGroup("0.15", ("0.15.0", "0.15.1"), "bracket", True, CYAN0, ("2.9.1",), 2026, 15),
    VGroup("0.20", ("0.20.0", "0.20.1"), "bracket", True, "", ("2.11.0",), 2026, 20),
    VGroup("0.25", ("0.25.0",), "bracket", True, "", ("2.11.0",), 2026, 25),
    VGroup("0.33", ("0.33.0",), "inner", True, "", ("2.14.0",), 2026, 33),
)


SGLANG_VERSIONS = {
    "0.4": ("0.4.1", "0.4.1.post4", "0.4.3.post2"),
    "0.5": ("0.5.2", "0.5.4.post1", "0.5.9", "0.5.23"),
}


TGI_VERSIONS = ("1.4.5", "2.0.4", "2.2.0", "2.4.1", "3.0.2", "3.2.3", "3.3.4")
