"""The action vocabulary and its handlers match one to one, and every handler's guard and
perform run on the sim backend (a real simulated node, its real server processes)."""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest

from advisor.core.steps import ActionStep
from advisor.execution import systemd
from advisor.execution.backends import DryRunBackend
from advisor.execution.guards import judge
from advisor.execution.handlers import ALL_HANDLERS, HANDLERS, describe
from advisor.execution.handlers.base import Context, Verdict
from advisor.sim import SimNode, UnitSpec
from advisor.sim import backend as sim_backend
from advisor.sim.backend import SimBackend

UNIT = "vllm-llama8b.service"
ARGS = [
    "--model",
    "meta-llama/Llama-3.1-8B-Instruct",
    "--max-model-len",
    "32768",
    "--max-num-seqs",
    "256",
    "--speed",
    "30",
]
VOCABULARY = get_args(ActionStep.model_fields["kind"].annotation)
PLAN_START = Context()  # a plan's first step, its incident open


def step(kind: str, **fields: object) -> ActionStep:
    return ActionStep.model_validate({"kind": kind, "unit": UNIT, "why": "test", **fields})


def test_every_kind_has_exactly_one_handler_and_every_handler_a_kind() -> None:
    assert len(VOCABULARY) >= 9 and len(set(VOCABULARY)) == len(VOCABULARY)
    counts = Counter(h.kind for h in ALL_HANDLERS)
    assert {k: counts[k] for k in VOCABULARY} == dict.fromkeys(VOCABULARY, 1)
    assert set(counts) <= set(VOCABULARY)
    assert set(HANDLERS) == set(VOCABULARY)
    assert all(HANDLERS[k].kind == k for k in VOCABULARY)


def test_the_backends_hold_no_kind_of_their_own() -> None:
    """Kind-specific behaviour is in the handlers: the backends never look at a step's kind."""
    for module in (systemd, sim_backend):
        source = inspect.getsource(module)
        assert ".kind" not in source, module.__name__


@pytest.mark.parametrize("kind", VOCABULARY)
def test_every_kind_is_described_and_dry_run(kind: str) -> None:
    fields: dict[str, dict[str, object]] = {
        "set_flag": {"flag": "--max-num-seqs", "value": 128},
        "set_unit_option": {"option": "KillMode", "value": "mixed"},
    }
    s = step(kind, **fields.get(kind, {}))
    what = describe(s)
    assert what and (UNIT in what or kind == "notify")
    backend = DryRunBackend()
    backend.prepare(s, None)
    assert backend.perform(s, None, None).detail == f"dry run: would {what}"
    assert backend.done == [what]


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[SimNode, SimBackend]]:
    with SimNode(tmp_path / "node", release_delay_s=0.4, sample_interval_s=0.2) as node:
        node.add_unit(UnitSpec(UNIT, ARGS, "vLLM Llama 8B", gpus=(2,)))
        node.start(UNIT)
        assert node.run_until(lambda: node.unit_state(UNIT).ready, 30)
        yield node, SimBackend(node)


def run(backend: SimBackend, s: ActionStep, ctx: Context = PLAN_START) -> str:
    """Judge the step as the executor does; it must say run. Then prepare and perform it."""
    before = backend.observe(UNIT)
    assert judge(s, before, ctx) == Verdict("run")
    return backend.perform(s, before, backend.prepare(s, before)).detail


def verdict(backend: SimBackend, s: ActionStep, ctx: Context = PLAN_START) -> Verdict:
    return judge(s, backend.observe(UNIT), ctx)


def test_every_handler_guards_and_performs_on_the_sim(sim: tuple[SimNode, SimBackend]) -> None:
    node, backend = sim
    exercised: set[str] = set()

    def did(s: ActionStep, detail: str, starts: str) -> None:
        assert detail.startswith(starts), detail
        exercised.add(s.kind)

    note = step("notify", why="a person should look")
    did(note, run(backend, note, Context(incident_open=False)), "notified: a person should look")

    flag = step("set_flag", flag="--max-num-seqs", value=128, from_value=256)
    did(flag, run(backend, flag), f"{UNIT} will start with --max-num-seqs 128")
    assert verdict(backend, flag) == Verdict(
        "skip", "--max-num-seqs is already 128 (ExecStart=: `--max-num-seqs 128`)"
    )
    assert (
        verdict(backend, step("set_flag", flag="--max-num-seqs", value=64, from_value=256)).action
        == "stale"
    )  # the command has 128 now, not what the plan saw

    option = step("set_unit_option", option="TimeoutStopSec", value="30s")
    did(option, run(backend, option), f"{UNIT}: TimeoutStopSec=30s")
    assert backend.observe(UNIT).timeout_stop_s == 30.0
    assert verdict(backend, option).action == "skip"

    wedged = backend.observe(UNIT).invocation_id
    kill = step("kill", invocation_id=wedged)
    did(kill, run(backend, kill), f"SIGKILL to every process of {UNIT}")
    assert node.run_until(lambda: node.unit_state(UNIT).ready, 30)  # Restart=on-failure
    again = verdict(backend, kill)
    assert again.action == "skip" and "is over" in again.why

    stop = step("stop")
    did(stop, run(backend, stop), f"stopped {UNIT}: inactive")
    assert verdict(backend, stop).action == "skip"
    assert verdict(backend, step("kill")).action == "skip"  # no process of it is left

    wait = step("wait_gpu_free", seconds=10)
    did(wait, run(backend, wait), "GPU memory free after")
    assert node.gpu_used_bytes()[2] == 0

    reset = step("reset_failed")
    did(reset, run(backend, reset), f"reset-failed {UNIT}")

    hold = step("hold_restarts")
    did(hold, run(backend, hold), f"restarts of {UNIT} held; inactive (")
    assert backend.observe(UNIT).held
    assert verdict(backend, hold).action == "skip"

    restart = step("restart", seconds=60)
    did(restart, run(backend, restart), f"restarted {UNIT} (pid ")
    now = backend.observe(UNIT)
    assert now.running and not now.held
    assert "--max-num-seqs" in now.exec_start[0].argv and "128" in now.exec_start[0].argv
    # Started again after the step the plan knew: every later step is stale.
    moved = Context(previous_after={"invocation_id": wedged}, previous_step=4)
    assert verdict(backend, step("restart"), moved).action == "stale"
    assert verdict(backend, step("restart"), Context(incident_open=False)).action == "stale"

    assert exercised == set(VOCABULARY)


@pytest.mark.parametrize(
    "unit", ["user@1000.service", "user-runtime-dir@1000.service", "systemd-journald.service"]
)
def test_a_service_manager_or_a_part_of_systemd_is_never_acted_on(unit: str) -> None:
    from advisor.core.errors import InputError
    from advisor.execution.primitives import acted_on

    with pytest.raises(InputError, match="not a server"):
        acted_on(ActionStep(kind="stop", unit=unit, why="its lines said so"))
    assert (
        acted_on(ActionStep(kind="stop", unit="vllm@user.service", why="x")) == "vllm@user.service"
    )
