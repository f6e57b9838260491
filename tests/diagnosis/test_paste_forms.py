"""The same log, pasted every way people paste it, gets the same diagnosis.

Each raw golden log (terminal output: no journal, container or dmesg wrapper) is rewritten in
the forms operators paste logs in — journalctl's short forms, `docker logs -t`, `kubectl logs`
with `--prefix` and `--timestamps`, docker compose (v1 and v2, coloured, with timestamps), Ray's
worker prefixes, a terminal or tmux window that wrapped long lines, Windows line ends, a
Markdown quote or code fence, a whole traceback joined into one line with literal `\\n` — and
must keep the golden label, the facts the golden file checks and its evidence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli
from tests.classifying import FileClassifier

GOLDEN = Path(__file__).parents[1] / "golden"
_WRAPPED = re.compile(r"^(\d{4}-\d\d-\d\d|[A-Z][a-z]{2} +\d|\[\s*\d+\.\d+\]|[●○×↻◌*] |.{0,30}\| )")
_START = datetime(2026, 12, 3, 10, 0, 0, 123456, tzinfo=UTC)
_PROCESS = re.compile(r"^\((?P<name>[A-Za-z][\w .=-]{0,60}?) pid=(?P<pid>\d{1,10})\) ")


def _raw_cases() -> list[Path]:
    """The golden plain-text logs that carry no wrapper of their own."""
    cases = []
    for expected in sorted(GOLDEN.glob("*/*.expected.json")):
        log = expected.with_name(expected.name.removesuffix(".expected.json") + ".log")
        if not log.exists():
            continue
        lines = [t for t in log.read_text(errors="replace").splitlines() if t.strip()]
        if not any(_WRAPPED.match(t) for t in lines):
            cases.append(expected)
    return cases


def _iso(i: int) -> str:
    t = _START + timedelta(milliseconds=37 * i)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond:06d}417Z"


def _syslog(i: int, precise: bool = False) -> str:
    t = _START + timedelta(milliseconds=37 * i)
    return f"{t:%b %d %H:%M:%S}" + (f".{t.microsecond:06d}" if precise else "")


def _journal(lines: list[str]) -> list[str]:
    return [f"{_syslog(i)} gpu-node-3 vllm[48211]: {t}" for i, t in enumerate(lines)]


def _journal_precise(lines: list[str]) -> list[str]:
    return [f"{_syslog(i, True)} gpu-node-3 python3[48211]: {t}" for i, t in enumerate(lines)]


def _journal_iso(lines: list[str]) -> list[str]:
    return [f"{_iso(i)[:19]}+0000 gpu-node-3 vllm[48211]: {t}" for i, t in enumerate(lines)]


def _docker(lines: list[str]) -> list[str]:
    return [f"{_iso(i)} {t}" for i, t in enumerate(lines)]


def _kubectl_prefix(lines: list[str]) -> list[str]:
    return [f"[pod/vllm-7d9c6f5b8-x2klp/vllm] {t}" for t in lines]


def _kubectl_prefix_timestamps(lines: list[str]) -> list[str]:
    return [f"[pod/vllm-7d9c6f5b8-x2klp/vllm] {_iso(i)} {t}" for i, t in enumerate(lines)]


def _compose_v2(lines: list[str]) -> list[str]:
    return [f"vllm-1  | {t}" for t in lines]


def _compose_v1(lines: list[str]) -> list[str]:
    return [f"inference_vllm_1    | {t}" for t in lines]


def _compose_coloured_timestamps(lines: list[str]) -> list[str]:
    return [f"\x1b[36mllm-server-1  | \x1b[0m{_iso(i)} {t}" for i, t in enumerate(lines)]


def _ray_prefix(prefix: str) -> Callable[[list[str]], list[str]]:
    """Ray's actor or task prefix (`prefix`, formatted with the pid) in place of vLLM's own
    process prefix; other lines as they are."""

    def ray(lines: list[str]) -> list[str]:
        out = []
        for t in lines:
            m = _PROCESS.match(t)
            out.append(f"{prefix.format(pid=m['pid'])} {t[m.end() :]}" if m else t)
        return out

    return ray


def _wrap(width: int, pad: bool = False) -> Callable[[list[str]], list[str]]:
    """A terminal `width` columns wide, copied: long lines cut into rows of `width`
    characters (tmux's copy-mode keeps the rows apart, padded with spaces when `pad`)."""

    def wrap(lines: list[str]) -> list[str]:
        out = []
        for t in lines:
            t = t.expandtabs()
            rows = [t[i : i + width] for i in range(0, max(len(t), 1), width)]
            out += [r.ljust(width) if pad else r for r in rows]
        return out

    return wrap


def _crlf(lines: list[str]) -> list[str]:
    return [t + "\r" for t in lines]


def _quoted(lines: list[str]) -> list[str]:
    return [f"> {t}" for t in lines]


def _fenced(lines: list[str]) -> list[str]:
    return ["Here is the log:", "", "```", *lines, "```", "", "Any idea?"]


def _joined(lines: list[str]) -> list[str]:
    """The whole log as one line with literal `\\n` between lines (a JSON string printed)."""
    return ["\\n".join(lines)]


FORMS: dict[str, Callable[[list[str]], list[str]]] = {
    "journalctl-short": _journal,
    "journalctl-short-precise": _journal_precise,
    "journalctl-short-iso": _journal_iso,
    "docker-timestamps": _docker,
    "kubectl-prefix": _kubectl_prefix,
    "kubectl-prefix-timestamps": _kubectl_prefix_timestamps,
    "compose-v2": _compose_v2,
    "compose-v1": _compose_v1,
    "compose-coloured-timestamps": _compose_coloured_timestamps,
    "ray-worker": _ray_prefix("(RayWorkerWrapper pid={pid}, ip=10.20.0.7)"),
    "ray-bare-pid": _ray_prefix("(pid={pid})"),
    "terminal-80": _wrap(80),
    "terminal-120": _wrap(120),
    "tmux-100-padded": _wrap(100, pad=True),
    "crlf": _crlf,
    "markdown-quote": _quoted,
    "markdown-fence": _fenced,
    "joined-literal-newlines": _joined,
}


@pytest.fixture(scope="module")
def classifier() -> FileClassifier:
    return FileClassifier()


CASES = _raw_cases()


def test_there_are_raw_golden_logs_of_most_labels() -> None:
    labels = {json.loads(p.read_text())["label"] for p in CASES}
    assert len(CASES) >= 25 and len(labels) >= 9, (len(CASES), labels)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("expected", CASES, ids=lambda p: f"{p.parent.name}/{p.name[:-14]}")
def test_a_pasted_form_keeps_the_diagnosis(
    expected: Path, form: str, classifier: Callable[[Path], dict[str, Any]], tmp_path: Path
) -> None:
    want = json.loads(expected.read_text())
    log = expected.with_name(expected.name.removesuffix(".expected.json") + ".log")
    lines = log.read_text(errors="replace").splitlines()
    pasted = tmp_path / "pasted.log"
    pasted.write_bytes(("\n".join(FORMS[form](lines)) + "\n").encode())
    got = classifier(pasted)
    assert got["label"] == want["label"], (got["candidates"], got["evidence"])
    for key, value in want.get("facts", {}).items():
        assert got["facts"][key] == value, f"fact {key}"
    texts = [e["text"] for e in got["evidence"]]
    for fragment in want.get("evidence_contains", []):
        assert any(fragment in t for t in texts), (fragment, texts)


def test_the_forms_change_the_text() -> None:
    """Every form rewrites a line (a form that left the log as it is would test nothing)."""
    sample = ["(VllmWorkerProcess pid=4211) INFO 12-03 10:00:01 [x.py:1] " + "y" * 130, "z"]
    for name, form in FORMS.items():
        assert form(sample) != sample, name


STORED = [
    "cuda_graph_oom/ticket-capture-tail-4090",
    "kv_cache_oom/sglang-0523-qwen3moe-docker",
    "nccl_error/sglang-capture-gloo",
]


@pytest.mark.parametrize("form", ["compose-v2", "kubectl-prefix-timestamps"])
@pytest.mark.parametrize("case", STORED)
def test_a_collectors_prefix_is_read_from_the_store_too(
    case: str, form: str, sqlite_url: str, tmp_path: Path
) -> None:
    """`advisor ingest text` stores the lines as they are; the fold reads them through the
    same splitter, so a docker compose or kubectl log is diagnosed as the raw one is."""
    want = json.loads((GOLDEN / f"{case}.expected.json").read_text())
    lines = (GOLDEN / f"{case}.log").read_text(errors="replace").splitlines()
    log = tmp_path / "server.log"
    log.write_bytes(("\n".join(FORMS[form](lines)) + "\n").encode())
    runner = CliRunner()
    ingested = runner.invoke(
        cli,
        [
            "ingest",
            "text",
            str(log),
            "--service",
            "llm.service",
            "--host",
            "n1",
            "--db",
            sqlite_url,
        ],
    )
    assert ingested.exit_code == 0, ingested.output
    listed = runner.invoke(cli, ["incidents", "--json", "--db", sqlite_url])
    assert listed.exit_code == 0, listed.output
    assert [i["label"] for i in json.loads(listed.stdout)] == [want["label"]]
