"""vLLM's traceback frames per phase and version (V1 engine core, workers, V0 engine)."""

from __future__ import annotations

from .context import Ctx
from .tracebacks import TORCH_CALL, Frame, model_forward_frames, mpath

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
    return [
        (mp, "_bootstrap", "self.run()"),
        (mp, "run", "self._target(*self._args, **self._kwargs)"),
    ]


def loader_frames(ctx: Ctx) -> list[Frame]:
    """From the model loader down to the tensor that does not fit (weights_load_oom)."""
    g, m, rng = ctx.grank, mpath(ctx), ctx.rng
    lpath = (
        "vllm/model_executor/model_loader/loader.py"
        if g <= 8
        else "vllm/model_executor/model_loader/base_loader.py"
    )
    upath = (
        "vllm/model_executor/model_loader/loader.py"
        if g <= 8
        else "vllm/model_executor/model_loader/utils.py"
    )
    kind = rng.choice(("init", "init", "weights", "post"))
    if kind == "init":
        fr: list[Frame] = [
            (
                lpath,
                "load_model",
                "model = initialize_model(vllm_config=vllm_config,"
                if g >= 8
                else "model = _initialize_model(model_config, self.load_config,",
            ),
            (
                upath,
                "initialize_model" if g >= 8 else "_initialize_model",
                "return model_class(vllm_config=vllm_config, prefix=prefix)"
                if g >= 8
                else "return model_class(config=model_config.hf_config,",
            ),
            (m, "__init__", "self.model = self._init_model(vllm_config=vllm_config,"),
        ]
        if g >= 8:
            fr.append(
                (
                    "vllm/compilation/decorators.py",
                    "__init__",
                    "old_init(self, vllm_config=vllm_config, prefix=prefix, **kwargs)",
                )
            )
        fr += [
            (m, "__init__", "self.start_layer, self.end_layer, self.layers = make_layers("),
            (
                "vllm/model_executor/models/utils.py",
                "make_layers",
                'maybe_offload_to_cpu(layer_fn(prefix=f"{prefix}.{idx}"))',
            ),
            (m, "<lambda>", "lambda prefix: layer_type(config=config,"),
            (m, "__init__", "self.mlp = self.mlp_cls("),
            (m, "__init__", "self.gate_up_proj = MergedColumnParallelLinear("),
            (
                "vllm/model_executor/layers/linear.py",
                "__init__",
                "self.quant_method.create_weights(",
            ),
            (
                "vllm/model_executor/layers/linear.py",
                "create_weights",
                "weight = Parameter(torch.empty(sum(output_partition_sizes),",
            ),
            ("torch/utils/_device.py", "__torch_function__", "return func(*args, **kwargs)"),
        ]
        return fr
    if kind == "weights":
        dl = lpath if g <= 8 else "vllm/model_executor/model_loader/default_loader.py"
        return [
            (
                lpath,
                "load_model",
                "self.load_weights(model, model_config)"
                if g >= 9
                else "model.load_weights(self._get_all_weights(model_config, model))",
            ),
            (dl, "load_weights", "loaded_weights = model.load_weights("),
            (m, "load_weights", "return loader.load_weights(weights)"),
            (
                "vllm/model_executor/models/utils.py",
                "load_weights",
                'autoloaded_weights = set(self._load_module("", self.module, weights))',
            ),
            (
                "vllm/model_executor/models/utils.py",
                "_load_module",
                "loaded_params = module_load_weights(weights)",
            ),
            (m, "load_weights", "weight_loader(param, loaded_weight, shard_id)"),
            (
                "vllm/model_executor/layers/fused_moe/layer.py"
                if ctx.model.moe
                else "vllm/model_executor/layers/linear.py",
                "weight_loader",
                "loaded_weight = loaded_weight.to(param.device)",
            ),
        ]
    quant = rng.choice(("fp8", "awq_marlin", "gptq_marlin", "compressed_tensors"))
    return [
        (lpath, "load_model", "process_weights_after_loading(model, model_config, target_device)"),
        (
            upath,
            "process_weights_after_loading",
            "quant_method.process_weights_after_loading(module)",
        ),
        (
            f"vllm/model_executor/layers/quantization/{quant}.py",
            "process_weights_after_loading",
            "layer.weight = torch.nn.Parameter(weight.t().contiguous(), requires_grad=False)",
        ),
    ]


def capture_frames(ctx: Ctx) -> list[Frame]:
    g = ctx.grank
    if ctx.v0 or not (ctx.group and ctx.group.v1):
        fr: list[Frame] = [
            (
                "vllm/worker/worker.py",
                "_warm_up_model",
                "self.model_runner.capture_model(self.gpu_cache)",
            ),
            ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
            (
                "vllm/worker/model_runner.py",
                "capture_model",
                "graph_runner.capture(**capture_inputs)",
            ),
            ("vllm/worker/model_runner.py", "capture", "self.model("),
        ]
        if ctx.chance(0.4):
            return [
                *fr[:-1],
                (
                    "vllm/worker/model_runner.py",
                    "capture",
                    "with torch.cuda.graph(self._graph, pool=memory_pool, stream=stream):",
                ),
                ("torch/cuda/graphs.py", "__exit__", "self.cuda_graph.capture_end()"),
            ]
        return fr + TORCH_CALL + model_forward_frames(ctx)
    fr = [(W1, "compile_or_warm_up_model", "self.model_runner.capture_model()")]
    if g >= 10:
        fr += [
            (R1, "capture_model", "self._capture_cudagraphs("),
            (R1, "_capture_cudagraphs", "self._dummy_run(num_tokens,"),
        ]
    else:
        fr += [(R1, "capture_model", "self._dummy_run(num_tokens)")]
    fr += [
        ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
        (R1, "_dummy_run", "outputs = self.model("),
    ]
    if g >= 10 and ctx.chance(0.5):
        return [
            *fr,
            (
                "vllm/compilation/cuda_graph.py",
                "__call__",
                "with torch.cuda.graph(cudagraph, pool=self.graph_pool):",
            ),
            ("torch/cuda/graphs.py", "__exit__", "self.cuda_graph.capture_end()"),
        ]
    if ctx.chance(0.5):
        fr += [
            (
                "vllm/compilation/cuda_piecewise_backend.py",
                "__call__",
                "return entry.runnable(*args)",
            )
        ]
    return fr + TORCH_CALL + model_forward_frames(ctx)


def sampler_frames(ctx: Ctx, pooler: bool) -> tuple[list[Frame], list[Frame]]:
    """(outer frames down to the raise, inner frames of the original torch OOM)."""
    fn = "_dummy_pooler_run" if pooler else "_dummy_sampler_run"
    outer: list[Frame] = [
        (
            W1,
            "compile_or_warm_up_model",
            f"self.model_runner.{fn}(hidden_states=last_hidden_states)"
            if not pooler
            else f"self.model_runner.{fn}(hidden_states)",
        ),
        ("torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
        (R1, fn, "raise RuntimeError("),
    ]
    if pooler:
        inner: list[Frame] = [
            (R1, fn, "return self._dummy_pooler_run_task(hidden_states, max_task)"),
            (R1, "_dummy_pooler_run_task", "return model.pooler(hidden_states=hidden_states,"),
            *TORCH_CALL,
            (
                "vllm/model_executor/layers/pooler.py",
                "forward",
                "pooled_data = self.head(pooled_data, pooling_metadata)",
            ),
        ]
        return outer, inner
    last = ctx.rng.choice(
        (
            (
                "vllm/v1/sample/ops/topk_topp_sampler.py",
                "apply_top_k_top_p",
                "logits_sort, logits_idx = logits.sort(dim=-1, descending=False)",
            ),
            ("vllm/v1/sample/sampler.py", "forward", "logits = logits.to(torch.float32)"),
            (
                "vllm/v1/sample/ops/penalties.py",
                "apply_all_penalties",
                "return apply_penalties(logits, prompt_token_ids, output_tokens_t,",
            ),
            (
                "vllm/v1/sample/sampler.py",
                "apply_temperature",
                "return logits.div_(temp.unsqueeze(dim=1))",
            ),
        )
    )
    inner = [(R1, fn, "sampler_output = self.sampler(logits=logits,"), *TORCH_CALL]
    if last[0].endswith("topk_topp_sampler.py"):
        inner += [
            (
                "vllm/v1/sample/sampler.py",
                "forward",
                "sampled = self.sample(logits, sampling_metadata)",
            ),
            ("vllm/v1/sample/sampler.py", "sample", "random_sampled = self.topk_topp_sampler("),
            *TORCH_CALL,
            (
                "vllm/v1/sample/ops/topk_topp_sampler.py",
                "forward_native",
                "logits = self.apply_top_k_top_p(logits, k, p)",
            ),
        ]
    elif last[0].endswith("penalties.py"):
        inner += [
            (
                "vllm/v1/sample/sampler.py",
                "forward",
                "logits = self.apply_penalties(logits, sampling_metadata)",
            ),
            ("vllm/v1/sample/sampler.py", "apply_penalties", "logits = apply_all_penalties("),
        ]
    inner.append(last)
    return outer, inner


def v1_ec_frames(ctx: Ctx, phase: str) -> list[Frame]:
    g = ctx.grank
    fr: list[Frame] = [
        (
            CORE,
            "run_engine_core",
            "engine_core = EngineCoreProc(*args, **kwargs)"
            if g <= 9
            else "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
        ),
        (CORE, "__init__", "super().__init__(vllm_config, executor_class, log_stats,"),
    ]
    if phase == "load":
        return [
            *fr,
            (CORE, "__init__", "self.model_executor = executor_class(vllm_config)"),
            (
                "vllm/executor/executor_base.py" if g <= 11 else "vllm/v1/executor/abstract.py",
                "__init__",
                "self._init_executor()",
            ),
        ]
    fr.append(
        (
            CORE,
            "__init__",
            "num_gpu_blocks, num_cpu_blocks, kv_cache_config = self._initialize_kv_caches(",
        )
    )
    if phase == "kv":
        kvp = "vllm/v1/core/kv_cache_planning.py" if g >= 33 else "vllm/v1/core/kv_cache_utils.py"
        return [
            *fr,
            (
                CORE,
                "_initialize_kv_caches",
                "kv_cache_configs = get_kv_cache_configs(" if g >= 10 else "kv_cache_configs = [",
            ),
            (
                kvp,
                "get_kv_cache_configs" if g >= 10 else "get_kv_cache_config",
                "check_enough_kv_cache_memory(vllm_config, kv_cache_spec_one_worker,",
            ),
            (kvp, "check_enough_kv_cache_memory", "raise ValueError("),
        ]
    if phase == "profile":
        return [
            *fr,
            (
                CORE,
                "_initialize_kv_caches",
                "available_gpu_memory = self.model_executor.determine_available_memory()",
            ),
            (
                "vllm/v1/executor/abstract.py",
                "determine_available_memory",
                'output = self.collective_rpc("determine_available_memory")',
            ),
        ]
    return [
        *fr,
        (
            CORE,
            "_initialize_kv_caches",
            "self.model_executor.initialize_from_config(kv_cache_configs)",
        ),
        (
            "vllm/v1/executor/abstract.py",
            "initialize_from_config",
            'self.collective_rpc("compile_or_warm_up_model")',
        ),
    ]


def uniproc_frames(ctx: Ctx) -> list[Frame]:
    ex = (
        "vllm/executor/uniproc_executor.py"
        if ctx.grank <= 11
        else "vllm/v1/executor/uniproc_executor.py"
    )
    ut = "vllm/utils.py" if ctx.grank <= 10 else "vllm/utils/__init__.py"
    return [
        (ex, "collective_rpc", "answer = run_method(self.driver_worker, method, args, kwargs)"),
        (ut, "run_method", "return func(*args, **kwargs)"),
    ]


def v0_api_frames(ctx: Ctx, mq: bool) -> list[Frame]:
    api = "vllm/entrypoints/openai/api_server.py"
    fr: list[Frame] = [
        (
            api,
            "<module>",
            "uvloop.run(run_server(args))" if ctx.grank >= 6 else "asyncio.run(run_server(args))",
        ),
        ("uvloop/__init__.py", "run", "return __asyncio.run(")
        if ctx.grank >= 6
        else (f"{stdlib(ctx)}/asyncio/runners.py", "run", "return loop.run_until_complete(main)"),
        (api, "run_server", "async with build_async_engine_client(args) as engine_client:"),
        (f"{stdlib(ctx)}/contextlib.py", "__aenter__", "return await anext(self.gen)"),
        (
            api,
            "build_async_engine_client_from_engine_args",
            "raise RuntimeError(" if mq else "engine_client = AsyncLLMEngine.from_engine_args(",
        ),
    ]
    if mq:
        return fr
    return [
        *fr,
        ("vllm/engine/async_llm_engine.py", "from_engine_args", "engine = cls("),
        (
            "vllm/engine/async_llm_engine.py",
            "__init__",
            "self.engine = self._engine_class(*args, **kwargs)",
        ),
        ("vllm/engine/async_llm_engine.py", "__init__", "super().__init__(*args, **kwargs)"),
    ]


def v0_engine_frames(ctx: Ctx, phase: str) -> list[Frame]:
    """LLMEngine construction down to the failing worker call (V0)."""
    llm = "vllm/engine/llm_engine.py"
    ex = "vllm/executor/gpu_executor.py" if ctx.grank <= 6 else "vllm/executor/uniproc_executor.py"
    if phase == "load":
        return [
            (llm, "__init__", "self.model_executor = executor_class("),
            ("vllm/executor/executor_base.py", "__init__", "self._init_executor()"),
            (
                ex,
                "_init_executor",
                "self.driver_worker.load_model()"
                if ctx.tp == 1
                else 'self._run_workers("load_model",',
            ),
            ("vllm/worker/worker.py", "load_model", "self.model_runner.load_model()"),
            (
                "vllm/worker/model_runner.py",
                "load_model",
                "self.model = get_model(model_config=self.model_config,",
            ),
            (
                "vllm/model_executor/model_loader/__init__.py",
                "get_model",
                "return loader.load_model(model_config=model_config,",
            ),
        ]
    fr: list[Frame] = [(llm, "__init__", "self._initialize_kv_caches()")]
    if phase == "profile":
        return [
            *fr,
            (llm, "_initialize_kv_caches", "num_gpu_blocks, num_cpu_blocks = ("),
            (
                "vllm/executor/gpu_executor.py",
                "determine_num_available_blocks",
                "return self.driver_worker.determine_num_available_blocks()",
            ),
            (
                "vllm/worker/worker.py",
                "determine_num_available_blocks",
                "assert self.init_gpu_memory > free_gpu_memory, ("
                if ctx.grank <= 8
                else "self.baseline_snapshot.free_memory > free_gpu_memory, (",
            ),
        ]
    fr += [
        (
            llm,
            "_initialize_kv_caches",
            "self.model_executor.initialize_cache(num_gpu_blocks, num_cpu_blocks)",
        ),
        (
            ex,
            "initialize_cache",
            "self.driver_worker.initialize_cache(num_gpu_blocks, num_cpu_blocks)",
        ),
    ]
    if phase == "kv":
        return [
            *fr,
            (
                "vllm/worker/worker.py",
                "initialize_cache",
                "raise_if_cache_size_invalid(num_gpu_blocks,",
            ),
            ("vllm/worker/worker.py", "raise_if_cache_size_invalid", "raise ValueError("),
        ]
    return [*fr, ("vllm/worker/worker.py", "initialize_cache", "self._warm_up_model()")]
