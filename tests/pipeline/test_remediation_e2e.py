"""Each failure mode the recommender handles, on the simulated node: diagnosed from the node's
own journal and GPU samples, planned, approved, carried out by the sim backend, and healthy
within a bounded number of steps — every step in the store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from advisor.demo.simulated import remediate_on_node
from advisor.sim import SimNode, UnitSpec
from advisor.store import EventStore
from advisor.views.read.reading import read_rows

MODEL = (
    "--model",
    "MiniMaxAI/MiniMax-M2.5",
    "--tensor-parallel-size",
    "4",
    "--gpu-memory-utilization",
    "0.9",
    "--vocab-size",
    "200064",
    "--weights-gib",
    "230",
    "--trust-remote-code",
    "--enable-expert-parallel",
    "--speed",
    "8",
)
UNIT = "vllm-e2e.service"


def _node(tmp_path: Path) -> SimNode:
    return SimNode(
        tmp_path / "node",
        host="e2e-node",
        gpus=8,
        gpu_gib=96.0,
        release_delay_s=1.0,
        sample_interval_s=0.5,
    )


def _kinds(store: EventStore) -> list[tuple[str, str]]:
    return [(r["kind"], r["status"]) for r in read_rows(store, "actions")]


def test_kv_cache_oom_is_fixed_by_the_stated_capacity(
    tmp_path: Path, sqlite_url: str, opener: Callable[[str], EventStore]
) -> None:
    store = opener(sqlite_url)
    with _node(tmp_path) as node:
        node.add_unit(
            UnitSpec(
                name=UNIT,
                args=[*MODEL, "--max-num-seqs", "256", "--max-model-len", "4194304"],
                restart_sec=2.0,
                timeout_stop_sec=5.0,
            )
        )
        node.start(UNIT)
        result = remediate_on_node(
            store, node, UNIT, ask=lambda plan: True, say=lambda line: None, deadline_s=45
        )
        assert result.healthy, result
        argv = node.unit_state(UNIT).running_argv or ()
    (incident,) = read_rows(store, "incidents")
    assert (incident["label"], incident["status"]) == ("kv_cache_oom", "resolved")
    flag = next(r for r in read_rows(store, "actions") if r["kind"] == "set_flag")
    value = argv[argv.index("--max-model-len") + 1]
    assert flag["status"] == "succeeded" and int(value) % 1024 == 0 and int(value) < 4194304
    assert len(result.steps) <= 6


def test_a_wedged_stop_is_killed_waited_for_and_hardened(
    tmp_path: Path, sqlite_url: str, opener: Callable[[str], EventStore]
) -> None:
    store = opener(sqlite_url)
    with _node(tmp_path) as node:
        node.add_unit(
            UnitSpec(
                name=UNIT,
                args=[
                    *MODEL,
                    "--max-num-seqs",
                    "256",
                    "--max-model-len",
                    "131072",
                    "--wedge-on-stop",
                ],
                restart_sec=2.0,
                timeout_stop_sec=3.0,
                kill_mode="mixed",
            )
        )
        node.start(UNIT)
        assert node.run_until(lambda: node.unit_state(UNIT).ready, timeout_s=40)
        node.stop(UNIT)  # an operator's stop: the server ignores SIGTERM

        def done(state: object) -> bool:
            rows = read_rows(store, "actions")
            return bool(rows) and all(r["status"] in ("succeeded", "skipped") for r in rows)

        result = remediate_on_node(
            store,
            node,
            UNIT,
            ask=lambda plan: True,
            say=lambda line: None,
            deadline_s=40,
            healthy=done,
        )
        assert result.healthy, result
        state = node.unit_state(UNIT)
        # 3 s is already shorter than the hardened 30 s: only KillMode changed.
        assert (state.timeout_stop_sec, state.kill_mode) == (3.0, "control-group")
        assert not any(node.gpu_used_bytes([0, 1, 2, 3]).values())
        node.start(UNIT)
        assert node.run_until(lambda: node.unit_state(UNIT).ready, timeout_s=40)
    (incident,) = [i for i in read_rows(store, "incidents")]
    assert incident["label"] == "wedged_stop"
    # The stop timeout had SIGKILLed the wedged run already: the kill is skipped, not run.
    assert _kinds(store) == [
        ("kill", "skipped"),
        ("wait_gpu_free", "succeeded"),
        ("set_unit_option", "skipped"),
        ("set_unit_option", "succeeded"),
    ]


def test_memory_held_by_another_unit_is_freed_by_stopping_that_unit(
    tmp_path: Path, sqlite_url: str, opener: Callable[[str], EventStore]
) -> None:
    store = opener(sqlite_url)
    other = "notebook.service"
    with _node(tmp_path) as node:
        node.add_unit(
            UnitSpec(
                name=other,
                args=[*MODEL, "--max-num-seqs", "256", "--max-model-len", "8192"],
                restart="no",
                timeout_stop_sec=5.0,
            )
        )
        node.add_unit(
            UnitSpec(
                name=UNIT,
                args=[*MODEL, "--max-num-seqs", "256", "--max-model-len", "131072"],
                restart_sec=2.0,
                timeout_stop_sec=5.0,
            )
        )
        node.start(other)
        assert node.run_until(lambda: node.unit_state(other).ready, timeout_s=40)
        node.start(UNIT)
        result = remediate_on_node(
            store, node, UNIT, ask=lambda plan: True, say=lambda line: None, deadline_s=50
        )
        assert result.healthy, result
        assert node.unit_state(other).active_state in ("inactive", "failed")
    incident = next(i for i in read_rows(store, "incidents") if i["unit"] == UNIT)
    assert incident["label"] == "gpu_memory_held"
    stop = next(r for r in read_rows(store, "actions") if r["kind"] == "stop")
    assert (stop["unit"], stop["status"]) == (other, "succeeded")
