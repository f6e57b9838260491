"""Python tracebacks from (file, function, source line) frames, and the frames of a model's
forward pass through torch."""

from __future__ import annotations

from .context import Ctx

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
    sep = (
        "The above exception was the direct cause of the following exception:"
        if cause
        else "During handling of the above exception, another exception occurred:"
    )
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
    fr.append((m, "forward", "hidden_states, residual = layer(positions, hidden_states, residual)"))
    if ctx.model.moe and ctx.chance(0.6):
        fr += [
            (m, "forward", "hidden_states = self.mlp(hidden_states)"),
            (
                "vllm/model_executor/layers/fused_moe/layer.py",
                "forward",
                "return torch.ops.vllm.moe_forward(hidden_states, router_logits,",
            ),
            (
                "vllm/model_executor/layers/fused_moe/fused_moe.py",
                "fused_experts_impl",
                "intermediate_cache1 = torch.empty((M, topk_ids.shape[1], N),",
            ),
        ]
    elif ctx.chance(0.5):
        fr += [
            (m, "forward", "hidden_states = self.self_attn(positions=positions,"),
            (
                "vllm/attention/layer.py",
                "forward",
                "return self.impl.forward(self, query, key, value, kv_cache, attn_metadata)",
            ),
        ]
    else:
        fr += [
            (m, "forward", "x = self.act_fn(gate_up)"),
            (
                "vllm/model_executor/layers/activation.py",
                "forward_cuda",
                "out = torch.empty(output_shape, dtype=x.dtype, device=x.device)",
            ),
        ]
    return fr
