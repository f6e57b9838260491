"""The message catalogue (rules/catalog/*.toml): valid, self-consistent, wired into parsing and
the rules, and covering the producers and kinds of message crash logs hold. The coverage table
is printed (pytest -s, or on failure)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import get_args

import pytest

from advisor.core.errors import InputError
from advisor.core.taxonomy import FAILURE_LABELS
from advisor.diagnosis.rules import load_rules, match_run
from advisor.parsing import catalog as catalog_module
from advisor.parsing.catalog import (
    SHIPPED_FILES,
    Catalog,
    Message,
    Writer,
    load_catalog_file,
    shipped_catalog,
)
from advisor.parsing.lines import lines_from_texts
from advisor.parsing.parsed import parse
from advisor.parsing.sequence import segment
from advisor.parsing.templates import compile_template, read_placeholder

OOM_LABELS = frozenset(
    {"sampler_warmup_oom", "kv_cache_oom", "weights_load_oom", "cuda_graph_oom", "runtime_oom"}
)
PRODUCERS = tuple(w for w in get_args(Writer) if w != "python")  # python: tracebacks only


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return shipped_catalog()


def _labelled(catalog: Catalog) -> list[Message]:
    return [m for m in catalog.messages if m.spec.label is not None]


def test_coverage_by_producer_and_label(catalog: Catalog) -> None:
    by_writer = Counter(m.producer.writes for m in catalog.messages)
    by_label = Counter(m.spec.label or "(informational)" for m in catalog.messages)
    table = ["catalogue coverage: messages per producer"]
    table += [f"  {w:<14} {n:>4}" for w, n in sorted(by_writer.items())]
    table += ["messages per label"]
    table += [f"  {label:<20} {n:>4}" for label, n in sorted(by_label.items())]
    print("\n".join(table))
    assert all(by_writer[w] >= 5 for w in PRODUCERS), by_writer
    # Every failure label has messages of its own, or (the OOM labels) the OOM messages.
    for label in FAILURE_LABELS:
        own = by_label[label] + (by_label["oom"] if label in OOM_LABELS else 0)
        assert own >= 1, label
    assert len(catalog.messages) >= 300


def test_the_shipped_files_are_in_the_folder() -> None:
    """Loading skips the example check of the files named in SHIPPED_FILES because the test
    below checks theirs: each is a file of the folder (one the list leaves out, a new
    engine's, is checked on load like an operator's)."""
    assert {name for name, _ in catalog_module.shipped_catalog_files()} >= SHIPPED_FILES


def test_every_example_is_its_own_message(catalog: Catalog) -> None:
    """The shipped files' examples (not matched when they are loaded: this is their check)."""
    for message in catalog.messages:
        for example in message.spec.examples:
            assert message.read(example) is not None, (message.id, example)
            assert message.id in [m.id for m, _ in catalog.match(example)], (message.id, example)


def test_no_example_is_read_as_a_different_failure(catalog: Catalog) -> None:
    """A labelled message's example is not another message that (conditions holding) supports
    a different label: the catalogue does not contradict itself."""
    clashes = []
    for message in _labelled(catalog):
        for example in message.spec.examples:
            for other, facts in catalog.match(example):
                label = other.spec.label
                if label is None or other.id == message.id or not other.conditions_hold(facts):
                    continue
                if not message.conditions_hold(message.read(example) or {}):
                    continue
                same = label == message.spec.label or "oom" in (label, message.spec.label)
                if not same:
                    clashes.append(f"{message.id} ({message.spec.label}) vs {other.id} ({label})")
    assert not clashes, clashes


def test_each_labelled_example_fires_a_rule_of_its_label(catalog: Catalog) -> None:
    """Wired in: one example line alone, parsed and matched, makes a rule of its label fire
    (the phase-dependent `oom` messages: an OOM label)."""
    rules = load_rules()
    missed = []
    for message in _labelled(catalog):
        example = message.spec.examples[0]
        if not message.conditions_hold(message.read(example) or {}):
            continue
        parsed = parse(lines_from_texts([example]))
        assert message.id in parsed[0].messages, (message.id, parsed[0].messages)
        labels = {h.label for run in segment(parsed) for h in match_run(rules, run, parsed)}
        wanted = OOM_LABELS if message.spec.label == "oom" else {message.spec.label}
        if message.spec.label == "oom":
            continue  # its rules need a phase, which one line does not have
        if not labels & wanted:
            missed.append(f"{message.id}: {sorted(labels)}")
    assert not missed, missed


# The kinds of message the diagnosis must know (docs/catalog.md; one line each, written from
# the producers' format strings with made-up values): every one is a catalogued message.
KINDS = {
    "systemd before v230": "vllm.service stopping timed out. Terminating.",
    "systemd before v236": "Unit vllm.service entered failed state.",
    "systemd stop timeout": "vllm.service: State 'stop-sigterm' timed out. Killing.",
    "systemctl status": (
        "Active: failed (Result: timeout) since Mon 2025-02-10 18:22:05 UTC; 41s ago"
    ),
    "kernel hung task": "INFO: task python3:51422 blocked for more than 120 seconds.",
    "NVRM Xid": (
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU "
        "has fallen off the bus."
    ),
    "vLLM KV budget": "Available KV cache memory: -1.87 GiB",
    "vLLM engine core": "EngineCore failed to start.",
    "SGLang profiled": (
        "max_total_tokens=200000 is larger than the profiled value -11264. Use "
        "the profiled value instead."
    ),
    "vllm.rs KV": "Available: 812.40 MB, Required: 4096.00 MB, Reserved: 512.00 MB.",
    "TGI request": (
        "Request failed during generation: Server error: CUDA out of memory. "
        "Tried to allocate 1.50 GiB."
    ),
    "llama.cpp alloc": (
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 42310.51 MiB on "
        "device 0: cudaMalloc failed: out of memory"
    ),
    "NCCL socket": "node1:3311:3390 [1] NCCL INFO misc/socket.cc:565 -> 2",
    "gloo pair": (
        "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed "
        "by peer [10.1.0.6]:62041"
    ),
    "torch OOM": (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.25 "
        "GiB. GPU 0 has a total capacity of 23.55 GiB of which 2.91 GiB is "
        "free."
    ),
    "CUDA capture": "RuntimeError: CUDA error: operation not permitted when stream is capturing",
    "TGI sharding": (
        "ValueError: `num_heads` must be divisible by `num_shards` (got "
        "`num_heads`: 32 and `num_shards`: 3"
    ),
    "SGLang ready": "The server is fired up and ready to roll!",
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_of_message_is_catalogued(catalog: Catalog, kind: str) -> None:
    assert catalog.match(KINDS[kind]), f"{kind}: no catalogued message matches {KINDS[kind]!r}"


def test_sizes_are_read_in_their_units_with_their_sign() -> None:
    assert read_placeholder("available_kv_cache_gib", "gib", "-1.87") == -1.87
    assert read_placeholder("available_kv_cache_gib", "mib", "5120.00") == 5.0
    assert read_placeholder("tried_to_allocate_gib", "size", "782.00 MiB") == 782 / 1024
    assert read_placeholder("tried_to_allocate_gib", "gb", "2") == 2e9 / 1024**3
    assert read_placeholder("tried_to_allocate_gib", "size", "1e400 GiB") is None
    assert read_placeholder("profiled_max_total_tokens", "int", "-11,264") == -11264
    assert read_placeholder("max_num_seqs", "int", "99999999999999999999") is None  # domain


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("Out of {x:int} memory here", "not a fact"),
        ("Out of memory: {free_gib:int} left", "take a size kind"),
        ("Tried {tried_to_allocate_gib:parsecs} here", "unknown kind"),
        ("{_:int} {_:text}", "literal characters"),
    ],
)
def test_a_bad_template_is_refused(template: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        compile_template(template)


_HEAD = '[producer]\nname = "x"\nrepository = "o/x"\nwrites = "vllm"\n\n[[message]]\n'
_SEEN = 'examples = ["Seen here 3 times"]\n'
_GOOD = (
    'id = "x.a"\nsource = "x.py"\nformat = "f %d"\n'
    'template = "Seen here {max_num_seqs:int} times"\nmeaning = "m"\n'
)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (_GOOD + 'examples = ["Seen here twice"]\n', "message x.a: example 1 does not match"),
        (_GOOD + _SEEN + 'versions = "around 0.6"\n', "field versions"),
        (_GOOD + _SEEN + 'when = ["max_num_seqs > 2"]\n', "needs a label"),
        (_GOOD + _SEEN + 'label = "bad_label"\n', "field label"),
        (_GOOD + "examples = []\n", "field examples"),
    ],
)
def test_a_bad_entry_is_one_line_naming_file_and_message(
    tmp_path: Path, body: str, error: str
) -> None:
    path = tmp_path / "x.toml"
    path.write_text(_HEAD + body)
    with pytest.raises(InputError) as info:
        load_catalog_file(path)
    assert str(path) in str(info.value) and error in str(info.value)
    assert "\n" not in str(info.value)


def test_an_operators_file_is_checked_on_load_a_shipped_one_in_the_tests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A file in the catalogue folder that advisor does not ship has its examples matched when
    the catalogue loads (a broken one is a one-line error naming it); a shipped one's are
    left to the test above."""
    broken = _HEAD + _GOOD + 'examples = ["nothing like it"]\n'
    shipped = catalog_module.shipped_catalog_files()
    monkeypatch.setattr(
        catalog_module, "shipped_catalog_files", lambda: [*shipped, ("mine.toml", broken)]
    )
    with pytest.raises(InputError) as info:
        shipped_catalog.__wrapped__()
    assert "mine.toml: message x.a: example 1 does not match" in str(info.value)
    assert "\n" not in str(info.value)
    [message] = load_catalog_file(Path("x.toml"), broken, check_examples=False)
    assert message.read("nothing like it") is None


def test_the_checker_runs_as_a_program(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(_HEAD + _GOOD + 'examples = ["Seen here 3 times"]\n')
    bad = tmp_path / "bad.toml"
    bad.write_text(_HEAD + _GOOD + 'examples = ["nothing like it"]\n')
    run = [sys.executable, "-m", "advisor.parsing.catalog"]
    ok = subprocess.run([*run, str(good)], capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and ok.stdout.startswith("ok: 1 messages"), ok.stderr
    failed = subprocess.run([*run, str(bad)], capture_output=True, text=True, check=False)
    assert failed.returncode == 1 and "example 1 does not match" in failed.stderr


HOSTILE = (
    "99999999999999999999999999999",
    "1" + "0" * 400,
    "-5",
    "inf",
    "nan",
    "1e309",
    "١٢٣",
    "0x10",
    "1,,,,",
    "9223372036854775808",
    "-99999999999999999999 GiB",
)


def test_hostile_numbers_in_every_placeholder_are_dropped_not_stored(catalog: Catalog) -> None:
    """Each catalogued message, each of its placeholders filled with hostile text: reading the
    line never raises, and every fact it yields is of its type and inside its domain."""
    from advisor.parsing.values import FACT_TYPES, NUMBER_DOMAINS, in_domain

    checked = 0
    for message in catalog.messages:
        slots = message.placeholders()
        for name, _kind in slots:
            if name.startswith("_") or name not in NUMBER_DOMAINS:
                continue
            for bad in HOSTILE:
                values = {n: ("7" if k != "size" else "7 GiB") for n, k in slots}
                values[name] = bad
                for _, facts in catalog.match(message.render(values)):
                    for key, value in facts.items():
                        assert isinstance(value, FACT_TYPES[key]) or (
                            FACT_TYPES[key] is float and isinstance(value, int)
                        ), (message.id, key, value)
                        if key in NUMBER_DOMAINS:
                            assert in_domain(key, value), (message.id, key, bad, value)
                checked += 1
    assert checked > 500
