"""The matrix: every unit shape of `unit_shapes.py` under real systemd 252 (a box), with the
advisor inside it as on a host.

For a shape advisor can fix: `advisor watch` with no `--unit` finds the unit; its crash loop
becomes one incident; `advisor remediate UNIT --yes` fixes it — the engine of the new
invocation *received* the intended value (its recorded argv: exactly that change, every other
argument as before), the unit is ready again (its readiness line, this invocation's) —
`advisor rollback` puts every file back byte for byte; then, the old config running again,
`advisor watch --auto` fixes it by policy. For a shape advisor must refuse: nothing is
written, the unit is left as found (still looping, not stopped by advisor), and the message
names the file and the setting — by hand and under `--auto`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.execution.commands import engine_in
from advisor.sim.gpuhost import GpuHost
from advisor.store import open_store
from advisor.views.read.actions import all_actions
from advisor.views.read.reading import read_rows
from tests.boxproc import Watch, advisor_in, watching
from tests.execution.unit_shapes import SHAPES, UNSET, Shape
from tests.waiting import wait

POLICY = (
    "min_confidence = 0.9\ncooldown_s = 0\nmax_actions_per_hour = 60\n[[allow]]\n"
    'units = "*.service"\nkinds = ["hold_restarts", "kill", "wait_gpu_free", '
    '"set_flag", "set_unit_option", "reset_failed", "restart", "stop"]\n'
)


def engine_runs(host: GpuHost) -> list[dict[str, object]]:
    """What each engine process received (argv, and the variables the stand-ins record), in
    order; a container client's own line aside."""
    if not host.argv_log.exists():
        return []
    out = []
    for line in host.argv_log.read_text().splitlines():
        run = json.loads(line)
        if engine_in(run["argv"]) is not None and run.get("engine") not in ("docker", "podman"):
            out.append(run)
    return out


def engine_argvs(host: GpuHost) -> list[list[str]]:
    return [list(run["argv"]) for run in engine_runs(host)]  # type: ignore[call-overload]


def received(host: GpuHost, shape: Shape, before: list[str]) -> None:
    """The last engine got exactly the intended change: on its command line, or — for a
    value the engine reads from its environment — there, its command line untouched."""
    run = engine_runs(host)[-1]
    if shape.flag.isupper():
        assert run["argv"] == before
        assert run["env"][shape.flag] == shape.fixed  # type: ignore[index]
        return
    exactly_changed(before, list(run["argv"]), shape)  # type: ignore[call-overload]


def files_under(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def exactly_changed(before: list[str], after: list[str], shape: Shape) -> None:
    """`after` is `before` with the flag's value set to `shape.fixed` (in place, or added)."""
    assert shape.fixed is not None
    spellings = {shape.flag}
    if after[: len(before)] == before and after[len(before) :] == [shape.flag, shape.fixed]:
        return
    assert len(after) == len(before), (before, after)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed, after
    for i in changed:
        word = after[i]
        if word.startswith(tuple(s + "=" for s in spellings)):
            assert word.endswith("=" + shape.fixed), word
        else:
            assert after[i - 1] in spellings and word == shape.fixed, (before[i], word)


def state(host: GpuHost, unit: str) -> dict[str, str]:
    return host.box.show(unit, "ActiveState", "SubState", "InvocationID", "DropInPaths")


def ready_now(host: GpuHost, unit: str, cue: str) -> bool:
    now = state(host, unit)
    if now["ActiveState"] != "active" or not now["InvocationID"]:
        return False
    said = host.box.journalctl(f"_SYSTEMD_INVOCATION_ID={now['InvocationID']}", "-o", "cat")
    return cue in said


READY = {
    "vllm": "Application startup complete",
    "sglang": "The server is fired up and ready to roll",
    "tgi": "Connected",
    "llamacpp": "server is listening on",
}


def open_incident(url: str, unit: str) -> dict[str, object] | None:
    store = open_store(url)
    try:
        found = [i for i in read_rows(store, "incidents", unit=unit) if i["status"] == "open"]
    finally:
        store.close()
    return found[-1] if found else None


def start_loop(host: GpuHost, shape: Shape, folder: Path) -> None:
    shape.install(host, folder)
    host.box.systemctl("start", shape.unit)


def watched(watch: Watch, unit: str) -> bool:
    return any(line.startswith("watching ") and unit in line for line in watch.lines)


@pytest.mark.parametrize("shape", [s for s in SHAPES if s.fixed], ids=lambda s: s.name)
def test_a_shape_advisor_can_fix_is_fixed_by_hand_rolled_back_and_fixed_by_policy(
    gpu_host: GpuHost, sqlite_url: str, tmp_path: Path, shape: Shape
) -> None:
    host, unit = gpu_host, shape.unit
    gpus = ("--gpus-from", str(host.view))
    found = files_under(host.units_dir)
    with watching(host.box, sqlite_url, *gpus, command=("watch",)) as watch:
        watch.wait_until_watching()
        start_loop(host, shape, tmp_path / "files")
        found = files_under(host.units_dir)
        wait("watch to find the unit", lambda: watched(watch, unit), watch.proc, timeout=60)
        wait("an open incident", lambda: open_incident(sqlite_url, unit) is not None, timeout=120)
        incident = open_incident(sqlite_url, unit)
        assert incident is not None and incident["label"] == shape.label
        before = engine_argvs(host)[-1]
        done = advisor_in(host.box, sqlite_url, "remediate", unit, "--yes", *gpus, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        received(host, shape, before)
        assert ready_now(host, unit, READY[shape.engine])
        assert watch.stop() == 0
    # Every file as it was before advisor touched the unit.
    store = open_store(sqlite_url)
    flags = [r for r in all_actions(store) if r.kind == "set_flag" and r.status == "succeeded"]
    store.close()
    for row in reversed(flags):
        undone = advisor_in(host.box, sqlite_url, "rollback", row.action_id)
        assert undone.returncode == 0, undone.stdout + undone.stderr
    assert files_under(host.units_dir) == found
    # The old config again: the loop again; this time policy fixes it.
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    started = len(engine_argvs(host))
    host.box.systemctl("restart", unit)
    with watching(
        host.box, sqlite_url, "--auto", "--policy", str(policy), *gpus, command=("watch",)
    ) as watch:
        watch.wait_until_watching()

        def fixed() -> bool:
            return len(engine_runs(host)) > started + 1 and ready_now(
                host, unit, READY[shape.engine]
            )

        wait("the policy's fix", fixed, watch.proc, timeout=240)
        received(host, shape, before)
        assert watch.stop() == 0


def refused_steps(url: str, unit: str) -> list[str]:
    store = open_store(url)
    try:
        return [
            r.detail or ""
            for r in all_actions(store)
            if r.unit == unit and r.kind == "set_flag" and r.status == "failed"
        ]
    finally:
        store.close()


@pytest.mark.parametrize("shape", [s for s in SHAPES if not s.fixed], ids=lambda s: s.name)
def test_a_shape_advisor_cannot_fix_is_refused_with_nothing_changed(
    gpu_host: GpuHost, sqlite_url: str, tmp_path: Path, shape: Shape
) -> None:
    host, unit = gpu_host, shape.unit
    gpus = ("--gpus-from", str(host.view))
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    auto = ("--auto", "--policy", str(policy), *gpus)
    with watching(host.box, sqlite_url, *auto, command=("watch",)) as watch:
        watch.wait_until_watching()
        start_loop(host, shape, tmp_path / "files")
        found = files_under(host.units_dir)
        wait("watch to find the unit", lambda: watched(watch, unit), watch.proc, timeout=60)
        wait("the policy's refusal", lambda: bool(refused_steps(sqlite_url, unit)), timeout=180)
        assert watch.stop() == 0
    (why,) = refused_steps(sqlite_url, unit)
    for name in (*shape.names, "nothing was changed"):
        assert name in why, (name, why)
    assert files_under(host.units_dir) == found
    # As found: still looping under its own Restart=, never stopped by advisor.
    runs = len(engine_argvs(host))
    wait("the loop to go on", lambda: len(engine_argvs(host)) > runs + 1, timeout=60)
    assert "Stopping " not in host.box.journalctl("-u", unit, "-o", "cat")
    # By hand: the plan has run to its end and the unit still fails — a new plan, refused too.
    done = advisor_in(host.box, sqlite_url, "remediate", unit, "--yes", *gpus, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    for name in (*shape.names, "nothing was changed"):
        assert name in done.stdout, (name, done.stdout)
    assert files_under(host.units_dir) == found
    assert "Stopping " not in host.box.journalctl("-u", unit, "-o", "cat")


def test_a_change_that_does_not_reach_the_engine_fails_is_rolled_back_and_says_so(
    gpu_host: GpuHost, sqlite_url: str, tmp_path: Path
) -> None:
    host, unit = gpu_host, UNSET.unit
    gpus = ("--gpus-from", str(host.view))
    with watching(host.box, sqlite_url, *gpus, command=("watch",)) as watch:
        watch.wait_until_watching()
        start_loop(host, UNSET, tmp_path / "files")
        found = files_under(host.units_dir)
        wait("an open incident", lambda: open_incident(sqlite_url, unit) is not None, timeout=120)
        done = advisor_in(host.box, sqlite_url, "remediate", unit, "--yes", *gpus, timeout=300)
        assert watch.stop() == 0
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the engine received --max-num-seqs 1024" in done.stdout, done.stdout
    assert "advisor's change was rolled back" in done.stdout, done.stdout
    assert files_under(host.units_dir) == found  # the override is gone again
    store = open_store(sqlite_url)
    statuses = {(r.kind, r.status) for r in all_actions(store)}
    store.close()
    assert ("set_flag", "rolled_back") in statuses and ("restart", "failed") in statuses
