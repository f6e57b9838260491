"""The seed scenario's store for the post-mortem tests: its journal and, when given, its
nvidia-smi samples, ingested through the CLI."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from advisor.cli.main import cli

UNIT = "vllm-minimax-m25.service"
FIRST = f"gpu-node-07/{UNIT}@2026-02-21T00:32:55.000000Z"  # the first incident's id


def seeded(sqlite_url: str, seed_journal: Path, seed_csv: Path | None) -> CliRunner:
    """Ingest the seed journal (and the GPU samples) into `sqlite_url`; the runner used."""
    runner = CliRunner()
    argvs = [["ingest", "journal", "--file", str(seed_journal)]]
    if seed_csv is not None:
        argvs.append(["ingest", "nvidia-smi", str(seed_csv), "--host", "gpu-node-07"])
    for argv in argvs:
        result = runner.invoke(cli, [*argv, "--db", sqlite_url])
        assert result.exit_code == 0, result.output
    return runner
