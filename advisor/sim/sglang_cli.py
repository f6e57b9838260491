"""The stand-in SGLang server (0.5.2): ``python3 -m sglang.launch_server --model-path M [flags]``
(package written by ``advisor.sim.standin.write_standins``; ``ADVISOR_SIM_*`` as there).

Lines, from the sglang 0.5.2 wheel (python/sglang/srt/...): format ``[%Y-%m-%d %H:%M:%S<prefix>]
message`` (utils.py ``configure_logger``; a scheduler's prefix `` TP<rank>`` only when tp_size > 1,
`` EP<rank>`` when ep_size > 1, managers/scheduler.py ``run_scheduler_process``; none for the main
process), uvicorn's ``[time] INFO: message`` (utils.py ``set_uvicorn_logging_configs``).
``server_args=ServerArgs(...)`` (entrypoints/engine.py:739): every field of server_args.py's
ServerArgs in order, as received, plus what ``__post_init__`` derives (``post_init``). ``Init torch
distributed begin.``/``ends.`` (model_executor/model_runner.py:594, 690), ``Load weight
begin``/``end`` (697, 782), ``KV Cache is allocated. #tokens: …`` (mem_cache/memory_pool.py:352),
``Memory pool end`` (model_runner.py:1523), ``Capture cuda graph begin``/``bs``/``end``
(model_runner.py:1751, cuda_graph_runner.py:270, model_runner.py:1765), ``max_total_num_tokens=…,
chunked_prefill_size=…, max_prefill_tokens=…, max_running_requests=…, context_len=…,
available_gpu_mem=… GB`` (managers/scheduler.py:411), the warm-up's ``Prefill batch. …``
(managers/scheduler_metrics_mixin.py:113), readiness ``The server is fired up and ready to roll!``
(entrypoints/http_server.py:1386). Failure: ``RuntimeError: Not enough memory. Please try to
increase --mem-fraction-static.`` (model_runner.py:1317, max_total_num_tokens <= 0) in the
traceback logged as ``Scheduler hit an exception: …`` (scheduler.py:2630); the scheduler then
SIGQUITs the main process, which logs ``Received sigquit from a child process. It usually means the
child failed.`` (entrypoints/engine.py:696) and SIGKILLs itself (utils.py:868
``kill_process_tree``). Weights that do not fit: torch's OutOfMemoryError from ``load_model``.
SIGTERM once ready: ``SIGTERM received. signum=None frame=None. Draining requests and shutting
down...`` (managers/tokenizer_manager.py:1691), ``Gracefully exiting... remaining number of
requests 0`` (1167), then SIGKILL of itself (systemd: status=9/KILL); before the warm-up installs
that handler, SIGTERM's default action ends it.

Memory, per GPU: the CUDA context takes 0.5 GiB of G = ADVISOR_SIM_GPU_GIB, F is then free
(less others' claims; the least over the ranks), W = weights / tp_size (advisor.sim.models'
card, or ADVISOR_SIM_WEIGHTS_GIB). The KV pool is SGLang's rest_memory = (F − W) − F × (1 −
mem_fraction_static) = mem_fraction_static × F − W, in tokens of the card's KV bytes per token /
tp_size (capped by --max-total-tokens); <= 0 fails: with G = 96, W = 80, tp 1 (F = 95.5), 0.84
fits and 0.8 fails (0.87 is the default at 96 GiB). W > F fails loading. CUDA graphs take 0.5
GiB. 0.5.2 does not refuse a pool smaller than one request of context_length.

Exit: SIGKILL of itself, or death by SIGTERM (see above); 2 for bad flags. Unknown flags are
ignored; unambiguous prefixes work as in argparse (``--tp`` is ``--tp-size``). Stdlib only.
"""

from __future__ import annotations

import ast
import math
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from advisor.sim import standin as si
from advisor.sim import texts
from advisor.sim.models import GIB, card_for
from advisor.sim.vllm_text import OomFigures, torch_oom

__all__ = ["FIELDS", "Sglang", "main", "parse_args", "post_init", "server_args_repr"]

SITE: Final = "/usr/local/lib/python3.12/dist-packages/sglang/srt"
PROG: Final = "launch_server.py"
USAGE: Final = f"usage: {PROG} [-h] --model-path MODEL_PATH ..."
GRAPH_BYTES: Final = GIB // 2
NOT_ENOUGH: Final = "Not enough memory. Please try to increase --mem-fraction-static."
SIGQUIT_LINE: Final = "Received sigquit from a child process. It usually means the child failed."
# 0.5.2's ServerArgs fields in order: [!-]NAME[:T][=DEFAULT]. No default is None, -NAME False,
# !NAME required; T: i int, f float, s str, b switch, I/F/S lists of int/float/str.
FIELDS: Final = """
!model_path tokenizer_path tokenizer_mode='auto' tokenizer_worker_num=1 -skip_tokenizer_init
load_format='auto' model_loader_extra_config='{}' -trust_remote_code context_length:i -is_embedding
enable_multimodal:b revision model_impl='auto' host='127.0.0.1' port=30000 -skip_server_warmup
warmups nccl_port:i dtype='auto' quantization quantization_param_path kv_cache_dtype='auto'
mem_fraction_static:f max_running_requests:i max_queued_requests=9223372036854775807
max_total_tokens:i chunked_prefill_size:i max_prefill_tokens=16384 schedule_policy='fcfs'
schedule_conservativeness=1.0 page_size:i hybrid_kvcache_ratio:f swa_full_tokens_ratio=0.8
-disable_hybrid_swa_memory device tp_size=1 pp_size=1 max_micro_batch_size:i stream_interval=1
-stream_output random_seed:i constrained_json_whitespace_pattern watchdog_timeout=300
dist_timeout:i download_dir base_gpu_id=0 gpu_id_step=1 -sleep_on_idle log_level='info'
log_level_http -log_requests log_requests_level=2 crash_dump_folder -show_time_cost -enable_metrics
-enable_metrics_for_all_schedulers bucket_time_to_first_token:F bucket_inter_token_latency:F
bucket_e2e_request_latency:F -collect_tokens_histogram prompt_tokens_buckets:S
generation_tokens_buckets:S decode_log_interval=40 -enable_request_time_stats_logging
kv_events_config gc_warning_threshold_secs=0.0 api_key served_model_name weight_version='default'
chat_template completion_template file_storage_path='sglang_storage' -enable_cache_report
reasoning_parser tool_call_parser tool_server dp_size=1 load_balance_method='round_robin'
-prefill_round_robin_balance dist_init_addr nnodes=1 node_rank=0 json_model_override_args='{}'
preferred_sampling_params enable_lora:b max_lora_rank:i lora_target_modules:S lora_paths:S
max_loaded_loras:i max_loras_per_batch=8 lora_backend='triton' attention_backend
decode_attention_backend prefill_attention_backend sampling_backend grammar_backend
mm_attention_backend speculative_algorithm speculative_draft_model_path
speculative_draft_model_revision speculative_num_steps:i speculative_eagle_topk:i
speculative_num_draft_tokens:i speculative_accept_threshold_single=1.0
speculative_accept_threshold_acc=1.0 speculative_token_map speculative_attention_mode='prefill'
ep_size=1 moe_a2a_backend='none' moe_runner_backend='auto' flashinfer_mxfp4_moe_precision='default'
-enable_flashinfer_allreduce_fusion deepep_mode='auto' ep_num_redundant_experts=0
ep_dispatch_algorithm init_expert_location='trivial' -enable_eplb eplb_algorithm='auto'
eplb_rebalance_num_iterations=1000 eplb_rebalance_layers_per_chunk:i
eplb_min_rebalancing_utilization_threshold=1.0 expert_distribution_recorder_mode
expert_distribution_recorder_buffer_size:i -enable_expert_distribution_metrics deepep_config
moe_dense_tp_size:i -enable_hierarchical_cache hicache_ratio=2.0 hicache_size=0
hicache_write_policy='write_through' hicache_io_backend='kernel' hicache_mem_layout='layer_first'
hicache_storage_backend hicache_storage_prefetch_policy='best_effort'
hicache_storage_backend_extra_config -enable_lmcache -enable_double_sparsity ds_channel_config_path
ds_heavy_channel_num=32 ds_heavy_token_num=256 ds_heavy_channel_type='qk'
ds_sparse_decode_threshold=4096 cpu_offload_gb=0 offload_group_size=-1 offload_num_in_group=1
offload_prefetch_step=1 offload_mode='cpu' -disable_radix_cache cuda_graph_max_bs:i cuda_graph_bs:I
-disable_cuda_graph -disable_cuda_graph_padding -enable_profile_cuda_graph -enable_cudagraph_gc
-enable_nccl_nvls -enable_symm_mem -disable_flashinfer_cutlass_moe_fp4_allgather
-enable_tokenizer_batch_encode -disable_outlines_disk_cache -disable_custom_all_reduce
-enable_mscclpp -disable_overlap_schedule -enable_mixed_chunk -enable_dp_attention
-enable_dp_lm_head -enable_two_batch_overlap tbo_token_distribution_threshold=0.48
-enable_torch_compile torch_compile_max_bs=32 torchao_config='' -enable_nan_detection
-enable_p2p_check -triton_attention_reduce_in_fp32 triton_attention_num_kv_splits=8
num_continuous_decode_steps=1 -delete_ckpt_after_loading -enable_memory_saver -allow_auto_truncate
-enable_custom_logit_processor -flashinfer_mla_disable_ragged -disable_shared_experts_fusion
-disable_chunked_prefix_cache -disable_fast_image_processor -enable_return_hidden_states
scheduler_recv_interval=1 numa_node:I debug_tensor_dump_output_folder debug_tensor_dump_input_file
-debug_tensor_dump_inject:s -debug_tensor_dump_prefill_only disaggregation_mode='null'
disaggregation_transfer_backend='mooncake' disaggregation_bootstrap_port=8998
disaggregation_decode_tp:i disaggregation_decode_dp:i disaggregation_prefill_pp=1
disaggregation_ib_device num_reserved_decode_tokens=512 custom_weight_loader:S
-weight_loader_disable_mmap -enable_pdmux sm_group_num=3 max_mamba_cache_size:i
mamba_ssm_dtype='float32' -enable_ep_moe -enable_deepep_moe -enable_flashinfer_cutlass_moe
-enable_flashinfer_trtllm_moe -enable_triton_kernel_moe -enable_flashinfer_mxfp4_moe
"""
KINDS: Final[dict[str, type]] = {"i": int, "f": float, "s": str, "I": int, "F": float, "S": str}


def _field(token: str) -> tuple[str, str, object]:
    """(name, kind, default) of one FIELDS entry."""
    mark = token[0] if token[0] in "!-" else ""
    name, eq, raw = token[len(mark) :].partition("=")
    name, _, kind = name.partition(":")
    default = False if mark == "-" else ast.literal_eval(raw) if eq else None
    return name, kind or ("s" if default is None else type(default).__name__[0]), default


SPECS: Final = {name: (kind, default) for name, kind, default in map(_field, FIELDS.split())}
DEFAULTS: Final = {name: default for name, (_, default) in SPECS.items()}
SWITCHES: Final = {n for n, (kind, _) in SPECS.items() if kind == "b"}
ALIASES: Final = (
    "model:model_path tensor-parallel-size:tp_size pipeline-parallel-size:pp_size ep:ep_size"
    " data-parallel-size:dp_size expert-parallel-size:ep_size nccl-init-addr:dist_init_addr"
    " speculative-draft-model:speculative_draft_model_path"
)
FLAGS: Final = {"--" + n.replace("_", "-"): n for n in SPECS} | {
    "--" + a: f for a, _, f in (alias.partition(":") for alias in ALIASES.split())
}
# 0.5.2's frames: 0-4 start a scheduler (2: overlap only), 5-6 load weights, 7-8 pools.
FRAMES: Final = si.frames(
    SITE,
    """
managers/scheduler.py:2587:run_scheduler_process:scheduler = Scheduler(
managers/scheduler.py:329:__init__:self.tp_worker = TpWorkerClass(
managers/tp_worker_overlap_thread.py:71:__init__:self.worker = TpModelWorker(
managers/tp_worker.py:93:__init__:self.model_runner = ModelRunner(
model_executor/model_runner.py:250:__init__:self.initialize(min_per_gpu_memory)
model_executor/model_runner.py:296:initialize:self.load_model()
model_executor/model_runner.py:735:load_model:self.model = get_model(
model_executor/model_runner.py:378:initialize:self.init_memory_pool(
model_executor/model_runner.py:1317:init_memory_pool:raise RuntimeError(
""",
)


def _dest(flag: str) -> str | None:
    """argparse's reading of a flag: exact, else an unambiguous prefix; None if unknown."""
    found = {f for spelled, f in FLAGS.items() if flag[:2] == "--" and spelled.startswith(flag)}
    return FLAGS.get(flag) or (found.pop() if len(found) == 1 else None)


def parse_args(argv: Sequence[str]) -> dict[str, object]:
    """The command line → the ServerArgs fields it sets. ValueError, worded as argparse words
    it, for what SGLang's parser refuses; flags it does not know are ignored."""
    switches = {f for f, n in FLAGS.items() if n in SWITCHES}
    lists = {f for f, n in FLAGS.items() if SPECS[n][0].isupper()}
    pairs, positional = si.flag_pairs(argv, switches, lists)
    if positional:
        raise ValueError(f"unrecognized arguments: {' '.join(positional)}")
    given: dict[str, object] = {}
    for flag, values in pairs:
        field = _dest(flag)
        if field is None:
            continue
        if (field in SWITCHES) == bool(values):
            what = "ignored explicit argument" if values else "expected one argument"
            raise ValueError(f"argument {flag}: {what}{f' {values[0]!r}' if values else ''}")
        kind = SPECS[field][0]
        try:
            got = [KINDS.get(kind, str)(v) for v in values]
        except ValueError:
            raise ValueError(f"argument {flag}: invalid value: {values[0]!r}") from None
        given[field] = got if kind.isupper() else got[0] if got else True
    if "model_path" not in given:
        raise ValueError("the following arguments are required: --model-path/--model")
    return given


def _reserved_gib(mib: float, parallel: int) -> float:
    """0.5.2's memory kept out of mem_fraction_static, by GPU size."""
    if mib < 35 * 1024:
        return 2.8 + parallel / 10
    if mib < 90 * 1024:
        return 9.5 + parallel / 2
    return 12 + parallel / 2 if mib < 160 * 1024 else 32.0


def post_init(given: Mapping[str, object], gpu_gib: float) -> dict[str, object]:
    """Every field: defaults, what was given, then what 0.5.2's ``__post_init__`` derives on a
    CUDA GPU of ``gpu_gib``."""
    a = {**DEFAULTS, **given}
    a["tokenizer_path"] = a["tokenizer_path"] or a["model_path"]
    a["served_model_name"] = a["served_model_name"] or a["model_path"]
    a["device"] = a["device"] or "cuda"
    a["random_seed"] = random.randint(0, 1 << 30) if a["random_seed"] is None else a["random_seed"]
    mib, tp = gpu_gib * 1024, int(str(a["tp_size"]))
    if a["mem_fraction_static"] is None:
        reserved = _reserved_gib(mib, tp * int(str(a["pp_size"])))
        reserved += 2 * bool(a["speculative_algorithm"]) + 4 * bool(a["enable_dp_attention"])
        a["mem_fraction_static"] = round((mib - reserved * 1024) / mib, 3)
    if a["chunked_prefill_size"] is None:
        a["chunked_prefill_size"] = 2048 if mib < 35 * 1024 else 8192 if mib < 160 * 1024 else 16384
    if a["cuda_graph_max_bs"] is None and mib < 35 * 1024:
        a["cuda_graph_max_bs"] = 8 if tp < 4 else 80
    a["page_size"] = a["page_size"] or 1
    a["sampling_backend"] = a["sampling_backend"] or "flashinfer"
    a["grammar_backend"] = a["grammar_backend"] or "xgrammar"
    a["enable_dp_attention"] = a["enable_dp_attention"] and a["dp_size"] != 1
    return a


def server_args_repr(args: Mapping[str, object]) -> str:
    """``ServerArgs(...)`` as the dataclass repr prints it."""
    return "ServerArgs(" + ", ".join(f"{k}={args[k]!r}" for k in SPECS) + ")"


def _gb(nbytes: float) -> str:
    return f"{nbytes / GIB:.2f}"


class Sglang(si.Run):
    """One run: every rank's scheduler start-up, then the HTTP server until SIGTERM."""

    def __init__(self, args: dict[str, object], sim: si.Settings) -> None:
        self.tp, self.ep = int(str(args["tp_size"])), int(str(args["ep_size"]))
        super().__init__(sim, sim.devices(self.tp))
        self.args, card = args, card_for(str(args["model_path"]), weights_gib=sim.weights_gib)
        self.card, self.weights = card, int(card.weights_gib * GIB / self.tp)
        self.cell = max(1, math.ceil(card.kv_bytes_per_token / self.tp))
        self.context_len = int(str(args["context_length"] or card.max_model_len))

    def log(self, text: str, rank: int | None = None) -> None:
        """A record of the main process (rank None) or of a rank's scheduler."""
        tp = f" TP{rank}" if rank is not None and self.tp > 1 else ""
        ep = f" EP{rank // max(1, self.tp // self.ep)}" if rank is not None and self.ep > 1 else ""
        self.emit(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}{tp}{ep}] {text}")

    def each(self, line: Callable[[int], str]) -> None:
        """One record per rank, from its GPU."""
        for rank, gpu in enumerate(self.gpus):
            self.log(line(gpu), rank)

    def fail(self, frames: slice, error: str) -> int:
        """The exception every rank's scheduler logs, then the main process's end."""
        skip = 2 if self.args["disable_overlap_schedule"] else -1
        stack = "".join(f for i, f in enumerate(FRAMES[:5] + FRAMES[frames]) if i != skip)
        for rank in range(self.tp):
            trace = f"Traceback (most recent call last):\n{stack}{error}\n"
            self.log(f"Scheduler hit an exception: {trace}", rank)
        self.pause(0.2)
        self.log(SIGQUIT_LINE)
        self.die_of(signal.SIGKILL)
        return 137  # not reached

    def run(self) -> int:
        self.watch_signals()
        self.pause(3.0)  # imports, argument checks
        self.log(f"server_args={server_args_repr(self.args)}")
        self.pause(2.0)  # tokenizer manager, scheduler processes
        self.claim_all(si.CONTEXT_BYTES)
        self.each(lambda g: "Init torch distributed begin.")
        self.pause(1.5)
        self.each(lambda g: f"Init torch distributed ends. mem usage={_gb(si.CONTEXT_BYTES)} GB")
        free = min(self.free(g) for g in self.gpus)
        self.each(lambda g: f"Load weight begin. avail mem={_gb(self.free(g))} GB")
        self.pause(2.0 + self.weights / GIB / 10)
        for rank, gpu in enumerate(self.gpus):
            if not self.fits(gpu, self.weights):
                left = max(0, self.free(gpu))
                oom = OomFigures(rank, self.weights, self.total, left, self.own[gpu], (), 0)
                return self.fail(slice(5, 7), torch_oom(oom))
        self.claim_all(self.weights)
        arch, dtype, used = self.card.architecture, self.card.dtype, _gb(self.weights)
        self.each(
            lambda g: (
                f"Load weight end. type={arch}, dtype={dtype}, "
                f"avail mem={_gb(self.free(g))} GB, mem usage={used} GB."
            )
        )
        # profile_max_num_token: rest = available now − total × (1 − mem_fraction_static)
        mfs, cap = float(str(self.args["mem_fraction_static"])), self.args["max_total_tokens"]
        tokens = int((free - self.weights - free * (1 - mfs)) // self.cell)
        tokens = min(tokens, cap) if isinstance(cap, int) else tokens
        self.pause(1.0)
        if tokens <= 0:
            return self.fail(slice(7, 9), f"RuntimeError: {NOT_ENOUGH}")
        return self.pools(tokens)

    def pools(self, tokens: int) -> int:
        self.claim_all(tokens * self.cell)
        k = _gb(tokens * self.cell / 2)
        self.each(
            lambda g: f"KV Cache is allocated. #tokens: {tokens}, K size: {k} GB, V size: {k} GB"
        )
        self.each(lambda g: f"Memory pool end. avail mem={_gb(self.free(g))} GB")
        given, a = self.args["max_running_requests"], self.args
        pool = min(max(int(tokens / self.context_len * 512), 2048), 4096)
        pool = given if isinstance(given, int) else pool
        running = min(given if isinstance(given, int) else tokens // 2, pool)
        if not a["disable_cuda_graph"]:
            self.capture(pool)
        self.log(
            f"max_total_num_tokens={tokens}, chunked_prefill_size={a['chunked_prefill_size']}, "
            f"max_prefill_tokens={a['max_prefill_tokens']}, max_running_requests={running}, "
            f"context_len={self.context_len}, "
            f"available_gpu_mem={_gb(self.free(self.gpus[0]))} GB",
            0,
        )
        return self.serve()

    def capture(self, pool: int) -> None:
        """CUDA graphs of 0.5.2's ``get_batch_sizes_to_capture`` (no speculative decoding)."""
        given, most, mib = self.args["cuda_graph_bs"], self.args["cuda_graph_max_bs"], 1024.0
        mib *= self.sim.gpu_gib
        bs = [1, 2, 4, 8, *range(16, 161, 8), *(range(160, 257, 8) if mib > 90 * 1024 else ())]
        bs += list(range(256, 513, 16)) if mib > 160_000 else []
        bs = [int(b) for b in given] if isinstance(given, list) else bs
        bs += [pool] if max(bs) > pool else []
        if isinstance(most, int) and most > 0:
            bs = [b for b in bs if b <= most]
            bs += list(range(max(bs), most + 1, 16)) if max(bs) < most else []
        begin = "Capture cuda graph begin. This can take up to several minutes. avail mem="
        self.each(lambda g: f"{begin}{_gb(self.free(g))} GB")
        self.log(f"Capture cuda graph bs {sorted({b for b in bs if b <= pool})}", 0)
        self.pause(4.0)
        used = min(GRAPH_BYTES, *(max(0, self.free(g)) for g in self.gpus))
        self.claim_all(used)
        end = f"Capture cuda graph end. Time elapsed: {4.0 / self.sim.speed:.2f} s. mem usage="
        self.each(lambda g: f"{end}{_gb(used)} GB. avail mem={_gb(self.free(g))} GB.")

    def serve(self) -> int:
        """uvicorn, the warm-up request, readiness; then idle until SIGTERM."""
        self.pause(1.0)
        url = f"http://{self.args['host']}:{self.args['port']}"
        starting = (texts.uvicorn_started(self.pid), texts.UVICORN_WAITING, texts.UVICORN_READY)
        for text in (*starting, f"INFO:     Uvicorn running on {url} (Press CTRL+C to quit)"):
            self.log(text)
        client = f"INFO:     127.0.0.1:{40_000 + self.pid % 20_000} - "
        self.pause(1.0)
        self.log(f'{client}"GET /get_model_info HTTP/1.1" 200 OK')
        prefill = "#new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0"
        self.log(f"Prefill batch. {prefill}, #queue-req: 0, ", 0)
        self.pause(0.5)
        self.log(f'{client}"POST /generate HTTP/1.1" 200 OK')
        self.graceful = True  # the tokenizer manager's SIGTERM handler is now installed
        self.log("The server is fired up and ready to roll!")
        while True:
            self.pause(3600)

    def shutdown(self) -> int:
        """After SIGTERM once ready: drain, then SIGKILL itself (``kill_process_tree``)."""
        if not self.graceful:  # only with ADVISOR_SIM_WEDGE_ON_STOP: stuck before the handler
            self.wedge()
        self.log("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        if self.sim.wedge_on_stop:
            self.wedge()
        time.sleep(2.5 / self.sim.speed)  # the watchdog looks every 5 s
        self.log("Gracefully exiting... remaining number of requests 0")
        self.die_of(signal.SIGKILL)
        return 137  # not reached


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m sglang.launch_server [flags]``; the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    si.log_argv(os.environ, "sglang")
    si.line_buffered()
    try:
        sim = si.settings(os.environ)
        server = Sglang(post_init(parse_args(args), sim.gpu_gib), sim)
    except ValueError as e:
        print(f"{USAGE}\n{PROG}: error: {e}", file=sys.stderr)
        return 2
    try:
        return server.run()
    except si.Terminated:
        return server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
