"""What a new user meets first: input that cannot be read is refused with one line and a
non-zero exit (binary data, a journal of malformed lines), `classify` shows the plan with its
arithmetic, an export can be refreshed, and Ctrl-C at the approval prompt exits 130."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

from click.testing import CliRunner

from advisor.cli.main import cli
from tests.conftest import advisor_argv, run_advisor

UNIT = "vllm-minimax-m25"


def test_ingest_text_refuses_binary_data_as_classify_does(tmp_path: Path) -> None:
    store = tmp_path / "events.db"
    blob = tmp_path / "core.bin"
    blob.write_bytes(bytes(range(256)) * 8)
    controls = tmp_path / "controls.log"  # no NUL byte, but no text either
    controls.write_bytes(bytes([1, 2, 3, 4, 5, 6, 0x81, 0xFE, 0xFF, 65]) * 300)
    for path in (blob, controls):
        ingest = run_advisor(
            "ingest", "text", str(path), "--service", UNIT, "--db", f"sqlite:///{store}"
        )
        classify = run_advisor("classify", str(path))
        assert ingest.returncode == classify.returncode == 4
        line = f"Error: {path}: binary data, not a log".encode()
        assert ingest.stderr.startswith(line) and classify.stderr.startswith(line)
        assert ingest.stderr.count(b"\n") == 1
    assert not store.exists()  # refused before the store was opened
    text = tmp_path / "vllm.log"
    text.write_text("INFO 02-21 00:32:55 \x1b[32mstarting\x1b[0m\tvllm serve\n")
    ok = run_advisor("ingest", "text", str(text), "--service", UNIT, "--db", f"sqlite:///{store}")
    assert ok.returncode == 0, ok.stderr


def test_an_ingest_that_could_read_nothing_exits_4(sqlite_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('garbage\n{"x":\nnot json\n')
    result = run_advisor("ingest", "journal", "--file", str(bad), "--db", sqlite_url)
    assert result.returncode == 4
    assert (
        result.stderr.decode()
        .splitlines()[-1]
        .startswith(f"Error: {bad}: none of its 3 line(s) could be read (line 1: invalid JSON")
    )
    some = tmp_path / "some.jsonl"
    good = '{"__CURSOR": "s=a;i=1", "__REALTIME_TIMESTAMP": "1771633975000000", "MESSAGE": "hi"}'
    some.write_text(f"garbage\n{good}\n")
    result = run_advisor("ingest", "journal", "--file", str(some), "--db", sqlite_url)
    assert result.returncode == 0, result.stderr
    assert b"read 2, stored 1 new events, 0 already stored, 1 malformed" in result.stdout


def test_classify_shows_the_plan_with_its_arithmetic(seed_journal: Path) -> None:
    done = run_advisor("classify", str(seed_journal))
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr
    plan = out[out.index("\nplan:\n") :]
    assert "  2. set_flag --max-num-seqs 256: the sampler warm-up needs about 3.82 GiB" in plan
    assert "       fits: 90% × 1.17 GiB / 3.82 MiB = 281 → 256" in plan
    assert "  3. set_flag --gpu-memory-utilization 0.87 (alternative):" in plan


def test_export_parquet_force_replaces_the_export(
    sqlite_url: str, seed_journal: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    folder = tmp_path / "export"
    lines = seed_journal.read_text().splitlines(keepends=True)
    half, rest = tmp_path / "half.jsonl", tmp_path / "all.jsonl"
    half.write_text("".join(lines[:40]))
    rest.write_text("".join(lines))

    def count() -> str:
        sql = "SELECT count(*) AS n FROM events"
        return runner.invoke(cli, ["query", sql, "--parquet", str(folder), "--csv"]).output

    for journal, force in ((half, []), (rest, ["--force"])):
        ingest = ["ingest", "journal", "--file", str(journal), "--no-diagnose"]
        assert runner.invoke(cli, [*ingest, "--db", sqlite_url]).exit_code == 0
        done = runner.invoke(cli, ["export", "parquet", str(folder), *force, "--db", sqlite_url])
        assert done.exit_code == 0, done.output
        assert f"n\n{len(lines[:40]) if not force else len(lines)}\n" in count()
    refused = runner.invoke(cli, ["export", "parquet", str(folder), "--db", sqlite_url])
    assert refused.exit_code == 4 and "--force to replace it" in refused.output
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []


def _wait_blocked_on_stdin(pid: int) -> None:
    """Until the process sleeps in a read of its stdin pipe (as a person's Ctrl-C finds it)."""
    wchan = Path(f"/proc/{pid}/wchan")
    for _ in range(1200):
        if "pipe_read" in wchan.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} never waited for input")


def test_ctrl_c_at_the_approval_prompt_exits_130(
    sqlite_url: str, seed_journal: Path, tmp_path: Path
) -> None:
    ingest = ["ingest", "journal", "--file", str(seed_journal), "--db", sqlite_url]
    assert CliRunner().invoke(cli, ingest).exit_code == 0
    argv = [*advisor_argv("remediate", UNIT, "--db", sqlite_url)]
    argv += ["--systemd-root", str(tmp_path / "root")]
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # as from a terminal: a shell's background job starts with SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        seen = b""
        while b"Run step 0" not in seen:  # the prompt, waiting for an answer
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            chunk = os.read(proc.stdout.fileno(), 4096) if ready else b""
            assert chunk, seen.decode()[-2000:]
            seen += chunk
        _wait_blocked_on_stdin(proc.pid)  # else the signal may land before the read begins
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert proc.stderr.read().decode().splitlines()[-1] == "Interrupted."
