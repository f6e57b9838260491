"""Auto-remediation: a policy allows kinds per unit, within rate limits, cooldowns, bounds and
a number of attempts; what it does not allow waits for a person."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.execution.backends import DryRunBackend
from advisor.execution.decisions import plan_rows, reject
from advisor.pipeline.auto import auto_once
from advisor.planning.policy import History, Policy, decide, load_policy
from advisor.store import EventFilter, EventStore, open_store

UNIT = "vllm-minimax-m25.service"
SAMPLER_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"
WEDGE_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:33:27.400000Z"
ALL = (
    '["hold_restarts", "kill", "wait_gpu_free", "set_flag", "set_unit_option", '
    '"reset_failed", "restart"]'
)
NOW = 1_800_000_000_000_000


def _policy(tmp_path: Path, extra: str = "", units: str = "vllm-*.service") -> Path:
    path = tmp_path / "policy.toml"
    rate = "" if "max_actions_per_hour" in extra else "max_actions_per_hour = 20\n"
    path.write_text(f'cooldown_s = 0\n{rate}{extra}\n[[allow]]\nunits = "{units}"\nkinds = {ALL}\n')
    return path


def test_a_policy_applies_what_it_allows(diagnosed: EventStore, tmp_path: Path) -> None:
    backend = DryRunBackend()
    report = auto_once(diagnosed, backend, load_policy(_policy(tmp_path)), "policy.toml")
    assert report.applied == [SAMPLER_PLAN, WEDGE_PLAN] and report.left == {}
    assert backend.done[:5] == [
        f"hold restarts of {UNIT}",
        f"set --max-num-seqs 256 on {UNIT}",
        f"wait up to 30 s for {UNIT}'s GPU memory",
        f"reset-failed {UNIT}",
        f"restart {UNIT}",
    ]
    rows = plan_rows(diagnosed, SAMPLER_PLAN)
    assert {r.decided_by for r in rows if not r.alternative} == {"policy:policy.toml"}
    assert (
        auto_once(diagnosed, DryRunBackend(), load_policy(_policy(tmp_path)), "policy.toml").applied
        == []
    )


def test_nothing_runs_that_no_rule_allows(diagnosed: EventStore, tmp_path: Path) -> None:
    backend = DryRunBackend()
    policy = load_policy(_policy(tmp_path, units="sglang-*.service"))
    report = auto_once(diagnosed, backend, policy, "p")
    assert backend.done == [] and "no rule allows hold_restarts" in report.left[SAMPLER_PLAN]


def test_bounds_rate_limits_and_dry_run(diagnosed: EventStore, tmp_path: Path) -> None:
    bounded = load_policy(_policy(tmp_path, '[bounds]\n"--max-num-seqs" = { min = 512 }'))
    report = auto_once(diagnosed, DryRunBackend(), bounded, "p")
    assert "--max-num-seqs 256 is below the policy's lower bound 512" in report.left[SAMPLER_PLAN]
    assert report.applied == [WEDGE_PLAN]
    limited = load_policy(_policy(tmp_path, "max_actions_per_hour = 0"))
    assert (
        "more than the policy's max_actions_per_hour 0"
        in auto_once(diagnosed, DryRunBackend(), limited, "p").left[SAMPLER_PLAN]
    )
    dry = load_policy(_policy(tmp_path, "dry_run = true"))
    backend = DryRunBackend()
    assert auto_once(diagnosed, backend, dry, "p").would == [SAMPLER_PLAN]
    assert backend.done == []


def test_a_rejected_step_never_runs_even_under_a_policy(
    diagnosed: EventStore, tmp_path: Path
) -> None:
    reject(diagnosed, f"{WEDGE_PLAN}#0", "human:test", "investigating")
    backend = DryRunBackend()
    report = auto_once(diagnosed, backend, load_policy(_policy(tmp_path)), "p")
    assert f"kill {UNIT}" not in backend.done and "rejected" in report.left[WEDGE_PLAN]


def test_the_rate_limit_counts_every_step(diagnosed: EventStore, tmp_path: Path) -> None:
    # 6 an hour: the sampler plan's 5 main steps fit; the wedge plan's 4 more would make 9.
    policy = load_policy(_policy(tmp_path, "max_actions_per_hour = 6"))
    backend = DryRunBackend()
    report = auto_once(diagnosed, backend, policy, "p")
    assert report.applied == [SAMPLER_PLAN]
    assert "4 more action(s) after 5 in the last hour" in report.left[WEDGE_PLAN]
    assert len(backend.done) == 5
    approvals = list(diagnosed.read(EventFilter(type="action.approved")))
    assert len(approvals) == 5


def test_cooldown_and_attempts() -> None:
    policy = Policy.model_validate(
        {"allow": [{"units": "*", "kinds": ["set_flag"]}], "cooldown_s": 300, "max_attempts": 2}
    )
    step = {"kind": "set_flag", "unit": "v.service", "flag": "--max-num-seqs", "value": 64}
    recent = History(NOW, [], NOW - 60_000_000, 1)
    assert (
        "cooldown: v.service changed 60 s ago, 240 s to go"
        in decide(policy, step, "x", 0.95, recent).why
    )
    assert decide(policy, step, "x", 0.95, History(NOW, [], NOW - 400_000_000, 1)).allowed
    many = History(NOW, [], None, 3)
    assert "more than max_attempts 2" in decide(policy, step, "x", 0.95, many).why
    assert "below the policy's 0.90" in decide(policy, step, "x", 0.6, many).why


def test_a_bad_policy_file_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[[allow]]\nunits = "*"\nkinds = ["reboot"]\n')
    with pytest.raises(InputError, match=r"p.toml: field allow.0.kinds.0: Input should be"):
        load_policy(path)


def test_auto_cli_once(sqlite_url: str, seed_journal: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    runner.invoke(cli, ["ingest", "journal", "--file", str(seed_journal), "--db", sqlite_url])
    result = runner.invoke(
        cli,
        [
            "auto",
            "--policy",
            str(_policy(tmp_path)),
            "--once",
            "--backend",
            "dry-run",
            "--interval",
            "1",
            "--db",
            sqlite_url,
        ],
    )
    assert result.exit_code == 0
    assert result.output == (
        f"dry run: would apply {SAMPLER_PLAN}\ndry run: would apply {WEDGE_PLAN}\n"
    )
    # A dry run records nothing: every step is still proposed.
    rows = plan_rows(open_store(sqlite_url), SAMPLER_PLAN)
    assert {r.status for r in rows} == {"proposed"}


def test_auto_takes_its_policy_from_the_settings_file(
    sqlite_url: str, seed_journal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "advisor.toml"
    config.write_text(f"policy = {str(_policy(tmp_path))!r}\n")
    monkeypatch.setenv("ADVISOR_CONFIG", str(config))
    runner = CliRunner()
    runner.invoke(cli, ["ingest", "journal", "--file", str(seed_journal), "--db", sqlite_url])
    args = ["auto", "--once", "--backend", "dry-run", "--db", sqlite_url]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert f"dry run: would apply {SAMPLER_PLAN}" in result.output
    # The flag wins over the settings: a policy that allows nothing here applies nothing.
    other = tmp_path / "other" / "policy.toml"
    other.parent.mkdir()
    other.write_text('[[allow]]\nunits = "sglang-*.service"\nkinds = ["notify"]\n')
    result = runner.invoke(cli, [*args, "--policy", str(other)])
    assert result.exit_code == 0 and "would apply" not in result.output, result.output


def test_auto_without_a_policy_is_a_usage_error(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISOR_CONFIG", str(tmp_path / "empty.toml"))
    (tmp_path / "empty.toml").write_text("")
    result = CliRunner().invoke(cli, ["auto", "--once", "--db", sqlite_url])
    assert result.exit_code == 2
    assert "auto needs a policy: --policy FILE, or `policy` in the settings" in result.output
