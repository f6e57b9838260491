"""Plans: typed actions with their arithmetic, for each label the recommender handles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from advisor.cli.main import cli
from advisor.core.steps import ActionStep
from advisor.core.units import is_unit_name
from advisor.parsing.values import FACT_KEYS
from advisor.planning.context import Holder, PlanContext
from advisor.planning.recommend import plan

GIB = 1024**3


def facts(**stated: Any) -> dict[str, Any]:
    return dict.fromkeys(FACT_KEYS) | stated


def kinds(actions: list[ActionStep]) -> list[str]:
    return [a.kind for a in actions]


def test_sampler_warmup_with_vocab_and_samples_computes_max_num_seqs() -> None:
    f = facts(
        max_num_seqs=1024, vocab_size=200_064, gpu_memory_utilization=0.9, total_capacity_gib=94.97
    )
    ctx = PlanContext(unit="vllm.service", free_before_bytes=2 * GIB)
    actions = plan("sampler_warmup_oom", 0.97, f, ctx)
    assert kinds(actions) == [
        "hold_restarts",
        "set_flag",
        "set_flag",
        "wait_gpu_free",
        "reset_failed",
        "restart",
    ]
    assert "Restart= may start the unit again" in actions[0].why
    assert "start limit" in actions[4].why
    seqs, util = actions[1], actions[2]
    # 0.9 × 2 GiB / (200,064 × 20 B) = 483.03 → 256 (a power of two)
    assert (seqs.flag, seqs.value, seqs.alternative) == ("--max-num-seqs", 256, False)
    assert any("= 483 → 256" in line for line in seqs.arithmetic)
    # need 1024 × 200,064 × 20 B = 3.82 GiB; missing 1.82 GiB; 0.9 − 1.82/94.97 = 0.880 → 0.88
    assert (util.flag, util.value, util.alternative) == ("--gpu-memory-utilization", 0.88, True)


def test_sampler_warmup_in_a_restart_loop_holds_restarts_first() -> None:
    f = facts(
        max_num_seqs=512,
        dummy_requests=512,
        tried_to_allocate_gib=0.5,
        free_gib=0.25,
        restart_count=3,
    )
    actions = plan("sampler_warmup_oom", 0.97, f, PlanContext(unit="vllm.service"))
    assert kinds(actions)[0] == "hold_restarts"
    assert "restarted the unit 3 time(s) (restart counter 3)" in actions[0].why
    assert "restart loop" not in actions[0].why  # a loop is an incident's, not a counter's
    # per request 0.5 GiB / 512 / 4 × 20 B = 5 MiB; 0.9 × 0.75 GiB / 5 MiB = 138 → 128
    assert actions[1].value == 128


def test_sampler_warmup_without_figures_halves() -> None:
    actions = plan("sampler_warmup_oom", 0.97, facts(dummy_requests=1024), PlanContext())
    assert (actions[1].flag, actions[1].value) == ("--max-num-seqs", 512)
    assert actions[1].arithmetic == ("1024 / 2 = 512",)


@pytest.mark.parametrize(
    ("stated", "flag", "value"),
    [
        ({"max_model_len": 32768, "kv_cache_tokens": 21648}, "--max-model-len", 21504),
        (
            {
                "max_model_len": 32768,
                "estimated_max_model_len": 8336,
                "kv_cache_needed_gib": 4.0,
                "available_kv_cache_gib": 1.02,
            },
            "--max-model-len",
            8192,
        ),
        (
            {"engine": "sglang", "max_model_len": 131072, "kv_cache_tokens": 100_000},
            "--context-length",
            99328,
        ),
        ({"engine": "tgi", "max_batch_prefill_tokens": 4096}, "--max-batch-prefill-tokens", 2048),
    ],
)
def test_kv_cache_fixes_to_the_digit(stated: dict[str, Any], flag: str, value: int) -> None:
    actions = plan("kv_cache_oom", 0.96, facts(**stated), PlanContext(unit="x.service"))
    assert actions[0].kind == "hold_restarts"
    assert (actions[1].kind, actions[1].flag, actions[1].value) == ("set_flag", flag, value)
    assert actions[-1].kind == "restart"


def test_kv_cache_alternatives_need_samples_or_idle_gpus() -> None:
    f = facts(
        max_model_len=32768,
        estimated_max_model_len=8336,
        kv_cache_needed_gib=4.0,
        available_kv_cache_gib=1.02,
        gpu_memory_utilization=0.85,
        total_capacity_gib=79.19,
        tensor_parallel_size=1,
    )
    assert kinds(plan("kv_cache_oom", 0.96, f, PlanContext())) == [
        "hold_restarts",
        "set_flag",
        "wait_gpu_free",
        "reset_failed",
        "restart",
    ]
    rich = PlanContext(free_before_bytes=10 * GIB, idle_gpus=2)
    alts = [a for a in plan("kv_cache_oom", 0.96, f, rich) if a.alternative]
    # 0.85 + 2.98 / 79.19 = 0.8876 → 0.89
    assert [(a.flag, a.value) for a in alts] == [
        ("--gpu-memory-utilization", 0.89),
        ("--tensor-parallel-size", 2),
    ]


def test_wedged_stop_kills_waits_the_learned_time_and_hardens_the_unit() -> None:
    actions = plan("wedged_stop", 0.9, facts(), PlanContext(unit="vllm.service"))
    assert kinds(actions) == ["kill", "wait_gpu_free", "set_unit_option", "set_unit_option"]
    assert actions[1].seconds == 30.0 and "documented default" in actions[1].arithmetic[0]
    assert [(a.option, a.value) for a in actions[2:]] == [
        ("TimeoutStopSec", "30s"),
        ("KillMode", "control-group"),
    ]
    learned = plan(
        "wedged_stop", 0.9, facts(), PlanContext(unit="vllm.service", release_p95_s=12.5)
    )
    assert learned[1].seconds == 12.5 and "p95" in learned[1].arithmetic[0]


def test_gpu_memory_held_acts_only_on_processes_of_units() -> None:
    ctx = PlanContext(
        unit="vllm.service",
        holders=(
            Holder(4711, 60 * GIB, "vllm.service"),
            Holder(5000, 8 * GIB, "jupyter.service"),
            Holder(6000, GIB, None),
        ),
    )
    actions = plan("gpu_memory_held", 0.95, facts(), ctx)
    assert [(a.kind, a.unit, a.pid) for a in actions] == [
        ("hold_restarts", "vllm.service", None),
        ("kill", "vllm.service", 4711),
        ("stop", "jupyter.service", 5000),
        ("notify", "vllm.service", 6000),
        ("wait_gpu_free", "vllm.service", None),
        ("reset_failed", "vllm.service", None),
        ("restart", "vllm.service", None),
    ]
    assert "never killed automatically" in actions[3].why


@pytest.mark.parametrize("label", ["unknown", "sampler_warmup_oom"])
def test_unknown_and_low_confidence_only_notify(label: str) -> None:
    actions = plan(label, 0.6, facts(max_num_seqs=1024), PlanContext(unit="vllm.service"))
    assert kinds(actions) == ["notify"]
    assert plan("healthy", 0.99, facts(), PlanContext()) == []


@pytest.mark.parametrize(
    "unit", ["session-3.scope", "vllm.socket", "user.slice", "user@1000.service", "dbus.service"]
)
def test_a_unit_that_is_no_servers_gets_no_plan(unit: str) -> None:
    """Not even a notify: a login session's scope (what its user's processes log), a socket,
    a slice, a service manager may be evidence, never the subject of a plan."""
    assert plan("sampler_warmup_oom", 0.95, facts(max_num_seqs=1024), PlanContext(unit=unit)) == []
    assert plan("unknown", 0.2, facts(), PlanContext(unit=unit)) == []


@pytest.mark.parametrize(
    "unit",
    [
        "$(reboot).service",
        "a;rm -rf /.service",
        "../x.service",
        "x\ny.service",
        "vllm*.service",
        "-x.service",
        "vllm",
    ],
)
def test_hostile_unit_names_are_refused(unit: str) -> None:
    assert not is_unit_name(unit)
    actions = plan("wedged_stop", 0.95, facts(), PlanContext(unit=unit))
    assert kinds(actions) == ["notify"] and actions[0].unit is None
    holders = PlanContext(unit="vllm.service", holders=(Holder(1, None, unit),))
    held = plan("gpu_memory_held", 0.95, facts(), holders)
    assert "notify" in kinds(held) and not {"stop", "kill"} & set(kinds(held))


@pytest.mark.parametrize(
    ("label", "stated"),
    [
        ("sampler_warmup_oom", {"max_num_seqs": -5}),  # a log stating -5
        ("sampler_warmup_oom", {"max_num_seqs": 1}),  # nothing lower to go to
        ("sampler_warmup_oom", {"dummy_requests": 10**30}),  # absurd: not a fact
        ("kv_cache_oom", {"engine": "tgi", "max_batch_prefill_tokens": 1}),  # "1 prefill tokens"
        ("kv_cache_oom", {"engine": "tgi", "max_batch_prefill_tokens": 600}),  # 300: under 512
    ],
)
def test_numbers_from_a_log_are_range_checked_and_bounded(
    label: str, stated: dict[str, Any]
) -> None:
    actions = plan(label, 0.97, facts(**stated), PlanContext(unit="vllm.service"))
    assert not any(a.kind in ("set_flag", "restart", "hold_restarts") for a in actions)
    assert set(kinds(actions)) == {"notify"}


def test_a_plan_remembers_what_it_was_made_for() -> None:
    f = facts(max_num_seqs=1024, dummy_requests=1024)
    ctx = PlanContext(
        unit="vllm.service", invocation_id="ab" * 16, gpus=(0, 1), ready_bound_s=120.0
    )
    actions = plan("sampler_warmup_oom", 0.97, f, ctx)
    assert {a.invocation_id for a in actions} == {"ab" * 16}
    assert actions[1].from_value == 1024 and actions[1].value == 512
    assert next(a for a in actions if a.kind == "wait_gpu_free").gpus == (0, 1)
    assert next(a for a in actions if a.kind == "restart").seconds == 120.0


def test_actions_are_a_closed_vocabulary() -> None:
    with pytest.raises(ValidationError):
        ActionStep(kind="shell", why="x")  # type: ignore[arg-type]
    assert is_unit_name("vllm-minimax-m25.service") and is_unit_name("vllm@0.service")


def test_classify_json_carries_the_plan(seed_journal: Path) -> None:
    out = json.loads(CliRunner().invoke(cli, ["classify", str(seed_journal), "--json"]).output)
    assert [a["kind"] for a in out["actions"]] == [
        "hold_restarts",
        "set_flag",
        "set_flag",
        "wait_gpu_free",
        "reset_failed",
        "restart",
    ]
    seqs = out["actions"][1]
    assert (seqs["flag"], seqs["value"], seqs["unit"]) == (
        "--max-num-seqs",
        256,
        "vllm-minimax-m25.service",
    )
    assert seqs["arithmetic"][-1].endswith("= 281 → 256 (a power of two, below 1024)")


def test_each_engine_is_fixed_in_its_own_flags() -> None:
    sglang = plan(
        "kv_cache_oom",
        0.99,
        facts(engine="sglang", mem_fraction_static=0.8, free_gib=15.5, total_capacity_gib=96.0),
        PlanContext(unit="sglang.service"),
    )
    # the pool is empty at 1 − 15.5 / 96 = 0.839; 0.839 + 0.05 → 0.89
    assert (sglang[1].flag, sglang[1].value) == ("--mem-fraction-static", 0.89)
    assert "SGLang's own advice" in sglang[1].why
    stepped = plan("kv_cache_oom", 0.99, facts(engine="sglang", mem_fraction_static=0.8))
    assert (stepped[1].flag, stepped[1].value) == ("--mem-fraction-static", 0.85)
    capped = plan("kv_cache_oom", 0.99, facts(engine="sglang", mem_fraction_static=0.94))
    assert kinds(capped) == ["notify"] and "--mem-fraction-static" in capped[0].why
    llama = plan("kv_cache_oom", 0.98, facts(engine="llamacpp", max_model_len=131072))
    assert (llama[1].flag, llama[1].value) == ("--ctx-size", 65536)
    tgi = plan(
        "kv_cache_oom",
        0.99,
        facts(engine="tgi", max_batch_prefill_tokens=4096, max_input_tokens=4000),
    )
    assert kinds(tgi) == ["notify"] and "--max-batch-prefill-tokens" in tgi[0].why
    runtime = plan("runtime_oom", 0.95, facts(engine="sglang"))
    assert "--max-running-requests" in runtime[0].why and "--max-num-seqs" not in runtime[0].why


def test_vllms_own_kv_cache_advice_is_an_alternative_when_it_holds_a_request() -> None:
    stated = facts(
        max_model_len=32768,
        estimated_max_model_len=8336,
        kv_cache_needed_gib=4.0,
        available_kv_cache_gib=1.02,
        suggested_kv_cache_bytes=6 * GIB,
    )
    actions = plan("kv_cache_oom", 0.96, stated, PlanContext(unit="vllm.service"))
    (alt,) = [a for a in actions if a.alternative]
    assert (alt.flag, alt.value) == ("--kv-cache-memory-bytes", 6 * GIB)
    assert "own advice" in alt.arithmetic[0]
    small = plan("kv_cache_oom", 0.96, stated | {"suggested_kv_cache_bytes": 3 * GIB})
    assert not [a for a in small if a.alternative]
