"""SERVICE as systemctl takes it: `vllm-minimax-m25`, `vllm-minimax-m25.service` and
`gpu-node-07/vllm-minimax-m25` name the same unit in every command that takes one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.units import parse_service, service_host
from advisor.store import EventStore
from tests.conftest import ROOT, run_advisor

UNIT = "vllm-minimax-m25.service"
SPELLINGS = ("vllm-minimax-m25", UNIT, "gpu-node-07/vllm-minimax-m25", f"gpu-node-07/{UNIT}")
BAD = ("vllm minimax", "vllm*", "gpu-node-07/", "", "a/b/vllm", "vllm;reboot", "../../etc")
# A synthetic sampler warm-up OOM as `docker logs` prints it (the golden cases).
SAMPLER_LOG = ROOT / "tests/golden/sampler_warmup_oom/mistral-small-fp8-v020-docker.log"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def as_json(*args: str) -> Any:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("vllm-minimax-m25", (None, UNIT)),
        (UNIT, (None, UNIT)),
        ("gpu-node-07/vllm-minimax-m25", ("gpu-node-07", UNIT)),
        ("vllm@0", (None, "vllm@0.service")),
        ("nvidia-persistenced.socket", (None, "nvidia-persistenced.socket")),
    ],
)
def test_parse_service(text: str, expected: tuple[str | None, str]) -> None:
    assert parse_service(text) == expected


@pytest.mark.parametrize("text", BAD)
def test_parse_service_refuses_what_is_not_a_unit(text: str) -> None:
    with pytest.raises(InputError) as e:
        parse_service(text)
    assert repr(text) in str(e.value) and "\n" not in str(e.value)


def test_service_host_must_agree_with_host() -> None:
    assert service_host("h/x", "h", None) == "h" and service_host("x", None, "h") == "h"
    assert service_host("h/x", "h", "h") == "h"
    with pytest.raises(InputError, match="'h/x' names host 'h' but --host says 'g'"):
        service_host("h/x", "h", "g")


def test_every_spelling_finds_the_same_incidents_runs_and_stats(
    diagnosed: EventStore, sqlite_url: str
) -> None:
    db = ("--db", sqlite_url)
    explained = {
        s: json.loads(invoke("explain", s, "--format", "json", *db).output) for s in SPELLINGS
    }
    incidents = {s: as_json("incidents", "--service", s, *db) for s in SPELLINGS}
    runs = {s: as_json("runs", "--service", s, *db) for s in SPELLINGS}
    stats = {s: as_json("stats", "--service", s, *db) for s in SPELLINGS}
    latest = explained[UNIT]["incident"]
    assert (latest["host"], latest["unit"], latest["label"]) == ("gpu-node-07", UNIT, "wedged_stop")
    assert [r["label"] for r in incidents[UNIT]] == ["sampler_warmup_oom", "wedged_stop"]
    assert len(runs[UNIT]) >= 2 and {r["unit"] for r in runs[UNIT]} == {UNIT}
    assert stats[UNIT]["crashes_by_label"], stats[UNIT]
    for s in SPELLINGS:
        assert explained[s] == explained[UNIT], s
        assert incidents[s] == incidents[UNIT], s
        assert runs[s] == runs[UNIT], s
        assert stats[s] == stats[UNIT], s
    # Another host, or another unit, finds nothing.
    assert as_json("incidents", "--service", "gpu-node-08/vllm-minimax-m25", *db) == []
    assert as_json("runs", "--service", "vllm-minimax", *db) == []
    assert not as_json("stats", "--service", "vllm-minimax", *db)["crashes_by_label"]
    # The text output takes the same names.
    text = invoke("incidents", "--service", "vllm-minimax-m25", *db).output
    assert f"gpu-node-07/{UNIT}  sampler_warmup_oom" in text


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize(
    "command",
    [["explain"], ["incidents", "--service"], ["runs", "--service"], ["stats", "--service"]],
)
def test_a_bad_name_is_one_error_line_naming_it(
    tmp_path: Path, command: list[str], bad: str
) -> None:
    db = tmp_path / "never.db"
    result = CliRunner().invoke(cli, [*command, bad, "--db", f"sqlite:///{db}"])
    assert result.exit_code == 4, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: ") and repr(bad) in line
    assert not db.exists(), "a bad name is refused before the store is opened"


def test_stats_host_must_agree(diagnosed: EventStore, sqlite_url: str) -> None:
    result = invoke(
        "stats",
        "--service",
        "gpu-node-07/vllm-minimax-m25",
        "--host",
        "gpu-node-08",
        "--db",
        sqlite_url,
    )
    assert result.exit_code == 4
    assert result.stderr == (
        "Error: 'gpu-node-07/vllm-minimax-m25' names host 'gpu-node-07' "
        "but --host says 'gpu-node-08'\n"
    )


def test_ingest_text_files_the_log_under_the_unit(tmp_path: Path, sqlite_url: str) -> None:
    log = tmp_path / "vllm.log"
    shutil.copyfile(SAMPLER_LOG, log)
    db = ("--db", sqlite_url)
    result = invoke("ingest", "text", str(log), "--service", "vllm-llama70b", "--host", "h1", *db)
    assert result.exit_code == 0, result.output
    listed = invoke("events", "--type", "log.recorded", "--json", *db)
    events = [json.loads(line) for line in listed.output.splitlines()]
    assert {e["stream"] for e in events} == {"h1/vllm-llama70b.service"}
    assert {e["payload"]["unit"] for e in events} == {"vllm-llama70b.service"}
    # The same file given as HOST/UNIT is the same file of the same unit: nothing new.
    again = as_json("ingest", "text", str(log), "--service", "h1/vllm-llama70b.service", *db)
    assert again["appended"] == 0
    report = json.loads(invoke("explain", "h1/vllm-llama70b", "--format", "json", *db).output)
    assert report["incident"]["unit"] == "vllm-llama70b.service"
    assert report["incident"]["label"] == "sampler_warmup_oom"
    kinds = [step["kind"] for step in report["plan"]]
    assert "set_flag" in kinds, report["plan"]
    assert not any("not a systemd unit name" in step.get("why", "") for step in report["plan"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--service", "vllm llama"], "Error: 'vllm llama' is not a unit name"),
        (["--service", "h1/vllm", "--host", "h2"], "Error: 'h1/vllm' names host 'h1' but --host"),
    ],
)
def test_ingest_text_refuses_a_bad_service(tmp_path: Path, args: list[str], message: str) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("INFO 02-21 00:32:58 up\n")
    db = tmp_path / "never.db"
    result = invoke("ingest", "text", str(log), *args, "--db", f"sqlite:///{db}")
    assert result.exit_code == 4, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(message), line
    assert not db.exists()


def test_ingest_watch_refuses_a_bad_service(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    result = invoke(
        "ingest", "watch", str(tmp_path), "--service", "vllm*", "--db", f"sqlite:///{db}"
    )
    assert result.exit_code == 4
    assert result.stderr.startswith("Error: 'vllm*' is not a unit name")
    assert not db.exists()


def test_as_a_process(diagnosed: EventStore, sqlite_url: str) -> None:
    done = run_advisor("explain", "vllm-minimax-m25", "--db", sqlite_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith(f"gpu-node-07/{UNIT}: wedged_stop")
    bad = run_advisor("incidents", "--service", "vllm minimax", "--db", sqlite_url)
    assert bad.returncode == 4 and bad.stdout == b""
    assert bad.stderr.decode().splitlines() == [
        "Error: 'vllm minimax' is not a unit name (UNIT or HOST/UNIT, e.g. vllm-minimax-m25 or "
        "gpu-node-07/vllm-minimax-m25.service)"
    ]
