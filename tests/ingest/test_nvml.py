"""Tests for ingest.cgroup (PID -> unit), ingest.nvml (the NVML sampler, against a fake pynvml
that raises the REAL pynvml exception classes; the sampling loop; the cost probe) and
ingest.gpu_recording (recordings)."""

from __future__ import annotations

import ctypes
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pynvml
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.core.errors import GpuUnavailableError, PrerequisiteError
from advisor.core.payloads import GpuProcess, GpuSampled
from ingest.cgroup import unit_for_pid
from ingest.gpu_recording import MAX_LINE_BYTES, parse_recording_line, recording_line
from ingest.nvml import NvmlSampler
from ingest.sampling import measure_sample_cost, sampling_loop

GiB = 1024**3
DOCKER_ID = "3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e"


# --------------------------------------------------------------------------------------------
# Fake /proc


def make_proc(
    root: Path, pid: int, cgroup: bytes | str | None, comm: bytes | str | None = None
) -> None:
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    if cgroup is not None:
        (d / "cgroup").write_bytes(cgroup.encode() if isinstance(cgroup, str) else cgroup)
    if comm is not None:
        (d / "comm").write_bytes(comm.encode() if isinstance(comm, str) else comm)


# --------------------------------------------------------------------------------------------
# Fake pynvml: same function names, raises the real pynvml exception classes


def nvml_error(code: int) -> pynvml.NVMLError:
    # NVMLError.__new__ maps the code to the real subclass (NVMLError_GpuIsLost, ...).
    return pynvml.NVMLError(code)


def proc(pid: int, used: int | None) -> SimpleNamespace:
    return SimpleNamespace(
        pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF
    )


@dataclass
class FakeGpu:
    name: str | bytes = "NVIDIA H100 80GB HBM3"
    uuid: str | bytes = "GPU-00000000-0000-0000-0000-000000000000"
    total: int = 80 * GiB
    used: int = 1 * GiB
    util_gpu: int = 0
    util_mem: int = 0
    temperature: int = 35
    power_mw: int = 70_000
    compute: list[SimpleNamespace] = field(default_factory=list)
    graphics: list[SimpleNamespace] = field(default_factory=list)
    # metric name -> NVML return code to raise instead of answering
    errors: dict[str, int] = field(default_factory=dict)


class FakeNvml:
    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        *,
        init_error: BaseException | None = None,
        handle_errors: dict[int, int] | None = None,
    ) -> None:
        self.gpus = gpus if gpus is not None else []
        self.init_error = init_error
        self.handle_errors = handle_errors or {}
        self.calls: Counter[str] = Counter()
        self.refcount = 0

    def __getattr__(self, name: str) -> Any:
        # NVMLError_* classes come from the real module
        if name.startswith("NVMLError_"):
            return getattr(pynvml, name)
        raise AttributeError(name)

    def _metric(self, h: FakeGpu, metric: str) -> None:
        self.calls[metric] += 1
        if self.refcount <= 0:
            raise nvml_error(pynvml.NVML_ERROR_UNINITIALIZED)
        if metric in h.errors:
            raise nvml_error(h.errors[metric])

    def nvmlInit(self) -> None:
        self.calls["init"] += 1
        if self.init_error is not None:
            raise self.init_error
        self.refcount += 1

    def nvmlShutdown(self) -> None:
        self.calls["shutdown"] += 1
        if self.refcount <= 0:
            raise nvml_error(pynvml.NVML_ERROR_UNINITIALIZED)
        self.refcount -= 1

    def nvmlDeviceGetCount(self) -> int:
        self.calls["count"] += 1
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        self.calls["handle"] += 1
        if i in self.handle_errors:
            raise nvml_error(self.handle_errors[i])
        return self.gpus[i]

    def nvmlDeviceGetName(self, h: FakeGpu) -> str | bytes:
        self._metric(h, "name")
        return h.name

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str | bytes:
        self._metric(h, "uuid")
        return h.uuid

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> SimpleNamespace:
        self._metric(h, "memory")
        return SimpleNamespace(total=h.total, used=h.used, free=h.total - h.used)

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> SimpleNamespace:
        self._metric(h, "utilization")
        return SimpleNamespace(gpu=h.util_gpu, memory=h.util_mem)

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:
        self._metric(h, "temperature")
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return h.temperature

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        self._metric(h, "power")
        return h.power_mw

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeGpu) -> list[SimpleNamespace]:
        self._metric(h, "compute")
        return list(h.compute)

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: FakeGpu) -> list[SimpleNamespace]:
        self._metric(h, "graphics")
        return list(h.graphics)


def test_fake_uses_real_exception_hierarchy() -> None:
    for name in (
        "NVMLError_LibraryNotFound",
        "NVMLError_DriverNotLoaded",
        "NVMLError_LibRmVersionMismatch",
        "NVMLError_NoPermission",
        "NVMLError_NotSupported",
        "NVMLError_GpuIsLost",
    ):
        cls = getattr(pynvml, name)
        assert issubclass(cls, pynvml.NVMLError)
        assert getattr(FakeNvml(), name) is cls
    assert type(nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)) is pynvml.NVMLError_GpuIsLost


# --------------------------------------------------------------------------------------------
# unit_for_pid


@pytest.mark.parametrize(
    ("content", "unit"),
    [
        ("0::/system.slice/vllm.service\n", "vllm.service"),
        ("0::/system.slice/vllm.service/payload\n", "vllm.service"),
        (
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service\n",
            "foo.service",
        ),
        ("0::/user.slice/user-1000.slice/session-4.scope\n", "session-4.scope"),
        ("0::/init.scope\n", "init.scope"),
        (f"0::/system.slice/docker-{DOCKER_ID}.scope\n", f"docker-{DOCKER_ID}.scope"),
        (
            "0::/system.slice/system-vllm\\x2dserve.slice/vllm-serve@llama.service\n",
            "vllm-serve@llama.service",
        ),
        # the unit's cgroup was removed while the process lived on
        ("0::/system.slice/vllm.service (deleted)\n", "vllm.service"),
        # cgroup v1: the name=systemd hierarchy decides, whatever the controllers say
        (
            "12:memory:/user.slice\n"
            "11:cpu,cpuacct:/system.slice/other.service\n"
            "1:name=systemd:/system.slice/sglang.service\n",
            "sglang.service",
        ),
        # hybrid: v1 name=systemd plus the unified hierarchy
        (
            "1:name=systemd:/system.slice/tgi.service\n0::/system.slice/tgi.service\n",
            "tgi.service",
        ),
        ("0::/\n", None),
        ("0::/system.slice\n", None),
        (f"0::/docker/{DOCKER_ID}\n", None),  # cgroupfs driver: no systemd unit
        ("12:memory:/system.slice/x.service\n", None),  # only non-systemd v1 controllers
        ("", None),
        ("garbage without colons\n\n:::\n", None),
        ("0::/system.slice/$(rm -rf ~).service\n", None),  # not a valid unit name
        ("0::/system.slice/" + "a" * 300 + ".service\n", None),  # too long for a unit name
    ],
)
def test_unit_for_pid(tmp_path: Path, content: str, unit: str | None) -> None:
    make_proc(tmp_path, 4242, content)
    assert unit_for_pid(4242, tmp_path) == unit


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe\x00\x01binary\x00garbage",
        b"0::/system.slice/\xffvllm.service\n",
        b"\x00" * 100_000,
        b"0::" + b"/x" * 500_000,
    ],
)
def test_unit_for_pid_garbage(tmp_path: Path, raw: bytes) -> None:
    make_proc(tmp_path, 7, raw)
    assert unit_for_pid(7, tmp_path) is None


def test_unit_for_pid_reads_a_bounded_prefix(tmp_path: Path) -> None:
    make_proc(tmp_path, 7, "x" * (64 * 1024) + "\n0::/system.slice/late.service\n")
    assert unit_for_pid(7, tmp_path) is None


def test_unit_for_pid_vanished_or_unreadable(tmp_path: Path) -> None:
    assert unit_for_pid(999_999, tmp_path) is None  # no such pid
    assert unit_for_pid(1, tmp_path / "missing-root") is None
    make_proc(tmp_path, 8, None)  # pid dir without cgroup file
    assert unit_for_pid(8, tmp_path) is None
    (tmp_path / "9" / "cgroup").mkdir(parents=True)  # a directory, not a file
    assert unit_for_pid(9, tmp_path) is None
    assert unit_for_pid(0, tmp_path) is None
    assert unit_for_pid(-1, tmp_path) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unit_for_pid_permission_denied(tmp_path: Path) -> None:
    make_proc(tmp_path, 10, "0::/system.slice/vllm.service\n")
    (tmp_path / "10" / "cgroup").chmod(0)
    assert unit_for_pid(10, tmp_path) is None


def test_unit_for_pid_real_proc_self() -> None:
    # Whatever this process's cgroup is, the call must not raise and must give a unit or None.
    unit = unit_for_pid(os.getpid())
    assert unit is None or unit.endswith((".service", ".scope"))


# --------------------------------------------------------------------------------------------
# NvmlSampler: open()


NO_DRIVER = "no NVIDIA driver: NVML Shared Library Not Found (is the NVIDIA driver installed?)"


def test_open_no_library() -> None:
    fake = FakeNvml(init_error=nvml_error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    with pytest.raises(GpuUnavailableError) as info:
        NvmlSampler("h", nvml=fake).open()
    assert str(info.value) == NO_DRIVER
    assert isinstance(info.value.__cause__, pynvml.NVMLError_LibraryNotFound)
    assert isinstance(info.value, PrerequisiteError) and info.value.exit_code == 2


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            nvml_error(pynvml.NVML_ERROR_DRIVER_NOT_LOADED),
            "NVIDIA driver not loaded: Driver Not Loaded",
        ),
        (
            nvml_error(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH),
            "NVIDIA driver/library version mismatch: RM has detected an NVML/RM version mismatch.",
        ),
        (
            nvml_error(pynvml.NVML_ERROR_NO_PERMISSION),
            "no permission to use NVML: Insufficient Permissions",
        ),
        (nvml_error(pynvml.NVML_ERROR_UNKNOWN), "NVML initialisation failed: Unknown Error"),
        (
            OSError("libnvidia-ml.so.1: wrong ELF class"),
            "cannot load the NVML library: libnvidia-ml.so.1",
        ),
    ],
)
def test_open_failures_are_one_clear_line(error: BaseException, expected: str) -> None:
    fake = FakeNvml(init_error=error)
    with pytest.raises(GpuUnavailableError) as info:
        NvmlSampler("h", nvml=fake).open()
    message = str(info.value)
    assert message.startswith(expected)
    assert "\n" not in message
    assert info.value.__cause__ is error


def test_open_zero_devices_shuts_down() -> None:
    fake = FakeNvml([])
    with pytest.raises(GpuUnavailableError, match=r"^NVML found no GPU$"):
        NvmlSampler("h", nvml=fake).open()
    assert fake.calls["init"] == 1 and fake.calls["shutdown"] == 1 and fake.refcount == 0


def test_open_skips_inaccessible_gpu_and_fails_when_none_left() -> None:
    fake = FakeNvml([FakeGpu(), FakeGpu()], handle_errors={0: pynvml.NVML_ERROR_NO_PERMISSION})
    with NvmlSampler("h", nvml=fake) as sampler:
        assert sampler.device_count == 1
        _, samples = sampler.sample()
        assert [s.index for s in samples] == [1]

    fake = FakeNvml(
        [FakeGpu(), FakeGpu()],
        handle_errors={0: pynvml.NVML_ERROR_NO_PERMISSION, 1: pynvml.NVML_ERROR_NO_PERMISSION},
    )
    with pytest.raises(GpuUnavailableError, match="none is usable"):
        NvmlSampler("h", nvml=fake).open()
    assert fake.refcount == 0


def test_open_lost_gpu_at_discovery() -> None:
    fake = FakeNvml([FakeGpu()], handle_errors={0: pynvml.NVML_ERROR_GPU_IS_LOST})
    with pytest.raises(GpuUnavailableError, match="GPU 0 unavailable: GPU is lost"):
        NvmlSampler("h", nvml=fake).open()
    assert fake.refcount == 0


def test_lifecycle_is_balanced_and_idempotent() -> None:
    fake = FakeNvml([FakeGpu()])
    sampler = NvmlSampler("h", nvml=fake)
    with pytest.raises(RuntimeError):
        sampler.sample()
    with sampler:
        assert sampler.is_open
        sampler.open()  # no second nvmlInit
        sampler.sample()
    assert not sampler.is_open
    sampler.close()  # closing twice is harmless
    assert fake.calls["init"] == 1 and fake.calls["shutdown"] == 1 and fake.refcount == 0


def test_process_every_must_be_positive() -> None:
    with pytest.raises(ValueError):
        NvmlSampler("h", nvml=FakeNvml(), process_every=0)


# --------------------------------------------------------------------------------------------
# NvmlSampler: sample()


def two_gpu_machine(tmp_path: Path) -> FakeNvml:
    make_proc(tmp_path, 1234, "0::/system.slice/vllm.service\n", "VLLM::EngineCor\n")
    make_proc(tmp_path, 1240, f"0::/system.slice/docker-{DOCKER_ID}.scope\n", "python3\n")
    make_proc(
        tmp_path,
        2000,
        "0::/user.slice/user-1000.slice/user@1000.service/app.slice/bench.service\n",
        "python\n",
    )
    make_proc(tmp_path, 4000, b"\xff\x00garbage", b"\xffbad\x00name\n")
    # pid 3000 has already exited: no /proc entry
    gpu0 = FakeGpu(
        name="NVIDIA H100 80GB HBM3",
        uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000",
        used=72 * GiB,
        util_gpu=97,
        util_mem=60,
        temperature=71,
        power_mw=612_345,
        compute=[proc(1234, 70 * GiB), proc(1240, None)],
    )
    gpu1 = FakeGpu(
        name=b"NVIDIA H100 80GB HBM3",  # older bindings return bytes
        uuid=b"GPU-bbbbbbbb-0000-0000-0000-000000000000",
        used=30 * GiB,
        compute=[proc(2000, None), proc(3000, 10 * GiB)],
        graphics=[proc(2000, 20 * GiB), proc(4000, 512 * 1024**2)],
    )
    return FakeNvml([gpu0, gpu1])


def test_two_gpus_with_processes_mapped_to_units(tmp_path: Path) -> None:
    fake = two_gpu_machine(tmp_path)
    with NvmlSampler("gpu-node-1", nvml=fake, proc_root=tmp_path) as sampler:
        time_us, samples = sampler.sample(time_us=1_700_000_000_000_000)
    assert time_us == 1_700_000_000_000_000
    assert len(samples) == 2
    g0, g1 = samples
    assert g0 == GpuSampled(
        origin="nvml",
        host="gpu-node-1",
        index=0,
        uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000",
        name="NVIDIA H100 80GB HBM3",
        memory_total_bytes=80 * GiB,
        memory_used_bytes=72 * GiB,
        memory_free_bytes=8 * GiB,
        utilization_gpu_pct=97,
        utilization_memory_pct=60,
        temperature_c=71,
        power_w=612.345,
        processes=(
            GpuProcess(pid=1234, used_bytes=70 * GiB, unit="vllm.service", name="VLLM::EngineCor"),
            GpuProcess(pid=1240, used_bytes=None, unit=f"docker-{DOCKER_ID}.scope", name="python3"),
        ),
    )
    assert g1.index == 1
    assert g1.name == "NVIDIA H100 80GB HBM3"
    assert g1.uuid == "GPU-bbbbbbbb-0000-0000-0000-000000000000"
    assert g1.processes == (
        # in both lists: deduplicated, the memory figure taken from the list that has one
        GpuProcess(pid=2000, used_bytes=20 * GiB, unit="bench.service", name="python"),
        GpuProcess(pid=3000, used_bytes=10 * GiB, unit=None, name=None),  # exited
        GpuProcess(pid=4000, used_bytes=512 * 1024**2, unit=None, name="\ufffdbadname"),
    )


def test_identity_and_handles_fetched_once(tmp_path: Path) -> None:
    fake = two_gpu_machine(tmp_path)
    with NvmlSampler("h", nvml=fake, proc_root=tmp_path) as sampler:
        for _ in range(5):
            sampler.sample()
    assert fake.calls["init"] == 1
    assert fake.calls["count"] == 1
    assert fake.calls["handle"] == 2
    assert fake.calls["name"] == 2 and fake.calls["uuid"] == 2
    assert fake.calls["memory"] == 10


def test_default_time_is_now(tmp_path: Path) -> None:
    with NvmlSampler("h", nvml=two_gpu_machine(tmp_path), proc_root=tmp_path) as sampler:
        before = time.time_ns() // 1000
        time_us, _ = sampler.sample()
        after = time.time_ns() // 1000
    assert before <= time_us <= after


def test_not_supported_metrics_become_none(tmp_path: Path) -> None:
    ns = pynvml.NVML_ERROR_NOT_SUPPORTED
    gpu = FakeGpu(
        compute=[proc(1, 5)],
        errors={
            "utilization": ns,
            "temperature": ns,
            "power": ns,
            "compute": ns,
            "graphics": ns,
            "name": ns,
            "uuid": pynvml.NVML_ERROR_NO_PERMISSION,
        },
    )
    with NvmlSampler("h", nvml=FakeNvml([gpu]), proc_root=tmp_path) as sampler:
        _, [s] = sampler.sample()
    assert s.memory_total_bytes == 80 * GiB
    assert s.utilization_gpu_pct is None and s.utilization_memory_pct is None
    assert s.temperature_c is None and s.power_w is None
    assert s.processes is None
    assert s.name is None and s.uuid is None
    line = recording_line(0, "h", [s])
    assert b"null" not in line and b"processes" not in line


def test_one_process_list_not_supported_other_used(tmp_path: Path) -> None:
    gpu = FakeGpu(
        compute=[proc(1, 5)],
        graphics=[proc(2, 6)],
        errors={"compute": pynvml.NVML_ERROR_NOT_SUPPORTED},
    )
    with NvmlSampler("h", nvml=FakeNvml([gpu]), proc_root=tmp_path) as sampler:
        _, [s] = sampler.sample()
    assert s.processes == (GpuProcess(pid=2, used_bytes=6),)


def test_empty_process_list_is_empty_not_none(tmp_path: Path) -> None:
    with NvmlSampler("h", nvml=FakeNvml([FakeGpu()]), proc_root=tmp_path) as sampler:
        _, [s] = sampler.sample()
    assert s.processes == ()


def test_memory_not_supported_leaves_gpu_out(tmp_path: Path) -> None:
    fake = FakeNvml([FakeGpu(errors={"memory": pynvml.NVML_ERROR_NOT_SUPPORTED}), FakeGpu()])
    with NvmlSampler("h", nvml=fake, proc_root=tmp_path) as sampler:
        _, samples = sampler.sample()
    assert [s.index for s in samples] == [1]


@pytest.mark.parametrize("metric", ["memory", "utilization", "power", "compute"])
def test_gpu_lost_mid_sample(tmp_path: Path, metric: str) -> None:
    fake = two_gpu_machine(tmp_path)
    with NvmlSampler("h", nvml=fake, proc_root=tmp_path) as sampler:
        sampler.sample()
        fake.gpus[1].errors[metric] = pynvml.NVML_ERROR_GPU_IS_LOST
        with pytest.raises(GpuUnavailableError) as info:
            sampler.sample()
    message = str(info.value)
    assert message == "GPU 1 (GPU-bbbbbbbb-0000-0000-0000-000000000000): GPU is lost"
    assert isinstance(info.value.__cause__, pynvml.NVMLError_GpuIsLost)
    assert fake.refcount == 0  # the context manager still shut NVML down


def test_nvml_shut_down_underneath_is_unavailable(tmp_path: Path) -> None:
    fake = two_gpu_machine(tmp_path)
    with NvmlSampler("h", nvml=fake, proc_root=tmp_path) as sampler:
        fake.refcount = 0  # someone else called nvmlShutdown
        with pytest.raises(GpuUnavailableError, match="Uninitialized"):
            sampler.sample()


def test_process_lists_only_every_nth_sample(tmp_path: Path) -> None:
    fake = two_gpu_machine(tmp_path)
    with NvmlSampler("h", nvml=fake, proc_root=tmp_path, process_every=3) as sampler:
        got = [sampler.sample()[1] for _ in range(7)]
    with_processes = [all(s.processes is not None for s in samples) for samples in got]
    without = [all(s.processes is None for s in samples) for samples in got]
    assert with_processes == [True, False, False, True, False, False, True]
    assert without == [not x for x in with_processes]
    assert fake.calls["compute"] == 3 * 2
    assert fake.calls["memory"] == 7 * 2


# --------------------------------------------------------------------------------------------
# The real pynvml on this machine


def _nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvml_library_present(), reason="libnvidia-ml is installed here")
def test_real_pynvml_without_gpu() -> None:
    sampler = NvmlSampler("h")
    with pytest.raises(GpuUnavailableError) as info:
        sampler.open()
    assert str(info.value) == NO_DRIVER
    assert isinstance(info.value.__cause__, pynvml.NVMLError_LibraryNotFound)
    assert not sampler.is_open


@pytest.mark.skipif(not _nvml_library_present(), reason="no libnvidia-ml (no NVIDIA driver)")
def test_real_pynvml_with_gpu() -> None:
    with NvmlSampler() as sampler:
        time_us, samples = sampler.sample()
        cost = measure_sample_cost(sampler, 20)
        driver = sampler.driver_version()
    assert driver is not None and re.fullmatch(r"\d+(\.\d+)+", driver), driver
    assert samples and time_us > 0
    for s in samples:
        assert s.memory_total_bytes > 0
        assert s.memory_used_bytes <= s.memory_total_bytes
        assert s.processes is not None
    assert parse_recording_line(recording_line(time_us, samples[0].host, samples)) == (
        time_us,
        samples,
    )
    assert cost["n"] == 20 and cost["wall_ms_mean"] > 0


# --------------------------------------------------------------------------------------------
# Recordings

_chars = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
_text = st.text(_chars, max_size=40)
_i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_u63 = st.integers(min_value=0, max_value=2**63 - 1)

_processes = st.builds(
    GpuProcess,
    pid=st.integers(min_value=0, max_value=2**31),
    used_bytes=st.none() | _u63,
    unit=st.none() | _text,
    name=st.none() | _text,
)


@st.composite
def _tick(draw: st.DrawFn) -> tuple[int, str, list[GpuSampled]]:
    host = draw(st.text(_chars, min_size=1, max_size=40))
    samples = draw(
        st.lists(
            st.builds(
                GpuSampled,
                origin=st.sampled_from(["nvml", "nvidia-smi"]),
                host=st.just(host),
                index=st.integers(min_value=0, max_value=64),
                uuid=st.none() | _text,
                name=st.none() | _text,
                memory_total_bytes=_u63,
                memory_used_bytes=_u63,
                memory_free_bytes=_u63,
                utilization_gpu_pct=st.none() | _i64,
                utilization_memory_pct=st.none() | _i64,
                temperature_c=st.none() | _i64,
                power_w=st.none() | st.floats(allow_nan=False, allow_infinity=False),
                processes=st.none() | st.lists(_processes, max_size=4).map(tuple),
            ),
            max_size=4,
        )
    )
    return draw(_u63), host, samples


@given(_tick())
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_recording_round_trip(tick: tuple[int, str, list[GpuSampled]]) -> None:
    time_us, host, samples = tick
    line = recording_line(time_us, host, samples)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    data = orjson.loads(line)
    assert list(data) == ["time_us", "host", "gpus"]
    assert all("type" not in g for g in data["gpus"])
    assert parse_recording_line(line) == (time_us, samples)
    assert parse_recording_line(line.decode()) == (time_us, samples)


def test_recording_of_a_real_sample_round_trips(tmp_path: Path) -> None:
    with NvmlSampler("gpu-node-1", nvml=two_gpu_machine(tmp_path), proc_root=tmp_path) as sampler:
        time_us, samples = sampler.sample()
    line = recording_line(time_us, "gpu-node-1", samples)
    assert b"null" not in line
    assert parse_recording_line(line) == (time_us, samples)


def _sample(**overrides: Any) -> GpuSampled:
    fields: dict[str, Any] = {
        "origin": "nvml",
        "host": "h",
        "index": 0,
        "memory_total_bytes": 10,
        "memory_used_bytes": 4,
        "memory_free_bytes": 6,
    }
    fields.update(overrides)
    return GpuSampled(**fields)


@pytest.mark.parametrize(
    ("time_us", "host", "samples"),
    [
        (-1, "h", []),
        (2**63, "h", []),
        (True, "h", []),
        (1, "", []),
        (1, "\ud800", []),  # not encodable as UTF-8
        (1, "h", [_sample(host="other")]),
        (1, "h", [_sample(name="a\x00b")]),
        (1, "h", [_sample(uuid="u" * 5000)]),
        (1, "h", [_sample(processes=(GpuProcess(pid=1, unit="\udcff.service"),))]),
    ],
)
def test_recording_line_refuses_what_cannot_be_read_back(
    time_us: int, host: str, samples: list[GpuSampled]
) -> None:
    with pytest.raises(ValueError) as info:
        recording_line(time_us, host, samples)
    assert str(info.value).isprintable()


def test_recording_defaults_origin_host_and_accepts_type() -> None:
    gpu = {"index": 0, "memory_total_bytes": 10, "memory_used_bytes": 4, "memory_free_bytes": 6}
    line = orjson.dumps({"time_us": 5, "host": "h", "gpus": [gpu, {**gpu, "type": "gpu.sampled"}]})
    time_us, samples = parse_recording_line(line)
    assert time_us == 5
    assert [(s.origin, s.host, s.type) for s in samples] == [("nvml", "h", "gpu.sampled")] * 2


_GOOD_GPU = {"index": 0, "memory_total_bytes": 10, "memory_used_bytes": 4, "memory_free_bytes": 6}


def _line(**overrides: Any) -> bytes:
    base: dict[str, Any] = {"time_us": 5, "host": "h", "gpus": [_GOOD_GPU]}
    base.update(overrides)
    return orjson.dumps(base)


def _gpu_line(**overrides: Any) -> bytes:
    return _line(gpus=[{**_GOOD_GPU, **overrides}])


MALFORMED: list[tuple[str, bytes | str]] = [
    ("empty", b""),
    ("blank", b"   \n"),
    ("not json", b"time_us=5 host=h"),
    ("truncated", _line()[:-3]),
    ("array", b"[1, 2]"),
    ("string", b'"hello"'),
    ("null", b"null"),
    ("time as string", _line(time_us="5")),
    ("time as float", _line(time_us=5.0)),
    ("time as bool", _line(time_us=True)),
    ("time negative", _line(time_us=-1)),
    ("time huge", b'{"time_us": 100000000000000000000000000000, "host": "h", "gpus": []}'),
    ("host missing", orjson.dumps({"time_us": 5, "gpus": []})),
    ("host empty", _line(host="")),
    ("host number", _line(host=5)),
    ("gpus missing", orjson.dumps({"time_us": 5, "host": "h"})),
    ("gpus object", _line(gpus={"0": _GOOD_GPU})),
    ("gpu not object", _line(gpus=[1])),
    ("extra key", _line(extra=1)),
    ("gpu extra key", _gpu_line(fan=50)),
    ("wrong type tag", _gpu_line(type="log.recorded")),
    ("wrong origin", _gpu_line(origin="dcgm")),
    ("other host", _gpu_line(host="other")),
    ("negative memory", _gpu_line(memory_used_bytes=-1)),
    ("memory as string", _gpu_line(memory_used_bytes="4")),
    ("memory as float", _gpu_line(memory_used_bytes=4.5)),
    ("memory missing", _line(gpus=[{"index": 0}])),
    ("negative index", _gpu_line(index=-1)),
    ("processes not list", _gpu_line(processes="1234")),
    ("process without pid", _gpu_line(processes=[{"used_bytes": 5}])),
    ("process pid string", _gpu_line(processes=[{"pid": "1"}])),
    ("power as string", _gpu_line(power_w="70")),
    ("1 MB host", _line(host="x" * 1_000_000)),
    ("1 MB gpu name", _gpu_line(name="n" * 1_000_000)),
    ("1 MB key", orjson.dumps({"k" * 1_000_000: 1, "time_us": 5, "host": "h", "gpus": []})),
    ("1 MB garbage", b"\x01" * 1_000_000),
    ("NUL byte", _line()[:10] + b"\x00" + _line()[10:]),
    ("NUL escape in host", _line(host="a\x00b")),
    ("NUL escape in process name", _gpu_line(processes=[{"pid": 1, "name": "x\x00"}])),
    ("invalid UTF-8", b'{"time_us": 5, "host": "\xff\xfe", "gpus": []}'),
    ("lone surrogate", '{"time_us": 5, "host": "\ud800", "gpus": []}'),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000),
    ("deep nesting in a gpu", _gpu_line(processes=[{"pid": 1, "name": []}])[:-3] + b"[" * 500),
    (
        "nesting within orjson's limit",
        b'{"time_us":1,"host":"h","gpus":[{"index":0,"x":' + b"[" * 900 + b"]" * 900 + b"}]}",
    ),
    ("key with newline", _gpu_line(**{"evil\nkey\r\x1b[2J": 1})),
    ("nested key with newline", _gpu_line(processes=[{"pid": 1, "a\nb": 2}])),
    ("NaN", b'{"time_us": NaN, "host": "h", "gpus": []}'),
    ("over the size limit", b" " * (MAX_LINE_BYTES + 1)),
]


@pytest.mark.parametrize(("case", "line"), MALFORMED, ids=[c for c, _ in MALFORMED])
def test_malformed_recording_lines(case: str, line: bytes | str) -> None:
    with pytest.raises(ValueError) as info:
        parse_recording_line(line)
    message = str(info.value)
    assert message and message.isprintable() and len(message) < 500, case


def _parse_or_one_line_error(line: bytes) -> None:
    try:
        parse_recording_line(line)
    except ValueError as e:
        assert "\n" not in str(e) and "\r" not in str(e) and len(str(e)) < 500


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(raw: bytes) -> None:
    _parse_or_one_line_error(raw)


_json = st.recursive(
    st.none() | st.booleans() | _i64 | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(
    st.dictionaries(
        st.sampled_from(["time_us", "host", "gpus", "x"]),
        _json
        | st.lists(st.dictionaries(st.sampled_from([*_GOOD_GPU, "processes", "type"]), _json)),
    )
)
def test_arbitrary_json_objects_never_crash(data: dict[str, Any]) -> None:
    try:
        line = orjson.dumps(data)
    except orjson.JSONEncodeError:
        return
    _parse_or_one_line_error(line)


# --------------------------------------------------------------------------------------------
# sampling_loop


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeStop(threading.Event):
    """An Event whose wait() lets fake time pass instead of real time."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None and timeout > 0
        self.waits.append(timeout)
        self.clock.now += timeout
        return self.is_set()


class StubSampler:
    """Records when it was called (relative to the start); each call costs `costs[i]` seconds."""

    def __init__(self, clock: FakeClock, costs: list[float] | None = None) -> None:
        self.clock = clock
        self.start = clock.now
        self.costs = costs or []
        self.at: list[float] = []

    def sample(self, time_us: int | None = None) -> tuple[int, list[GpuSampled]]:
        self.at.append(round(self.clock.now - self.start, 9))
        if len(self.at) <= len(self.costs):
            self.clock.now += self.costs[len(self.at) - 1]
        return len(self.at), []


def _loop(
    costs: list[float] | None = None, **kwargs: Any
) -> tuple[int, StubSampler, list[int], FakeStop]:
    clock = FakeClock()
    sampler = StubSampler(clock, costs)
    stop = kwargs.pop("stop", None) or FakeStop(clock)
    ticks: list[int] = []
    n = sampling_loop(
        sampler,
        kwargs.pop("interval_s", 1.0),
        stop=stop,
        on_tick=lambda t, s: ticks.append(t),
        clock=clock,
        **kwargs,
    )
    return n, sampler, ticks, stop


def test_loop_stops_after_count() -> None:
    n, sampler, ticks, _ = _loop(count=5)
    assert n == 5 and ticks == [1, 2, 3, 4, 5]
    assert sampler.at == [0, 1, 2, 3, 4]


def test_loop_count_zero() -> None:
    n, sampler, _, _ = _loop(count=0)
    assert n == 0 and sampler.at == []


def test_loop_stops_after_duration() -> None:
    n, sampler, _, _ = _loop(duration_s=3.5)
    assert n == 4 and sampler.at == [0, 1, 2, 3]
    n, sampler, _, _ = _loop(duration_s=3.0, interval_s=0.5)
    assert sampler.at == [0, 0.5, 1, 1.5, 2, 2.5]


def test_loop_count_and_duration_first_wins() -> None:
    n, _, _, _ = _loop(count=2, duration_s=10)
    assert n == 2
    n, _, _, _ = _loop(count=20, duration_s=2)
    assert n == 2


def test_loop_keeps_schedule_without_drift() -> None:
    # each tick costs 0.3 s: ticks still start at 0, 1, 2, ... and the waits make up the rest
    _, sampler, _, stop = _loop(costs=[0.3] * 6, count=6)
    assert sampler.at == [0, 1, 2, 3, 4, 5]
    assert stop.waits == pytest.approx([0.7] * 5)


def test_loop_skips_slots_after_overrun() -> None:
    # tick 1 (at t=1) takes 2.5 s: the slots at 2 and 3 are gone, the next tick is at 4
    _, sampler, _, _ = _loop(costs=[0.1, 2.5, 0.1, 0.1], count=4)
    assert sampler.at == [0, 1, 4, 5]
    # an overrun that ends exactly on a slot boundary ticks at once on that slot
    _, sampler, _, _ = _loop(costs=[0, 2.0, 0], count=3)
    assert sampler.at == [0, 1, 3]


def test_loop_stops_on_event_set_from_tick() -> None:
    clock = FakeClock()
    stop = FakeStop(clock)
    sampler = StubSampler(clock)

    def on_tick(t: int, s: list[GpuSampled]) -> None:
        if t == 3:
            stop.set()

    assert sampling_loop(sampler, 1.0, stop=stop, on_tick=on_tick, clock=clock) == 3


def test_loop_stops_on_event_set_before_start() -> None:
    clock = FakeClock()
    stop = FakeStop(clock)
    stop.set()
    assert sampling_loop(StubSampler(clock), 1.0, stop=stop, on_tick=lambda t, s: None) == 0


def test_loop_stop_is_immediate_in_real_time() -> None:
    stop = threading.Event()
    ticks: list[int] = []

    class Now:
        def sample(self, time_us: int | None = None) -> tuple[int, list[GpuSampled]]:
            return time.time_ns() // 1000, []

    timer = threading.Timer(0.1, stop.set)
    timer.start()
    started = time.monotonic()
    try:
        n = sampling_loop(Now(), 60.0, stop=stop, on_tick=lambda t, s: ticks.append(t))
    finally:
        timer.cancel()
    assert n == 1 and len(ticks) == 1  # the first tick is immediate, then it waits for slot 1
    assert time.monotonic() - started < 5.0


def test_loop_real_time_schedule() -> None:
    at: list[float] = []

    class Now:
        def sample(self, time_us: int | None = None) -> tuple[int, list[GpuSampled]]:
            at.append(time.monotonic())
            return 0, []

    n = sampling_loop(Now(), 0.02, count=5, on_tick=lambda t, s: None)
    assert n == 5
    offsets = [t - at[0] for t in at]
    for k, offset in enumerate(offsets):
        assert offset >= k * 0.02 - 0.005  # never early (monotonic clock, 5 ms slack)


@pytest.mark.parametrize("interval", [0, -1, float("nan"), float("inf")])
def test_loop_rejects_bad_interval(interval: float) -> None:
    with pytest.raises(ValueError):
        sampling_loop(StubSampler(FakeClock()), interval, count=1, on_tick=lambda t, s: None)


def test_loop_propagates_gpu_loss(tmp_path: Path) -> None:
    fake = two_gpu_machine(tmp_path)
    fake.gpus[0].errors["power"] = pynvml.NVML_ERROR_GPU_IS_LOST
    with (
        NvmlSampler("h", nvml=fake, proc_root=tmp_path) as sampler,
        pytest.raises(GpuUnavailableError),
    ):
        sampling_loop(sampler, 0.01, count=3, on_tick=lambda t, s: None)


def test_loop_with_sampler_records_lines(tmp_path: Path) -> None:
    lines: list[bytes] = []
    with NvmlSampler("h", nvml=two_gpu_machine(tmp_path), proc_root=tmp_path) as sampler:
        sampling_loop(
            sampler,
            0.001,
            count=3,
            on_tick=lambda t, s: lines.append(recording_line(t, "h", s)),
        )
    assert len(lines) == 3
    parsed = [parse_recording_line(line) for line in lines]
    assert all(len(samples) == 2 for _, samples in parsed)
    assert [t for t, _ in parsed] == sorted(t for t, _ in parsed)


# --------------------------------------------------------------------------------------------
# measure_sample_cost


def test_measure_sample_cost(tmp_path: Path) -> None:
    with NvmlSampler("h", nvml=two_gpu_machine(tmp_path), proc_root=tmp_path) as sampler:
        cost = measure_sample_cost(sampler, 50)
    assert cost["n"] == 50 and cost["gpus"] == 2
    for key in ("wall_ms_mean", "wall_ms_p95", "wall_ms_max", "cpu_ms_mean", "cpu_ms_p95"):
        assert cost[key] >= 0
    assert cost["wall_ms_p95"] <= cost["wall_ms_max"]


@pytest.mark.parametrize("n", [0, -1])
def test_measure_sample_cost_rejects_bad_n(n: int) -> None:
    with pytest.raises(ValueError):
        measure_sample_cost(StubSampler(FakeClock()), n)


class DriverNvml(FakeNvml):
    """NVML that knows its driver's version (bytes, as older pynvml returns it), or fails."""

    def __init__(self, driver: bytes | int) -> None:
        super().__init__([FakeGpu()])
        self.driver = driver

    def nvmlSystemGetDriverVersion(self) -> bytes:
        self.calls["driver"] += 1
        if isinstance(self.driver, int):
            raise nvml_error(self.driver)
        return self.driver


def test_driver_version_is_asked_once_and_kept() -> None:
    fake = DriverNvml(b"550.54.15\x00")
    sampler = NvmlSampler("h", nvml=fake)
    assert sampler.driver_version() is None  # not open: NVML is not touched
    with sampler:
        assert sampler.driver_version() == "550.54.15"
        assert sampler.driver_version() == "550.54.15"
    assert fake.calls["driver"] == 1


def test_driver_version_none_where_nvml_has_none() -> None:
    with NvmlSampler("h", nvml=DriverNvml(pynvml.NVML_ERROR_NOT_SUPPORTED)) as sampler:
        assert sampler.driver_version() is None
    with NvmlSampler("h", nvml=FakeNvml([FakeGpu()])) as sampler:  # bindings without it
        assert sampler.driver_version() is None
    lost = DriverNvml(pynvml.NVML_ERROR_GPU_IS_LOST)
    with NvmlSampler("h", nvml=lost) as sampler, pytest.raises(GpuUnavailableError):
        sampler.driver_version()
