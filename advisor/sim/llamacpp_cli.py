"""The stand-in llama.cpp server: ``llama-server -m MODEL.gguf [flags]``, as llama.cpp
4227c9be (2025-08-14, the tree llama-cpp-python 0.3.16 vendors) starts, logs, fails and stops
(command written by ``advisor.sim.standin.write_standins``; ``ADVISOR_SIM_*`` as there).

Flags (common/arg.cpp): ``-m``/``--model``, ``-c``/``--ctx-size``, ``-np``/``--parallel``,
``-ngl``/``--gpu-layers``/``--n-gpu-layers``, ``-b``/``--batch-size``, ``-ub``/``--ubatch-size``,
``-fa``/``--flash-attn``, ``--host``, ``--port``; ``_`` reads as ``-`` in ``--`` flags. Their
variables (``LLAMA_ARG_MODEL``, ``LLAMA_ARG_CTX_SIZE``, ``LLAMA_ARG_N_PARALLEL``,
``LLAMA_ARG_N_GPU_LAYERS``, ``LLAMA_ARG_BATCH``, ``LLAMA_ARG_UBATCH``, ``LLAMA_ARG_FLASH_ATTN``,
``LLAMA_ARG_HOST``, ``LLAMA_ARG_PORT``) are applied first and the command line after, with
``warn: X environment variable is set, but will be overwritten by command line argument F``
(``common_params_parse_ex``). Defaults: ctx 4096 (0: the model's), 1 slot, no GPU layers
(``llama_model_default_params``: 0), batch 2048, ubatch 512. Unknown flags are ignored
(llama-server would refuse them).

Lines, all on stderr without prefix (common/log.cpp; LLAMA_LOG_* reach it through
``common_init``): ggml-cuda.cu ``ggml_cuda_init`` (205, 260), common.cpp:364 ``build:``,
tools/server/server.cpp (3817-3820 system info, 5058 ``main: HTTP server is listening…``,
``main: loading model``, 1994 ``srv    load_model: loading model '…'`` — ``srv  %12.*s:``,
2111/2142 slots, ``main: model loaded``, 5107 ``main: server is listening on http://HOST:PORT -
starting the main loop``, 3030 ``srv  update_slots: all slots are idle``), src/llama.cpp:218
``using device``, src/llama-model-loader.cpp (606, 680, 697, 706, 1157-1162), src/llama-model.cpp
(``print_info``, 1906, 5642-5655 ``load_tensors``), src/llama-context.cpp (24, 127-139, 203,
349-362), src/llama-kv-cache-unified.cpp:180/190, common.cpp:1039/1044.

KV failure: ``ggml_backend_cuda_buffer_type_alloc_buffer: allocating X MiB on device 0:
cudaMalloc failed: out of memory`` (ggml-cuda.cu:670), ``alloc_tensor_range: failed to allocate
CUDA0 buffer of size N`` (ggml-alloc.c:939), ``llama_init_from_model: failed to initialize the
context: failed to allocate buffer for kv cache`` (llama-context.cpp:2309, from
llama-kv-cache-unified.cpp:177), ``common_init_from_params: failed to create context with model
'…'`` (common.cpp:928), ``srv    load_model: failed to load model, '…'`` (server.cpp:2004), the
clean-up line and ``main: exiting due to model loading error`` (5066); exit 1. Weights
(``unable to allocate CUDA0 buffer``, llama-model.cpp:5612, llama.cpp:130/225) and compute
buffers (ggml-alloc.c:759, llama-context.cpp:1402/314) fail the same way. SIGTERM once
listening: ``srv    operator(): operator(): cleaning up before exit...`` and exit 0; before the
handler is installed (just before that line), SIGTERM's default action ends it.

Memory (GPU 0 of ADVISOR_SIM_GPUS only; host memory is unlimited): the model is N_LAYER layers
plus the output layer plus the token embeddings, equal parts of the weights (advisor.sim.models'
card at the file name's quantization, or ADVISOR_SIM_WEIGHTS_GIB); ``-ngl`` puts that many
layers (more than N_LAYER: the output layer too) on the GPU. The KV cache holds n_ctx cells
(ceil(ctx / parallel) padded to 32, 256 with -fa, per slot) of the card's KV bytes per token,
on the GPU for the offloaded layers' share; the compute buffer is ubatch × vocab × 4 B + 16
MiB on the GPU. Each fails when it exceeds what is free (0.5 GiB of CUDA context, others'
claims count): with ADVISOR_SIM_WEIGHTS_GIB 8 and -ngl 99 on 96 GiB the KV cache (128 KiB a
token for 8B) fits 4096 to 655360 tokens, and -c 1048576 fails. Stdlib only.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from advisor.sim import standin as si
from advisor.sim.models import GIB, MIB, card_for

__all__ = ["OPTIONS", "LlamaServer", "main", "parse_args"]

N_LAYER: Final = 32
# name → (spellings, variable, default) of the options the stand-in models.
OPTIONS: Final[dict[str, tuple[tuple[str, ...], str, object]]] = {
    "model": (("-m", "--model"), "LLAMA_ARG_MODEL", "models/7B/ggml-model-f16.gguf"),
    "n_ctx": (("-c", "--ctx-size"), "LLAMA_ARG_CTX_SIZE", 4096),
    "n_parallel": (("-np", "--parallel"), "LLAMA_ARG_N_PARALLEL", 1),
    "n_gpu_layers": (("-ngl", "--gpu-layers", "--n-gpu-layers"), "LLAMA_ARG_N_GPU_LAYERS", -1),
    "n_batch": (("-b", "--batch-size"), "LLAMA_ARG_BATCH", 2048),
    "n_ubatch": (("-ub", "--ubatch-size"), "LLAMA_ARG_UBATCH", 512),
    "flash_attn": (("-fa", "--flash-attn"), "LLAMA_ARG_FLASH_ATTN", False),
    "hostname": (("--host",), "LLAMA_ARG_HOST", "127.0.0.1"),
    "port": (("--port",), "LLAMA_ARG_PORT", 8080),
}
SPELLED: Final = {flag: name for name, (flags, _, _) in OPTIONS.items() for flag in flags}
# file-name tag → (llama_model_ftype_name, bits per weight, file_type, main tensor type)
QUANTS: Final = {
    "Q4_K_M": ("Q4_K - Medium", 4.89, 15, "q4_K"),
    "Q4_K_S": ("Q4_K - Small", 4.67, 14, "q4_K"),
    "Q5_K_M": ("Q5_K - Medium", 5.70, 17, "q5_K"),
    "Q6_K": ("Q6_K", 6.56, 18, "q6_K"),
    "Q8_0": ("Q8_0", 8.50, 7, "q8_0"),
    "BF16": ("BF16", 16.0, 32, "bf16"),
    "F16": ("F16", 16.0, 1, "f16"),
}
BUILD: Final = (
    "build: 1 (4227c9b) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu"
)
CLEAN_UP: Final = "srv    operator(): operator(): cleaning up before exit..."


def _set(name: str, raw: str, where: str) -> object:
    default = OPTIONS[name][2]
    if isinstance(default, bool):
        return raw in ("1", "true") if where.startswith("LLAMA_") else True
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f'error while handling argument "{where}": stoi') from None
    return raw


def parse_args(argv: Sequence[str], env: Mapping[str, str]) -> tuple[dict[str, object], list[str]]:
    """The variables first, then the command line (``common_params_parse_ex``): the values and
    the warnings printed for flags that override a variable. ValueError as llama.cpp words it."""
    values = {name: default for name, (_, _, default) in OPTIONS.items()}
    for name, (_, var, _) in OPTIONS.items():
        if env.get(var):
            values[name] = _set(name, env[var], var)
    warnings: list[str] = []
    switches = {f for f in SPELLED if isinstance(OPTIONS[SPELLED[f]][2], bool)}
    pairs, _ = si.flag_pairs(argv, switches)
    for flag, given in pairs:
        spelled = flag.replace("_", "-") if flag.startswith("--") else flag
        dest = SPELLED.get(spelled)
        if dest is None:
            continue
        var = OPTIONS[dest][1]
        if env.get(var):
            warnings.append(
                f"warn: {var} environment variable is set, but will be overwritten by command "
                f"line argument {spelled}"
            )
        if dest != "flash_attn" and not given:
            raise ValueError('error while handling argument "' + spelled + '": expected value')
        values[dest] = _set(dest, given[0] if given else "", spelled)
    return values, warnings


def _quant(path: str) -> tuple[str, float, int, str]:
    stem = Path(path).name.upper()
    return next((q for tag, q in QUANTS.items() if tag in stem), QUANTS["F16"])


class LlamaServer(si.Run):
    """One run: load the model, create the context, then serve until SIGTERM."""

    def __init__(self, values: dict[str, object], sim: si.Settings) -> None:
        super().__init__(sim, sim.devices(1))
        self.v, self.path = values, str(values["model"])
        self.ftype, bpw, self.file_type, self.main_type = _quant(self.path)
        self.card = card_for(Path(self.path).stem, weights_gib=None)
        self.params = self.card.weights_gib * GIB / 2  # the card's weights are 16-bit
        file = self.params * bpw / 8 if sim.weights_gib is None else sim.weights_gib * GIB
        self.file = int(file)
        self.ngl = max(0, int(str(values["n_gpu_layers"])))
        self.on_gpu = min(self.ngl, N_LAYER + 1)  # layers (and the output layer) offloaded
        ctx = int(str(values["n_ctx"])) or self.card.max_model_len
        parallel = max(1, int(str(values["n_parallel"])))
        pad = 256 if values["flash_attn"] else 32
        self.cells = -(-math.ceil(ctx / parallel) // pad) * pad
        self.ctx, self.parallel, self.n_ctx = ctx, parallel, self.cells * parallel
        self.gpu = self.gpus[0]

    def log(self, text: str) -> None:
        self.emit(text, sys.stderr)

    def alloc(self, nbytes: int) -> bool:
        """Claim ``nbytes`` on the GPU, or print ggml-cuda's failure; whether it fitted."""
        if self.fits(self.gpu, nbytes):
            self.claim(self.gpu, nbytes)
            return True
        self.log(
            f"ggml_backend_cuda_buffer_type_alloc_buffer: allocating {nbytes / MIB:.2f} MiB on "
            "device 0: cudaMalloc failed: out of memory"
        )
        return False

    def failed(self, lines: Sequence[str], create: bool = True) -> int:
        """The failure's own lines, then llama-server's way out; 1."""
        what = "create context with" if create else "load"
        for text in (
            *lines,
            f"common_init_from_params: failed to {what} model '{self.path}'",
            f"srv    load_model: failed to load model, '{self.path}'",
            CLEAN_UP,
            "main: exiting due to model loading error",
        ):
            self.log(text)
        return 1

    def run(self) -> int:
        self.watch_signals()
        self.log("ggml_cuda_init: GGML_CUDA_FORCE_MMQ:    no")
        self.log("ggml_cuda_init: GGML_CUDA_FORCE_CUBLAS: no")
        self.log("ggml_cuda_init: found 1 CUDA devices:")
        self.log(f"  Device 0: {si.GPU_NAME}, compute capability 12.0, VMM: yes")
        self.claim(self.gpu, si.CONTEXT_BYTES)
        threads = max(1, (os.cpu_count() or 2) // 2)
        total = os.cpu_count() or 2
        for text in (
            BUILD,
            f"system info: n_threads = {threads}, n_threads_batch = {threads}, "
            f"total_threads = {total}",
            "",
            f"system_info: n_threads = {threads} (n_threads_batch = {threads}) / {total} | CUDA : "
            "ARCHS = 1200 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | CPU : SSE3 = 1 | "
            "SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | "
            "OPENMP = 1 | REPACK = 1 | ",
            "",
            "main: binding port with default address family",
            f"main: HTTP server is listening, hostname: {self.v['hostname']}, port: "
            f"{self.v['port']}, http threads: {max(self.parallel + 2, total - 1)}",
            "main: loading model",
            f"srv    load_model: loading model '{self.path}'",
        ):
            self.log(text)
        self.pause(0.5)
        status = self.load()
        if status is None:
            status = self.context()
        return self.serve() if status is None else status

    def load(self) -> int | None:
        """The GGUF's metadata, then the weights."""
        free = self.free(self.gpu) // MIB
        self.log(
            f"llama_model_load_from_file_impl: using device CUDA0 ({si.GPU_NAME}) - {free} MiB free"
        )
        name, tensors = Path(self.path).stem, 9 * N_LAYER + 3
        kvs = (
            ("general.architecture", "str", "llama"),
            ("general.name", "str", name),
            ("llama.block_count", "u32", N_LAYER),
            ("llama.context_length", "u32", self.card.max_model_len),
            ("general.file_type", "u32", self.file_type),
        )
        self.log(
            f"llama_model_loader: loaded meta data with {len(kvs)} key-value pairs and {tensors} "
            f"tensors from {self.path} (version GGUF V3 (latest))"
        )
        self.log(
            "llama_model_loader: Dumping metadata keys/values. "
            "Note: KV overrides do not apply in this output."
        )
        for i, (key, kind, value) in enumerate(kvs):
            self.log(f"llama_model_loader: - kv {i:3d}: {key:>42s} {kind:<16s} = {value}")
        self.log(f"llama_model_loader: - type {'f32':>4s}: {2 * N_LAYER + 1:4d} tensors")
        self.log(f"llama_model_loader: - type {self.main_type:>4s}: {7 * N_LAYER + 2:4d} tensors")
        bpw = self.file * 8 / self.params
        for text in (
            "file format = GGUF V3 (latest)",
            f"file type   = {self.ftype}",
            f"file size   = {self.file / GIB:.2f} GiB ({bpw:.2f} BPW) ",
            "arch             = llama",
            f"n_ctx_train      = {self.card.max_model_len}",
            f"n_layer          = {N_LAYER}",
            f"model params     = {self.params / 1e9:.2f} B",
            f"general.name     = {name}",
        ):
            self.log(f"print_info: {text}")
        self.log("load_tensors: loading model tensors, this can take a while... (mmap = true)")
        self.log(f"load_tensors: offloading {min(self.ngl, N_LAYER)} repeating layers to GPU")
        if self.ngl > N_LAYER:
            self.log("load_tensors: offloading output layer to GPU")
        self.log(f"load_tensors: offloaded {self.on_gpu}/{N_LAYER + 1} layers to GPU")
        on_gpu = self.file * self.on_gpu // (N_LAYER + 2)
        self.pause(1.0 + on_gpu / GIB / 4)
        if on_gpu and not self.alloc(on_gpu):
            return self.failed(
                [
                    f"alloc_tensor_range: failed to allocate CUDA0 buffer of size {on_gpu}",
                    "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
                    "llama_model_load_from_file_impl: failed to load model",
                ],
                create=False,
            )
        if on_gpu:
            self.log(f"load_tensors: {'CUDA0':>12s} model buffer size = {on_gpu / MIB:8.2f} MiB")
        mapped = (self.file - on_gpu) / MIB
        self.log(f"load_tensors: {'CPU_Mapped':>12s} model buffer size = {mapped:8.2f} MiB")
        self.log("." * 100)
        return None

    def context_params(self) -> None:
        """What ``llama_context`` prints of its parameters."""
        v = self.v
        for text in (
            "constructing llama_context",
            f"n_seq_max     = {self.parallel}",
            f"n_ctx         = {self.ctx}",
            f"n_ctx_per_seq = {self.ctx // self.parallel}",
            f"n_batch       = {min(self.ctx, int(str(v['n_batch'])))}",
            f"n_ubatch      = {v['n_ubatch']}",
            "causal_attn   = 1",
            f"flash_attn    = {int(bool(v['flash_attn']))}",
            "kv_unified    = false",
            "freq_base     = 500000.0",
            "freq_scale    = 1",
        ):
            self.log(f"llama_context: {text}")
        if self.ctx // self.parallel < self.card.max_model_len:
            self.log(
                f"llama_context: n_ctx_per_seq ({self.ctx // self.parallel}) < n_ctx_train "
                f"({self.card.max_model_len}) -- the full capacity of the model will not be "
                "utilized"
            )

    def context(self) -> int | None:
        """llama_context: the KV cache and the compute buffers."""
        v = self.v
        self.context_params()
        out = self.parallel * self.card.vocab_size * 4
        self.log(f"llama_context: {'CUDA_Host':>10s}  output buffer size = {out / MIB:8.2f} MiB")
        kv = self.n_ctx * self.card.kv_bytes_per_token
        kv_gpu = kv * min(self.ngl, N_LAYER) // N_LAYER
        if kv_gpu and not self.alloc(kv_gpu):
            return self.failed(
                [
                    f"alloc_tensor_range: failed to allocate CUDA0 buffer of size {kv_gpu}",
                    "llama_init_from_model: failed to initialize the context: failed to allocate "
                    "buffer for kv cache",
                ]
            )
        for dev, size in (("CUDA0", kv_gpu), ("CPU", kv - kv_gpu)):
            if size:
                self.log(
                    f"llama_kv_cache_unified: {dev:>10s} KV buffer size = {size / MIB:8.2f} MiB"
                )
        half = kv / 2 / MIB
        self.log(
            f"llama_kv_cache_unified: size = {kv / MIB:7.2f} MiB ({self.cells:6d} cells, "
            f"{N_LAYER:3d} layers, {self.parallel:2d}/{self.parallel} seqs), K (f16): {half:7.2f} "
            f"MiB, V (f16): {half:7.2f} MiB"
        )
        compute = int(str(v["n_ubatch"])) * self.card.vocab_size * 4 + 16 * MIB
        if not self.alloc(compute):
            return self.failed(
                [
                    f"ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size {compute}",
                    "graph_reserve: failed to allocate compute buffers",
                    "llama_init_from_model: failed to initialize the context: failed to allocate "
                    "compute pp buffers",
                ]
            )
        self.log(f"llama_context: {'CUDA0':>10s} compute buffer size = {compute / MIB:8.2f} MiB")
        self.log(f"llama_context: {'CUDA_Host':>10s} compute buffer size = {16.01:8.2f} MiB")
        self.log(f"llama_context: graph nodes  = {35 * N_LAYER + 6}")
        self.log(f"llama_context: graph splits = {2 if self.on_gpu else 1}")
        return None

    def serve(self) -> int:
        """Warm-up, slots, the main loop; idle until SIGTERM."""
        self.log(f"common_init_from_params: setting dry_penalty_last_n to ctx_size = {self.n_ctx}")
        self.log(
            "common_init_from_params: warming up the model with an empty run - please wait ... "
            "(--no-warmup to disable)"
        )
        self.pause(0.5)
        self.log(f"srv          init: initializing slots, n_slots = {self.parallel}")
        for slot in range(self.parallel):
            slot_ctx = self.n_ctx // self.parallel
            self.log(
                f"slot         init: id {slot:2d} | task -1 | new slot n_ctx_slot = {slot_ctx}"
            )
        self.log("main: model loaded")
        self.graceful = True  # sigaction(SIGTERM, signal_handler)
        url = f"http://{self.v['hostname']}:{self.v['port']}"
        self.log(f"main: server is listening on {url} - starting the main loop")
        self.log("srv  update_slots: all slots are idle")
        while True:
            self.pause(3600)

    def shutdown(self) -> int:
        """After SIGTERM once listening: the queue stops, clean-up; 0."""
        if self.sim.wedge_on_stop:
            self.wedge()
        self.log(CLEAN_UP)
        time.sleep(0.1 / self.sim.speed)
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``llama-server [flags]``; the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    si.log_argv(os.environ, "llamacpp")
    si.line_buffered()
    try:
        values, warnings = parse_args(args, os.environ)
        server = LlamaServer(values, si.settings(os.environ))
    except ValueError as e:
        print(f"{e}\n", file=sys.stderr)
        return 1
    for text in warnings:
        server.log(text)
    try:
        return server.run()
    except si.Terminated:
        return server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
