"""A pipeline no input can stop: hostile numbers in log lines (a prompt echoing 10**29, `inf`,
a 300-digit vocab size, '١٢٣'), and events the projection tables cannot hold, neither stop the
fold nor the diagnoser. Every number a parser reads is range-checked where it is read (a fact
outside its domain is dropped and counted); an event the fold or the diagnoser cannot use is
skipped and recorded as `pipeline.skipped`; and a later crash of another unit is still
diagnosed — on the host, and on a central store the host ships to."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.cli.main import cli
from advisor.core.events import NewEvent
from advisor.core.payloads import GpuSampled
from advisor.diagnosis.live import Diagnoser
from advisor.fleet.ship import ship
from advisor.parsing import values as values_module
from advisor.parsing.catalog import shipped_catalog
from advisor.parsing.facts import read_facts
from advisor.parsing.lines import lines_from_texts
from advisor.parsing.parsed import parse
from advisor.parsing.patterns import ALIAS as _ALIAS
from advisor.parsing.patterns import FLAG_ALIAS as _FLAG_ALIAS
from advisor.parsing.patterns import NUMBERS as _NUMBERS
from advisor.parsing.sequence import segment
from advisor.parsing.values import FACT_TYPES, NUMBER_DOMAINS, in_domain
from advisor.pipeline.processing import Processor
from advisor.store import EventStore, open_store
from advisor.views.fold.projector import Projector
from advisor.views.fold.skipped import count_skipped, skipped_events
from advisor.views.read.reading import read_rows
from advisor.views.read.rows import RunView
from ingest.journal_sources import ingest_json_file
from tests.journal_fixtures import BOOT, json_line

HOST = "gpu-node-07"
UNIT = "hostile.service"
SEED_UNIT = "vllm-minimax-m25.service"
T0 = 1_771_633_000_000_000  # before the seed scenario's first line
INVOCATION = "00000000000000000000000000000bad"
BIG = "99999999999999999999999999999"
HUGE = "9" * 300

# ------------------------------------------------------------------ line templates
# One line per number a parser reads, with a `{n}` slot where the number goes: every
# `_NUMBERS` pattern, every config alias in an argument repr and every command-line flag, and
# systemd's exit status and restart counter (what engine the body is read as, and the body).
_MESSAGE_TEMPLATES: tuple[str, ...] = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n} MiB. GPU 0 has a total "
    "capacity of 94.97 GiB of which 411.62 MiB is free.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 782.00 MiB. GPU {n} has a "
    "total capacity of {n} GiB of which {n} MiB is free. Including non-PyTorch memory, this "
    "process has {n} GiB memory in use.",
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU {n}; {n} GiB total "
    "capacity; 1.00 GiB already allocated; {n} MiB free; 3 GiB reserved in total by PyTorch)",
    "RuntimeError: CUDA out of memory occurred when warming up sampler with {n} dummy requests.",
    "GPU KV cache size: {n} tokens",
    "llama_context: n_ctx         = {n}",
    "Replace gpu_memory_utilization config with `--kv-cache-memory=1` to fit into requested "
    "memory, or `--kv-cache-memory={n}` to fully utilize gpu memory.",
    "ValueError: The model's max seq len ({n}) is larger than the maximum number of tokens that "
    "can be stored in KV cache ({n}). Try increasing `gpu_memory_utilization`",
    "ValueError: To serve at least one request with the models's max seq len ({n}), ({n} GiB "
    "KV cache is needed, which is larger than the available KV cache memory ({n} GiB). Based "
    "on the available memory, the estimated maximum model length is {n}.",
    "Available KV cache memory: {n} GiB",
    "ValueError: Free memory on device cuda:0 ({n}/{n} GiB) on startup is less than desired "
    "GPU memory utilization ({n}, {n} GiB).",
    "desired: 94.97 GiB x gpu_memory_utilization ({n})",
    "max_total_num_tokens={n}, chunked_prefill_size=8192, context_len={n}",
    "RuntimeError: KV pool holds {n} tokens, fewer than --context-length {n}",
    "Memory pool end. mem_fraction_static={n}",
    "Not enough memory to handle {n} prefill tokens",
    "Chunked prefill is enabled with max_num_batched_tokens={n}.",
    "Using max model len {n}",
    "NVRM: Xid (PCI:0000:17:00): {n}, pid=1234, name=python3",
    "vocab size: {n}",
    "Receive: obj=GenerateReqInput(text='vocab size: {n} max_num_seqs={n}')",
    *(
        f"non-default args: {{'model': 'm', '{alias}': {{n}}}}"
        for alias in sorted(_ALIAS)
        if _ALIAS[alias] in NUMBER_DOMAINS
    ),
    *(
        f"vllm serve m {flag} {{n}}"
        for flag in sorted(_FLAG_ALIAS)
        if _FLAG_ALIAS[flag] in NUMBER_DOMAINS
    ),
)
_SYSTEMD_TEMPLATES: tuple[str, ...] = (
    UNIT + ": Main process exited, code=exited, status={n}/FAILURE",
    UNIT + ": Scheduled restart job, restart counter is at {n}.",
)
TEMPLATES = (
    *[("vllm", t) for t in _MESSAGE_TEMPLATES],
    *[("systemd", t) for t in _SYSTEMD_TEMPLATES],
)


def test_the_templates_reach_every_number_a_parser_reads() -> None:
    """The templates are derived from what facts.py knows: each of its number patterns
    matches one, and every numeric fact is read from at least one (so a new pattern without
    a template fails here)."""
    seen: set[str] = set()
    for engine, template in TEMPLATES:
        got = read_facts(template.replace("{n}", "1"), engine)  # in every domain
        seen |= set(got.facts) & set(NUMBER_DOMAINS)
    for pattern in _NUMBERS:
        if set(pattern.regex.groupindex) & set(NUMBER_DOMAINS):
            assert any(
                pattern.cue in t and pattern.regex.search(t.replace("{n}", "1"))
                for _, t in TEMPLATES
            ), pattern.regex.pattern
    # Numbers only the message catalogue reads (its placeholders) are covered there
    # (tests/parsing/test_catalog.py reads every one with hostile values).
    catalogued = {name for m in shipped_catalog().messages for name, _ in m.placeholders()} & set(
        NUMBER_DOMAINS
    )
    assert seen | catalogued == set(NUMBER_DOMAINS) - {"facts_dropped"}, (
        set(NUMBER_DOMAINS) - seen - catalogued
    )


# ------------------------------------------------------------------ the parse functions
HOSTILE_VALUES = (
    "99999999999999999999999999999",
    HUGE,
    "1" + "0" * 400,
    "-1",
    "-5",
    "inf",
    "-inf",
    "nan",
    "NaN",
    "1e309",
    "1e99999",
    "١٢٣",
    "٣٫٥",
    "１２",
    "",
    "0x10",
    "1_000",
    "9223372036854775808",
    "18446744073709551616",
    "1e-400",
    ".",
    "1,,,,",
    "Infinity",
)


def _hostile_value() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(HOSTILE_VALUES),
        st.integers(min_value=2**63, max_value=10**400).map(str),
        st.integers(max_value=-1).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(alphabet="0123456789.,-+e١٢٣٤٥٦٧٨٩٠", min_size=0, max_size=60),
    )


def _assert_sane(got: Any) -> None:
    for key, value in got.facts.items():
        if key in NUMBER_DOMAINS:
            assert in_domain(key, value), (key, value)
        else:
            assert FACT_TYPES[key] in (str, bool) and isinstance(value, FACT_TYPES[key])
    orjson.dumps(got.facts)  # what the fold writes: never "Integer exceeds 64-bit range"


@settings(max_examples=300, deadline=None)
@given(template=st.sampled_from(TEMPLATES), value=_hostile_value())
def test_hostile_numbers_in_every_pattern_never_become_facts(
    template: tuple[str, str], value: str
) -> None:
    engine, text = template
    got = read_facts(text.replace("{n}", value), engine)
    _assert_sane(got)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t[1][:48])
def test_a_number_outside_its_domain_is_dropped_and_counted(template: tuple[str, str]) -> None:
    engine, text = template
    for value in (BIG, HUGE, "١٢٣"):
        got = read_facts(text.replace("{n}", value), engine)
        _assert_sane(got)
        if "Receive: obj=" not in text:  # a prompt is noise: not read at all
            assert got.dropped >= 1, (text, value)


def test_dropped_numbers_are_counted_in_the_runs_facts() -> None:
    lines = lines_from_texts(
        [
            "INFO 02-21 00:32:58 [utils.py:328] non-default args: {'model': 'm', "
            f"'max_num_seqs': {BIG}, 'max_model_len': 4096}}",
            f"vocab size: {HUGE}",
        ]
    )
    parsed = parse(lines)
    (run,) = segment(parsed)
    assert run.facts_dropped == 2
    assert run.config == {"model": "m", "max_model_len": 4096}


def test_kernel_pid_of_thousands_of_digits_does_not_stop_classify(tmp_path: Path) -> None:
    """A kernel line joins the run of the pid it names; one of 5000 digits names none (int()
    of it raised: more than 4300 digits)."""

    def entry(i: int, message: str, unit: str | None) -> bytes:
        fields = [
            ("__REALTIME_TIMESTAMP", str(T0 + i)),
            ("_HOSTNAME", HOST),
            ("MESSAGE", message),
            ("__CURSOR", f"c{i}"),
        ]
        fields += (
            [("_SYSTEMD_UNIT", unit), ("_TRANSPORT", "stdout")]
            if unit
            else [("_TRANSPORT", "kernel"), ("SYSLOG_IDENTIFIER", "kernel")]
        )
        return json_line(fields)

    log = tmp_path / "journal.jsonl"
    log.write_bytes(
        entry(1, "INFO 02-21 00:32:58 [api_server.py:1] vLLM API server version 1", "a.service")
        + entry(2, "INFO 02-21 00:32:58 [api_server.py:1] vLLM API server version 1", "b.service")
        + entry(3, f"Out of memory: Killed process {'9' * 5000} (python3)", None)
    )
    result = CliRunner().invoke(cli, ["classify", str(log), "--json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["runs"]) == 2


# ------------------------------------------------------------------ journals
def _field_lines(
    i: int, message: str, *, systemd: bool, t: int | None = None, invocation: str = INVOCATION
) -> list[tuple[str, str]]:
    fields = [
        ("__REALTIME_TIMESTAMP", str(T0 + i * 1000 if t is None else t)),
        ("_BOOT_ID", BOOT),
        ("_HOSTNAME", HOST),
        ("PRIORITY", "6"),
        ("MESSAGE", message),
        ("__CURSOR", f"s=hostile;i={i:x}"),
    ]
    if systemd:
        return [
            *fields,
            ("_PID", "1"),
            ("_COMM", "systemd"),
            ("SYSLOG_IDENTIFIER", "systemd"),
            ("_TRANSPORT", "journal"),
            ("UNIT", UNIT),
            ("_SYSTEMD_UNIT", "init.scope"),
            ("INVOCATION_ID", invocation),
        ]
    return [
        *fields,
        ("_PID", "4242"),
        ("SYSLOG_IDENTIFIER", "vllm"),
        ("_TRANSPORT", "stdout"),
        ("_SYSTEMD_UNIT", UNIT),
        ("_SYSTEMD_INVOCATION_ID", invocation),
    ]


def _hostile_run(lines: list[str]) -> list[bytes]:
    """A run of UNIT that states `lines` and dies: systemd's start, the lines, its end."""
    out = [
        _field_lines(0, f"Starting {UNIT} - hostile...", systemd=True),
        _field_lines(1, f"Started {UNIT} - hostile.", systemd=True),
    ]
    out += [_field_lines(2 + i, line, systemd=False) for i, line in enumerate(lines)]
    n = len(out)
    out += [
        _field_lines(
            n, f"{UNIT}: Main process exited, code=exited, status={BIG}/FAILURE", systemd=True
        ),
        _field_lines(n + 1, f"{UNIT}: Failed with result 'exit-code'.", systemd=True),
        _field_lines(
            n + 2, f"{UNIT}: Scheduled restart job, restart counter is at {HUGE}.", systemd=True
        ),
    ]
    return [json_line(f) for f in out]


HOSTILE_LINES = [
    "(APIServer pid=4242) INFO 02-21 00:32:58 [utils.py:328] non-default args: {'model': "
    f"'m', 'max_num_seqs': {BIG}, 'gpu_memory_utilization': nan, 'max_model_len': -5, "
    "'tensor_parallel_size': inf}",
    f"(APIServer pid=4242) INFO 02-21 00:32:59 [utils.py:1] vocab size: {HUGE}",
    f"[2026-02-21 00:33:00 TP0] Receive: obj=GenerateReqInput(text='vocab size: {HUGE}')",
    f"(Worker_TP0 pid={'9' * 10}) ERROR 02-21 00:33:16 [multiproc_executor.py:671] "
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1e309 GiB. GPU 0 has a "
    f"total capacity of {HUGE} GiB of which 411.62 MiB is free. Including non-PyTorch memory, "
    f"this process has {'9' * 400} MiB memory in use.",
    "(Worker_TP0 pid=4243) ERROR 02-21 00:33:16 [multiproc_executor.py:671] RuntimeError: "
    f"CUDA out of memory occurred when warming up sampler with {BIG} dummy requests.",
    "(EngineCore_DP0 pid=4244) ERROR 02-21 00:33:16 [core.py:708] EngineCore failed to start.",
]


def _unusable_events(*, nul: bool) -> list[bytes]:
    """Journal entries that reach the store but not a projection row: a time past the year
    9999 (no run id can name it), an invocation id with a NUL in it."""
    far = json_line(
        _field_lines(900, "a line from the far future", systemd=False, t=999_999_999_999_999_999)
    )
    forged = json_line(
        _field_lines(901, "a forged invocation", systemd=False, invocation="ab\x00cd")
    )
    return [far, forged] if nul else [far]


def hostile_journal(path: Path, seed_journal: Path, *, host: str = HOST, nul: bool = True) -> Path:
    """The hostile unit's run, the unusable entries, then the seed scenario (another unit's
    sampler-OOM crash, then a wedged stop)."""
    lines = [*_hostile_run(HOSTILE_LINES), *_unusable_events(nul=nul)]
    text = b"".join(lines).decode() + seed_journal.read_text()
    path.write_text(text.replace(f'"{HOST}"', f'"{host}"'))
    return path


def _labels(store: EventStore, unit: str) -> list[str | None]:
    return [r["label"] for r in read_rows(store, "incidents", unit=unit)]


def _hostile_gpu_sample(store: EventStore, time_us: int) -> None:
    """An NVML sample whose memory size passes validation but no BIGINT column holds."""
    store.append(
        [
            NewEvent(
                stream=f"{HOST}/gpu0",
                time_us=time_us,
                source="test-nvml",
                key=1,
                payload=GpuSampled(
                    origin="nvml",
                    host=HOST,
                    index=0,
                    memory_total_bytes=2**63 + 5,
                    memory_used_bytes=2**63 + 1,
                    memory_free_bytes=0,
                ),
            )
        ]
    )


def _assert_seed_crash_diagnosed(store: EventStore) -> None:
    assert _labels(store, SEED_UNIT) == ["sampler_warmup_oom", "wedged_stop"]
    (incident, _) = read_rows(store, "incidents", unit=SEED_UNIT)
    facts = json.loads(incident["facts"])
    assert facts["max_num_seqs"] == 1024 and facts["facts_dropped"] == 0


# ------------------------------------------------------------------ on the host
def test_hostile_lines_do_not_stop_ingest_diagnose_rebuild(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    journal = hostile_journal(tmp_path / "hostile.jsonl", seed_journal)
    runner = CliRunner()
    result = runner.invoke(
        cli, ["ingest", "journal", "--file", str(journal), "--json", "--db", store_url]
    )
    assert result.exit_code == 0, result.output
    store = opener(store_url)
    _assert_seed_crash_diagnosed(store)
    # The hostile unit's own failure is diagnosed too, with none of its hostile numbers.
    (hostile,) = read_rows(store, "incidents", unit=UNIT)
    facts = json.loads(hostile["facts"])
    assert facts["facts_dropped"] >= 10
    assert facts["max_num_seqs"] is None and facts["vocab_size"] is None
    assert facts["exit_code"] is None and facts["restart_count"] is None
    assert facts["model"] == "m"
    (run,) = [r for r in read_rows(store, "runs", unit=UNIT) if r["lines"] > 2]
    assert json.loads(run["config"]) == {"model": "m"} and run["exit_code"] is None
    # The two unusable entries were skipped by the fold, and said so.
    assert count_skipped(store) == {"fold": 2, "diagnosis": 0}
    reasons = [s["reason"] for s in skipped_events(store)]
    assert any("year 9999" in r for r in reasons) and any("control" in r for r in reasons)
    for args in (["diagnose", "--json"], ["rebuild"], ["diagnose"]):
        result = runner.invoke(cli, [*args, "--db", store_url])
        assert result.exit_code == 0, (args, result.output)
    _assert_seed_crash_diagnosed(store)
    assert count_skipped(store) == {"fold": 2, "diagnosis": 0}  # recorded once, not per rebuild
    status = json.loads(runner.invoke(cli, ["status", "--json", "--db", store_url]).output)
    assert status["skipped"] == {"fold": 2, "diagnosis": 0}
    assert "skipped:" in runner.invoke(cli, ["status", "--db", store_url]).output
    verify = runner.invoke(cli, ["verify", "--json", "--db", store_url])
    assert verify.exit_code == 0 and json.loads(verify.output)["skipped"] == {
        "fold": 2,
        "diagnosis": 0,
    }


def test_an_event_no_column_holds_is_skipped_and_later_events_fold(
    sqlite_url: str, seed_journal: Path, opener: Callable[[str], EventStore]
) -> None:
    store = opener(sqlite_url)
    _hostile_gpu_sample(store, T0)
    ingest_json_file(store, seed_journal)
    Processor(store).run(final=True)
    _assert_seed_crash_diagnosed(store)
    assert read_rows(store, "gpu_samples") == []
    (skip,) = skipped_events(store)
    assert (skip["stage"], skip["seq"]) == ("fold", 1) and "2**63" in skip["reason"]


@pytest.mark.parametrize(
    "type_, body",
    [
        ("gpu.throttled", b'{"type": "gpu.throttled", "gpu": 0}'),  # a newer advisor's type
        ("log.recorded", b"not json {"),  # an altered payload
    ],
    ids=["unknown-type", "not-json"],
)
def test_an_event_whose_payload_cannot_be_read_is_skipped_and_later_events_fold(
    store_url: str, seed_journal: Path, opener: Callable[[str], EventStore], type_: str, body: bytes
) -> None:
    """What a newer host ships to an older central store (or an altered row): the fold skips
    it, records it once, and folds and diagnoses what comes after."""
    store = opener(store_url)
    store.append_prepared([("gpu-node-07/gpu0", type_, 1, T0, "future", 1, body)])
    ingest_json_file(store, seed_journal)
    Processor(store).run(final=True)
    _assert_seed_crash_diagnosed(store)
    (skip,) = skipped_events(store)
    assert (skip["stage"], skip["seq"]) == ("fold", 1)
    assert "payload cannot be read" in skip["reason"]
    Processor(store).run(final=True)
    assert count_skipped(store) == {"fold": 1, "diagnosis": 0}


def test_a_run_whose_diagnosis_raises_is_skipped_once_and_the_next_runs_are_diagnosed(
    store_url: str,
    tmp_path: Path,
    seed_journal: Path,
    opener: Callable[[str], EventStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The diagnoser's guard: a bug that one run trips is recorded, the run is labelled
    `unknown` (never acted on, no longer pending), and the other unit's crash after it is
    still diagnosed; a second pass records nothing again."""
    store = opener(store_url)
    ingest_json_file(store, hostile_journal(tmp_path / "hostile.jsonl", seed_journal))
    step = Diagnoser.step

    def flaky(self: Diagnoser, run: RunView) -> list[NewEvent]:
        if run.unit == UNIT:
            raise OverflowError("cannot convert float infinity to integer\nsecond line")
        return step(self, run)

    monkeypatch.setattr(Diagnoser, "step", flaky)
    Processor(store).run(final=True)
    _assert_seed_crash_diagnosed(store)
    assert _labels(store, UNIT) == []
    hostile_runs = [r for r in read_rows(store, "runs", unit=UNIT) if r["ended"]]
    assert [r["label"] for r in hostile_runs] == ["unknown"]
    diagnosis = [s for s in skipped_events(store) if s["stage"] == "diagnosis"]
    assert [(s["run_id"], s["reason"]) for s in diagnosis] == [
        (
            hostile_runs[0]["run_id"],
            "OverflowError: cannot convert float infinity to integer second line",
        )
    ]
    Processor(store).run(final=True)
    Projector(store).rebuild()
    assert count_skipped(store)["diagnosis"] == 1


# ------------------------------------------------------------------ property, end to end
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template=st.sampled_from(TEMPLATES), value=_hostile_value())
def test_any_hostile_number_then_another_units_crash_is_diagnosed(
    template: tuple[str, str], value: str
) -> None:
    seed = Path(__file__).parents[1] / "fixtures" / "seed-minimax-m25.journal.jsonl"
    engine, text = template
    line = text.replace("{n}", value)
    lines = [line] if engine == "vllm" else []
    with tempfile.TemporaryDirectory() as folder:
        journal = Path(folder) / "j.jsonl"
        body = _hostile_run(lines)
        if engine == "systemd":  # a systemd line of the run's own
            body.insert(2, json_line(_field_lines(2, line, systemd=True)))
        journal.write_bytes(b"".join(body) + seed.read_bytes())
        store = open_store(f"sqlite:///{folder}/events.db")
        try:
            ingest_json_file(store, journal)
            Processor(store).run(final=True)
            _assert_seed_crash_diagnosed(store)
            for incident in read_rows(store, "incidents", unit=UNIT):
                stated = json.loads(incident["facts"])
                for key, got in stated.items():
                    if key in NUMBER_DOMAINS and got is not None:
                        assert in_domain(key, got), (key, got)
        finally:
            store.close()


# ------------------------------------------------------------------ on the central store
def test_central_store_folds_what_hosts_ship_hostile_lines_and_all(
    tmp_path: Path, seed_journal: Path, store_url: str, opener: Callable[[str], EventStore]
) -> None:
    """Two hosts with the hostile journal (and a GPU sample no column holds) ship into one
    central store: its fold skips what it cannot use, records that, and has every host's
    incidents, the seed crash's among them."""
    central = opener(store_url)
    hosts = ("gpu-node-07", "gpu-node-08")
    for host in hosts:
        local = opener(f"sqlite:///{tmp_path / host}.db")
        if host == HOST:
            _hostile_gpu_sample(local, T0)
        ingest_json_file(
            local, hostile_journal(tmp_path / f"{host}.jsonl", seed_journal, host=host, nul=True)
        )
        Processor(local).run(final=True)
        ship(local, central, host)
    for host in hosts:
        assert [r["label"] for r in read_rows(central, "incidents", unit=SEED_UNIT, host=host)] == [
            "sampler_warmup_oom",
            "wedged_stop",
        ]
        # The hostile unit died warming up its sampler too: its incident has no hostile number.
        (hostile,) = read_rows(central, "incidents", unit=UNIT, host=host)
        facts = json.loads(hostile["facts"])
        assert hostile["label"] == "sampler_warmup_oom" and facts["dummy_requests"] is None
    # The central fold skipped the 5 unusable events it received (each host's far-future
    # line and NUL invocation id, the GPU sample); the hosts' own records of the same skips
    # came with the rest.
    skipped = skipped_events(central)
    assert (
        sorted(s["source"] for s in skipped)
        == ["pipeline"] * 5 + ["ship:gpu-node-07"] * 3 + ["ship:gpu-node-08"] * 2
    )
    assert count_skipped(central) == {"fold": 10, "diagnosis": 0}
    Projector(central).rebuild()
    assert count_skipped(central) == {"fold": 10, "diagnosis": 0}
    assert len(read_rows(central, "incidents")) == 6
    result = CliRunner().invoke(cli, ["status", "--json", "--db", central.url])
    assert json.loads(result.output)["skipped"] == {"fold": 10, "diagnosis": 0}


def test_domains_are_sane() -> None:
    """Every numeric fact has a domain that a BIGINT and a JSON number hold."""
    for key, (low, high) in NUMBER_DOMAINS.items():
        assert FACT_TYPES[key] in (int, float)
        assert -(2**63) <= low <= high <= 2**63 - 1 and math.isfinite(high)
    assert values_module.convert("max_num_seqs", BIG) is None
    assert values_module.convert("max_num_seqs", "1,024") == 1024
