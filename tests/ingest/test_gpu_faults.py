"""GPU faults from the journal: an `NVRM: Xid` kernel line becomes a `gpu.fault` event with the
Xid catalogue's severity and action, is linked to the incident of the unit whose process it
names, and is shown by `advisor explain` (text, Markdown, JSON, HTML) — the done-criterion "a
recorded Xid appears on the incident it caused". The journal is generated here (no GPU machine
was available to record one)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from advisor.cli.main import cli
from advisor.core.events import prepare
from advisor.core.payloads import GpuFault, GpuProcess, GpuSampled
from advisor.core.taxonomy import GPU_HARDWARE_FAULT
from advisor.pipeline.metrics import registry_for
from advisor.store import EventFilter, open_store
from ingest.gpu_faults import XID_SOURCE, xid_fault
from ingest.gpu_health import HealthReading, XidSeen
from ingest.gpu_health_changes import HealthTracker
from ingest.gpu_samples import sample_event
from tests.console.serving import Client, served
from tests.journal_fixtures import Entry, entry, json_line

UNIT = "vllm.service"
XID_79 = "NVRM: Xid (PCI:0000:3B:00): 79, pid=4242, name=python3, GPU has fallen off the bus."


def _systemd(i: int, message: str) -> Entry:
    return [
        (k, v)
        for k, v in entry(i, message)
        if k not in ("_TRANSPORT", "_SYSTEMD_UNIT", "SYSLOG_IDENTIFIER", "_PID")
    ] + [
        ("_TRANSPORT", "journal"),
        ("_PID", "1"),
        ("SYSLOG_IDENTIFIER", "systemd"),
        ("_SYSTEMD_UNIT", "init.scope"),
        ("UNIT", UNIT),
    ]


def _kernel(i: int, message: str) -> Entry:
    return [
        (k, v)
        for k, v in entry(i, message)
        if k not in ("_TRANSPORT", "_SYSTEMD_UNIT", "SYSLOG_IDENTIFIER", "_PID")
    ] + [("_TRANSPORT", "kernel"), ("SYSLOG_IDENTIFIER", "kernel")]


def crash_journal(path: Path, xid_line: str = XID_79) -> Path:
    """A vLLM unit that starts, loads, loses its GPU (the kernel's Xid line naming its
    process) and dies; then an Xid naming another process on the same host."""
    entries = [
        _systemd(1, f"Started {UNIT} - vLLM."),
        entry(2, "INFO 03-16 06:12:00 [api_server.py:1] vLLM API server version 0.8.5"),
        entry(3, "INFO 03-16 06:12:45 [loader.py:458] Loading weights took 38.52 seconds"),
        _kernel(4, xid_line),
        entry(5, "RuntimeError: CUDA error: unspecified launch failure"),
        _systemd(6, f"{UNIT}: Main process exited, code=exited, status=1/FAILURE"),
        _systemd(7, f"{UNIT}: Failed with result 'exit-code'."),
        _kernel(8, "NVRM: Xid (PCI:0000:18:00): 13, pid=9999, name=other, Graphics Exception"),
    ]
    path.write_bytes(b"".join(json_line(e, cursor=f"c{n}") for n, e in enumerate(entries)))
    return path


def _ingest(runner: CliRunner, journal: Path, url: str) -> None:
    for argv in (["ingest", "journal", "--file", str(journal)], ["diagnose"]):
        result = runner.invoke(cli, [*argv, "--db", url])
        assert result.exit_code == 0, result.output


def test_a_kernel_xid_line_becomes_a_fault_once(tmp_path: Path, sqlite_url: str) -> None:
    runner = CliRunner()
    journal = crash_journal(tmp_path / "j.jsonl")
    _ingest(runner, journal, sqlite_url)
    _ingest(runner, journal, sqlite_url)  # again: every event is a duplicate
    store = open_store(sqlite_url)
    faults = [e for e in store.read(EventFilter(type="gpu.fault"))]
    assert [(e.stream, e.source) for e in faults] == [("gpu01/kernel", XID_SOURCE)] * 2
    first = faults[0].payload
    assert isinstance(first, GpuFault)
    assert (first.xid, first.pci_bus, first.pid, first.origin, first.kind) == (
        79,
        "0000:3b:00",
        4242,
        "kernel",
        "xid",
    )
    assert (first.severity, first.action) == ("hardware", "RESTART_BM")
    assert first.text == "pid=4242, name=python3, GPU has fallen off the bus."


def test_the_xid_appears_on_the_incident_it_caused(tmp_path: Path, sqlite_url: str) -> None:
    runner = CliRunner()
    _ingest(runner, crash_journal(tmp_path / "j.jsonl"), sqlite_url)
    out = runner.invoke(cli, ["explain", UNIT, "--format", "json", "--db", sqlite_url])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["incident"]["label"] == GPU_HARDWARE_FAULT
    faults = report["gpu_faults"]
    assert [(f["xid"], f["linked_by"], f["mnemonic"]) for f in faults] == [
        (79, "pid", "GPU_HAS_FALLEN_OFF_THE_BUS")
    ]  # the Xid 13 names another process: not this incident's
    assert faults[0]["investigate"] == "RMA"
    assert any(e["what"].startswith("GPU fault: Xid 79") for e in report["timeline"])
    text = runner.invoke(cli, ["explain", UNIT, "--db", sqlite_url]).output
    assert "GPU faults (linked to this incident)" in text
    assert "Xid 79 GPU_HAS_FALLEN_OFF_THE_BUS on PCI 0000:3b:00 (hardware, RESTART_BM)" in text
    md = runner.invoke(cli, ["explain", UNIT, "--format", "markdown", "--db", sqlite_url])
    assert "\n## GPU faults (linked to this incident)\n" in md.output
    page = tmp_path / "incident.html"
    argv = ["explain", UNIT, "--format", "html", "--out", str(page), "--db", sqlite_url]
    assert runner.invoke(cli, argv).exit_code == 0
    assert "Xid 79 GPU_HAS_FALLEN_OFF_THE_BUS on PCI 0000:3b:00" in page.read_text()


@pytest.mark.parametrize(
    "message",
    [
        "NVRM: Xid (PCI:0000:3b:00): 99999, pid=1, boom",  # no such Xid
        "NVRM: Xid (PCI:0000:3b:00): 0, pid=1, boom",
        "NVRM: Xid 79 (no address)",
        "NVRM: Xid (" + "(" * 10_000,
        "the service printed NVRM: Xid (x): abc",
    ],
)
def test_hostile_xid_lines_give_no_fault(message: str) -> None:
    assert xid_fault({"type": "log.recorded", "host": "h", "message": message}) is None


def test_hostile_fields_are_range_checked_and_clipped() -> None:
    fault = xid_fault(
        {
            "type": "log.recorded",
            "host": "h",
            "message": "NVRM: Xid (PCI:;rm -rf /;): 48, pid=9999999, name=x, " + "A" * 5000,
        }
    )
    assert fault is not None
    assert fault["xid"] == 48 and "pid" not in fault and "pci_bus" not in fault
    assert len(fault["text"]) == 500
    unknown = xid_fault(
        {"type": "log.recorded", "host": "h", "message": "NVRM: Xid (PCI:0000:01:00): 1000, x"}
    )
    assert unknown is not None and (unknown["severity"], unknown["action"]) == (
        "unlisted",
        "CONTACT_SUPPORT",
    )


def test_the_faults_are_counted_in_the_metrics(tmp_path: Path, sqlite_url: str) -> None:
    """`advisor_gpu_faults_total`, parsed back by prometheus_client, and by promtool's
    exposition linter where it is installed."""
    runner = CliRunner()
    _ingest(runner, crash_journal(tmp_path / "j.jsonl"), sqlite_url)
    text = generate_latest(registry_for(lambda: open_store(sqlite_url, read_only=True))).decode()
    faults = {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "advisor_gpu_faults_total"
    }
    assert faults == {
        (
            ("gpu", "pci:0000:3b:00"),
            ("host", "gpu01"),
            ("kind", "xid"),
            ("severity", "hardware"),
            ("xid", "79"),
        ): 1.0,
        (
            ("gpu", "pci:0000:18:00"),
            ("host", "gpu01"),
            ("kind", "xid"),
            ("severity", "application"),
            ("xid", "13"),
        ): 1.0,
    }
    promtool = shutil.which("promtool")
    if promtool is not None:
        checked = subprocess.run(
            [promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60
        )
        assert checked.returncode == 0, checked.stderr + checked.stdout


def test_the_console_incident_page_shows_the_fault(tmp_path: Path, sqlite_url: str) -> None:
    """`advisor serve` over real HTTP: the incident page's "GPU faults" section, the kernel
    line's own text escaped."""
    hostile = XID_79.replace("GPU has fallen off the bus.", "<script>alert(1)</script>")
    runner = CliRunner()
    _ingest(runner, crash_journal(tmp_path / "j.jsonl", hostile), sqlite_url)
    with served(sqlite_url, "--token", "t" * 24, log=tmp_path / "serve.log") as base:
        client = Client(base)
        links = re.findall(r'href="(/incident/[^"]+)"', client.get("/").body)
        assert len(links) == 1
        page = client.get(links[0]).body
    section = page[page.index('<section id="gpu-faults">') :]
    section = section[: section.index("</section>")]
    assert "Xid 79 GPU_HAS_FALLEN_OFF_THE_BUS on PCI 0000:3b:00 (hardware, RESTART_BM)" in section
    assert "RESTART_BM, then RMA" in section and "<td>pid</td>" in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section and "<script>alert" not in page


def test_a_fault_without_a_pid_is_linked_by_the_gpu_the_unit_used(
    tmp_path: Path, sqlite_url: str
) -> None:
    """An Xid 48 line naming no process (pid='<unknown>') is placed on GPU 1 by its PCI
    address, which NVML's fault of the same moment (the uncorrected ECC count of GPU 1 grew)
    ties to index 1; the unit's processes were sampled on GPU 1, so both are linked by `gpu`.
    An NVML Xid on GPU 0, which the unit never used, is not."""
    t0 = 1_742_105_558_000_000
    dbe = "NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, DBE (Double Bit Error)"
    runner = CliRunner()
    journal = crash_journal(tmp_path / "j.jsonl", dbe)
    result = runner.invoke(cli, ["ingest", "journal", "--file", str(journal), "--db", sqlite_url])
    assert result.exit_code == 0, result.output
    worker = GpuProcess(pid=4242, used_bytes=70 << 30, unit=UNIT)
    samples = [
        GpuSampled(
            origin="nvml", host="gpu01", index=i, memory_total_bytes=80 << 30,
            memory_used_bytes=(70 << 30) * i, memory_free_bytes=80 << 30, processes=procs,
        )
        for i, procs in ((0, ()), (1, (worker,)))
    ]  # fmt: skip
    tracker = HealthTracker("gpu01")
    ecc = "ecc.volatile.uncorrected"
    readings = [
        HealthReading(index=i, pci_bus=f"0000:{b}:00", counters={ecc: 0})
        for i, b in ((0, "18"), (1, "3b"))
    ]
    tracker.changes(t0, readings)
    faults = tracker.changes(
        t0 + 4000,
        [
            readings[0].model_copy(update={"xids": (XidSeen(xid=94),)}),
            readings[1].model_copy(update={"counters": {ecc: 2}}),
        ],
    )
    store = open_store(sqlite_url)
    try:
        store.append_prepared(prepare([*(sample_event(t0 + 1500, s) for s in samples), *faults]))
    finally:
        store.close()
    assert runner.invoke(cli, ["diagnose", "--db", sqlite_url]).exit_code == 0
    out = runner.invoke(cli, ["explain", UNIT, "--format", "json", "--db", sqlite_url])
    linked = json.loads(out.output)["gpu_faults"]
    assert [(f["xid"], f["gpu"], f["origin"], f["linked_by"]) for f in linked] == [
        (48, 1, "kernel", "gpu"),
        (None, 1, "nvml", "gpu"),
    ]
    assert [f["title"] for f in linked] == [
        "Xid 48 DBE_ERROR on GPU 1 (hardware, RESET_GPU)",
        "ecc.volatile.uncorrected 0 → 2 on GPU 1 (hardware, RESET_GPU)",
    ]
