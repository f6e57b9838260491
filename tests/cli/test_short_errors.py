"""Short ids in the CLI's `Error: …` lines, as everywhere else a person reads, and the short
id an error gives back taken where an id is taken.

Before: the line named the whole id (`action gpu-node-07/vllm-minimax-m25.service@2026-02-21T
00:33:27.400000Z#1 is rejected, not proposed`, 75 characters of it)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from advisor.cli.group import AdvisorGroup
from advisor.cli.main import cli
from advisor.core.errors import InputError
from advisor.core.ids import short_id

UNIT = "vllm-minimax-m25.service"
WEDGE_PLAN = f"gpu-node-07/{UNIT}@2026-02-21T00:33:27.400000Z"
INCIDENT = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"


@pytest.fixture
def seeded(sqlite_url: str, seed_journal: Path) -> str:
    """The seed scenario, ingested and diagnosed: two plans proposed."""
    args = ["ingest", "journal", "--file", str(seed_journal), "--db", sqlite_url]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    return sqlite_url


def test_an_error_naming_an_action_gives_its_short_id_and_that_id_is_taken(seeded: str) -> None:
    step = f"{WEDGE_PLAN}#1"
    rejected = CliRunner().invoke(cli, ["reject", step, "--why", "not now", "--db", seeded])
    assert rejected.exit_code == 0, rejected.output
    again = CliRunner().invoke(cli, ["approve", step, "--db", seeded])
    assert again.exit_code == 4
    short = f"{short_id(WEDGE_PLAN)}#1"
    assert again.stderr == f"Error: action {short} is rejected, not proposed\n"
    assert WEDGE_PLAN not in again.stderr
    # the short id the line gives back names the same action (not "no action …")
    by_short = CliRunner().invoke(cli, ["approve", short, "--db", seeded])
    assert (by_short.exit_code, by_short.stderr) == (4, again.stderr)


def test_the_group_shortens_every_id_in_an_error_and_keeps_the_rest() -> None:
    @click.group(cls=AdvisorGroup)
    def top() -> None:
        """The root."""

    @top.command()
    def fail() -> None:
        raise InputError(
            f"plan {WEDGE_PLAN}~2 of incident {INCIDENT}: step {WEDGE_PLAN}~2#3 failed\x07; "
            "not an id: a@b"
        )

    result = CliRunner().invoke(top, ["fail"])
    assert result.exit_code == 4
    assert result.stderr == (
        f"Error: plan {short_id(WEDGE_PLAN)}~2 of incident {short_id(INCIDENT)}: step "
        f"{short_id(WEDGE_PLAN)}~2#3 failed\\x07; not an id: a@b\n"
    )
