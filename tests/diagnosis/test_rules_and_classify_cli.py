"""Rule files (validation, overrides, the offline tester) and `advisor classify` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.taxonomy import LABELS
from advisor.diagnosis.rules import load_rules
from tests.conftest import run_advisor

SAMPLER_LINE = (
    "(Worker_TP0 pid=7) ERROR 02-21 00:33:16 [multiproc_executor.py:671] RuntimeError: "
    "CUDA out of memory occurred when warming up sampler with 512 dummy requests."
)


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_shipped_rules_cover_every_failure_label_and_healthy() -> None:
    labels = {r.spec.label for r in load_rules().rules}
    assert labels == set(LABELS) - {"unknown"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[rule]]\nid = "x"\nlabel = "kv_cache_oom"\nconfidence = 1.5\nmatch = ["a"]\n',
            "rules.toml: rule x: field confidence: Input should be less than or equal to 1",
        ),
        (
            '[[rule]]\nid = "y"\nlabel = "not_a_label"\nconfidence = 0.5\nmatch = ["a"]\n',
            "rules.toml: rule y: field label: Input should be",
        ),
        (
            '[[rule]]\nid = "z"\nlabel = "other_crash"\nconfidence = 0.5\nmatch = ["(unclosed"]\n',
            "rules.toml: rule z: field match: Value error, pattern '(unclosed' does not compile",
        ),
        (
            '[[rule]]\nid = "g"\nlabel = "other_crash"\nconfidence = 0.5\n'
            'match = ["(?P<nonsense>\\\\d+)"]\n',
            "rules.toml: rule g: field match: Value error, named group 'nonsense' is not a fact",
        ),
        (
            '[[rule]]\nlabel = "other_crash"\nconfidence = 0.5\nmatch = ["a"]\n',
            "rules.toml: rule #1: field id: Field required",
        ),
        (
            '[[rule]]\nid = "w"\nlabel = "other_crash"\nconfidence = 0.5\nmatch = ["a"]\n'
            "unless = 1\n",
            "rules.toml: rule w: field unless: Extra inputs are not permitted",
        ),
        (
            '[[rule]]\nid = "c"\nlabel = "kv_cache_oom"\nconfidence = 0.5\nmatch = ["a"]\n'
            'when = ["available_kv_cache_gib is negative"]\n',
            "rules.toml: rule c: field when.0: Value error, condition "
            "'available_kv_cache_gib is negative' is not `FACT OP NUMBER`",
        ),
        ("[[rule]\n", "rules.toml: not valid TOML"),
    ],
)
def test_a_bad_rule_file_names_file_rule_and_field(tmp_path: Path, text: str, message: str) -> None:
    folder = tmp_path / "mine"
    _write(folder, "rules.toml", text)
    with pytest.raises(InputError) as info:
        load_rules([folder])
    assert message in str(info.value)
    assert str(folder / "rules.toml") in str(info.value)


def test_user_rules_override_shipped_ones_by_id_and_add_new_ones(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    _write(
        folder,
        "local.toml",
        """
[[rule]]
id = "vllm.sampler-warmup-oom"
label = "sampler_warmup_oom"
confidence = 0.6
match = ['warming up sampler with (?P<dummy_requests>\\d+) dummy requests']

[[rule]]
id = "site.licence-server"
label = "other_crash"
confidence = 0.9
match = ['licence server unreachable']
""",
    )
    rules = load_rules([folder])
    replaced = rules.by_id("vllm.sampler-warmup-oom")
    assert replaced is not None and replaced.spec.confidence == 0.6
    assert replaced.origin.endswith("local.toml")
    assert rules.by_id("site.licence-server") is not None
    _write(
        folder,
        "again.toml",
        '[[rule]]\nid = "site.licence-server"\nlabel = "other_crash"\n'
        'confidence = 0.5\nmatch = ["x"]\n',
    )
    with pytest.raises(InputError, match="id already used in"):
        load_rules([folder])


def test_classify_json_contract_and_rules_option(tmp_path: Path) -> None:
    log = _write(tmp_path, "paste.log", SAMPLER_LINE + "\n")
    result = CliRunner().invoke(cli, ["classify", str(log), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["label"] == "sampler_warmup_oom"
    assert out["facts"]["dummy_requests"] == 512 and out["facts"]["max_num_seqs"] is None
    assert out["evidence"] == [
        {"line": 1, "text": SAMPLER_LINE, "message": "vllm.v1.sampler-warmup.oom"}
    ]
    assert out["corroborated"] is True
    assert [(a["kind"], a.get("flag"), a.get("value")) for a in out["actions"]] == [
        ("hold_restarts", None, None),
        ("set_flag", "--max-num-seqs", 256),
        ("wait_gpu_free", None, None),
        ("reset_failed", None, None),
        ("restart", None, None),
    ]
    folder = _write(
        tmp_path / "r",
        "x.toml",
        """
[[rule]]
id = "vllm.sampler-warmup-oom"
label = "other_crash"
confidence = 0.99
match = ['warming up sampler']
""",
    ).parent
    result = CliRunner().invoke(cli, ["classify", str(log), "--json", "--rules", str(folder)])
    assert json.loads(result.output)["candidates"][0] == {
        "label": "other_crash",
        "confidence": 0.99,
        "source": "rules",
        "rule": "vllm.sampler-warmup-oom",
    }


def test_rules_test_and_list(tmp_path: Path) -> None:
    log = _write(tmp_path, "paste.log", SAMPLER_LINE + "\n")
    runner = CliRunner()
    result = runner.invoke(cli, ["rules", "test", "vllm.sampler-warmup-oom", str(log)])
    assert result.exit_code == 0 and "line 1" in result.output
    result = runner.invoke(cli, ["rules", "test", "nccl.error", str(log)])
    assert result.exit_code == 1 and "does not fire" in result.output
    result = runner.invoke(cli, ["rules", "test", "no.such.rule", str(log)])
    assert result.exit_code == 4 and "no rule with id 'no.such.rule'" in result.output
    result = runner.invoke(cli, ["rules", "list", "--json"])
    assert {r["id"] for r in json.loads(result.output)} >= {"nccl.error", "healthy.ready"}


def test_classify_as_a_process_on_stdin_and_bad_inputs(tmp_path: Path) -> None:
    done = run_advisor("classify", "-", "--json", input=(SAMPLER_LINE + "\n").encode())
    assert done.returncode == 0 and json.loads(done.stdout)["label"] == "sampler_warmup_oom"
    missing = run_advisor("classify", str(tmp_path / "nope.log"))
    assert missing.returncode == 4
    assert missing.stderr.decode().strip() == f"Error: {tmp_path / 'nope.log'}: no such file"
    empty = _write(tmp_path, "empty.log", "\n\n")
    assert run_advisor("classify", str(empty)).returncode == 4
    binary = tmp_path / "system.journal"
    binary.write_bytes(b"LPKSHHRH\x00\x00\x01\x02" * 100)
    done = run_advisor("classify", str(binary))
    assert done.returncode == 4 and b"binary data, not a log" in done.stderr
    broken = _write(
        tmp_path, "broken.jsonl", '{"MESSAGE": "x", "__REALTIME_TIMESTAMP": "1"}\n{not json\n'
    )
    done = run_advisor("classify", str(broken))  # the good line is classified, the bad one noted
    assert done.returncode == 0
    assert b"skipped 1 malformed line(s) (first: line 2: invalid JSON" in done.stderr
    only_bad = _write(tmp_path, "bad.jsonl", '{"__REALTIME_TIMESTAMP": "x"}\n{not json\n')
    done = run_advisor("classify", str(only_bad))
    assert done.returncode == 4 and b"none of its 2 line(s) could be read (line 1:" in done.stderr


def test_unknown_when_there_is_no_evidence(tmp_path: Path) -> None:
    log = _write(
        tmp_path,
        "bare.log",
        "Mar 16 06:12:50 gpu01 systemd[1]: vllm.service: Main process exited, "
        "code=exited, status=1/FAILURE\n",
    )
    out = json.loads(CliRunner().invoke(cli, ["classify", str(log), "--json"]).output)
    assert out["label"] == "unknown"
    assert out["facts"]["exit_code"] == 1


def test_classify_the_seed_scenario(seed_journal: Path) -> None:
    out = json.loads(CliRunner().invoke(cli, ["classify", str(seed_journal), "--json"]).output)
    assert (out["label"], out["facts"]["phase"]) == ("sampler_warmup_oom", "sampler_warmup")
    facts = out["facts"]
    assert (facts["max_num_seqs"], facts["max_model_len"], facts["tensor_parallel_size"]) == (
        1024,
        131072,
        4,
    )
    assert facts["tried_to_allocate_gib"] == 782 / 1024
    assert facts["free_gib"] == 411.62 / 1024
    assert facts["total_capacity_gib"] == 94.97
    assert facts["model"] == "MiniMaxAI/MiniMax-M2.5" and facts["vocab_size"] is None
    assert [r["label"] for r in out["runs"]] == ["sampler_warmup_oom", "wedged_stop"]
    assert any("warming up sampler with 1024 dummy requests" in e["text"] for e in out["evidence"])


def test_a_hung_task_after_a_stop_request_is_a_wedged_stop(tmp_path: Path) -> None:
    log = _write(
        tmp_path,
        "hung.log",
        "\n".join(
            [
                "Mar 16 06:12:38 gpu01 systemd[1]: Stopping vllm.service - vLLM...",
                "Mar 16 06:12:38 gpu01 vllm[42]: INFO 03-16 06:12:38 [launcher.py:99] Shutting "
                "down FastAPI HTTP server.",
                "Mar 16 06:14:41 gpu01 kernel: INFO: task VLLM::EngineCor:4711 blocked for more "
                "than 120 seconds.",
                "Mar 16 06:14:41 gpu01 kernel:       "
                "Tainted: P           OE      6.1.0-18-amd64 #1",
            ]
        )
        + "\n",
    )
    out = json.loads(CliRunner().invoke(cli, ["classify", str(log), "--json"]).output)
    assert out["label"] == "wedged_stop"
    assert any("blocked for more than 120 seconds" in e["text"] for e in out["evidence"])
