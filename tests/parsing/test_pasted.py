"""`unpaste`: what a paste's carrier did is undone, and nothing else is touched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from advisor.diagnosis.classify import diagnose
from advisor.diagnosis.model import load_model
from advisor.diagnosis.rules import load_rules
from advisor.parsing.lines import LogLine, lines_from_texts, split_line, starts_a_record
from advisor.parsing.pasted import HEAD, MAX_JOINED_ROWS, lines_from_paste, unpaste
from advisor.pipeline.inputs import read_log

GOLDEN = Path(__file__).parents[1] / "golden"
_FENCE = "```"


def _texts(texts: list[str]) -> list[str]:
    return [line.text for line in lines_from_paste(texts)]


def test_every_golden_log_reads_the_same_but_for_its_fences() -> None:
    """No golden log is cut by a terminal: nothing may be joined, split or stripped in any
    of them, whatever its shape (journal, docker, kubectl, status, dmesg, raw)."""
    checked = 0
    for log in sorted(GOLDEN.glob("*/*.log")):
        _, lines = read_log(str(log))
        plain = [t for t in log.read_bytes().decode(errors="replace").split("\n") if t.strip()]
        want = [t.removesuffix("\r") for t in plain if not t.lstrip().startswith(_FENCE)]
        assert [line.text for line in lines] == want, log
        checked += 1
    assert checked >= 100


def _bodies(texts: list[str]) -> list[str]:
    return [split_line(t).body for t in _texts(texts)]


def test_a_compose_prefix_leaves_a_tracebacks_indentation() -> None:
    got = _bodies(
        [
            "vllm-1  | Traceback (most recent call last):",
            'vllm-1  |   File "/usr/lib/python3/dist-packages/vllm/worker.py", line 9, in run',
            "vllm-1  |     self.load_model()",
            "vllm-1  | torch.OutOfMemoryError: CUDA out of memory.",
        ]
    )
    assert got == [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/vllm/worker.py", line 9, in run',
        "    self.load_model()",
        "torch.OutOfMemoryError: CUDA out of memory.",
    ]


def test_kubectl_and_compose_v1_prefixes_go_and_a_table_stays() -> None:
    got = _bodies(
        [
            "[pod/vllm-7d9c6f5b8-x2klp/vllm] INFO 12-03 10:00:01 [api_server.py:1] ready",
            "infra_vllm_1      | INFO 12-03 10:00:02 [api_server.py:1] ready",
            "| GPU | Name | Memory |",
            "node-1 | something an operator typed",
        ]
    )
    assert got == ["ready", "ready", "| GPU | Name | Memory |", "something an operator typed"]


def test_a_prompt_with_escaped_newlines_in_a_request_log_is_not_split() -> None:
    """Literal `\\n`s inside a line of a real log are the line's own (a logged prompt): they
    split only a paste of a few lines that is a whole log joined into one string. A prompt
    that writes an OOM after a `\\n` stays a prompt, and the server stays healthy."""
    lines = [
        "INFO 12-03 10:00:00 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
        "INFO 12-03 10:00:05 [logger.py:39] Received request cmpl-1: prompt: "
        "'a\\nb\\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\\nc', "
        "params: SamplingParams(n=1)",
        'INFO:     10.0.0.9:51234 - "POST /v1/completions HTTP/1.1" 200 OK',
    ]
    assert _texts(lines) == lines
    verdict = diagnose(lines_from_paste(lines), load_rules(), load_model()).primary
    assert verdict is not None and verdict.label == "healthy"


def test_a_joined_log_is_split_at_its_literal_newlines() -> None:
    lines = ["Traceback (most recent call last):", '  File "x.py", line 1', "    f()", "E: x"]
    assert _texts(["\\n".join(lines)]) == lines
    assert _texts(["\\n".join(lines[:3])]) == ["\\n".join(lines[:3])]  # two are not enough


def test_repeated_long_lines_that_no_terminal_cut_stay_apart() -> None:
    """Four TP workers print the same long line: the longest length repeats, but each next
    line begins a record of its own."""
    line = "(VllmWorkerProcess pid={}) INFO 12-03 10:00:01 [worker.py:1] " + "w" * 70
    lines = [line.format(p) for p in range(4211, 4215)] + [
        "INFO:     Application startup complete."
    ]
    assert _texts(lines) == lines


def test_rows_cut_at_a_usual_width_are_joined_even_when_one_line_was_cut() -> None:
    line = (
        "ERROR 12-03 10:00:01 [core.py:1] ValueError: "
        + "x" * 60
        + " estimated maximum model length is 19280"
    )
    rows = [line[:80], line[80:], "INFO:     Shutting down"]
    assert _texts(rows) == [line, "INFO:     Shutting down"]


def test_a_row_cut_at_a_space_is_joined_and_tmux_padding_is_dropped() -> None:
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. "
        "GPU 0 has a total capacity of 23.57 GiB"
    )
    width = line.index(" of 23.57") + 1  # the first row ends in the space before "of"
    rows = [line[i : i + width] for i in range(0, len(line), width)]
    padded = [r.ljust(width) for r in rows] + ["INFO:     done".ljust(width)] * 3
    assert _texts(padded) == [line, "INFO:     done", "INFO:     done", "INFO:     done"]


def test_endless_full_rows_are_joined_a_bounded_number_at_a_time() -> None:
    """Hostile input: a million rows of a terminal's width, none beginning a line, never
    becomes one line held whole."""
    rows = (LogLine(number=n, text="x" * 80) for n in range(1, 1_000_001))
    lengths = {len(line.text) for line in unpaste(rows)}
    assert lengths == {80 * MAX_JOINED_ROWS, 80 * (1_000_000 % MAX_JOINED_ROWS)} - {0}


def test_width_is_not_guessed_from_lines_longer_than_any_terminal() -> None:
    lines = ["x" * 600, "y" * 120, "continued"]
    assert _texts(lines) == lines


def test_a_markdown_quote_is_read_only_when_every_line_is_quoted() -> None:
    quoted = ["> INFO 12-03 10:00:01 [core.py:1] a", ">", "> ERROR 12-03 10:00:02 [core.py:1] b"]
    assert _texts(quoted) == [
        "INFO 12-03 10:00:01 [core.py:1] a",
        "ERROR 12-03 10:00:02 [core.py:1] b",
    ]
    mixed = ["I saw this:", "> ERROR 12-03 10:00:02 [core.py:1] b"]
    assert _texts(mixed) == mixed


def test_a_paste_longer_than_its_head_is_read_as_it_is_consumed() -> None:
    """The width is decided on the first HEAD lines; the rest streams through."""
    line = "INFO 12-03 10:00:01 [core.py:1] " + "z" * 100
    count = HEAD + 2000

    def rows() -> Iterator[LogLine]:
        for n in range(count):
            yield LogLine(number=2 * n + 1, text=line[:80])
            yield LogLine(number=2 * n + 2, text=line[80:])

    out = unpaste(rows())
    first = next(out)
    assert (first.number, first.text) == (1, line)
    rest = list(out)
    assert len(rest) == count - 1 and all(r.text == line for r in rest)
    assert rest[-1].number == 2 * count - 1


def test_ray_prefixes_name_the_process_and_pid() -> None:
    worker = split_line("(RayWorkerWrapper pid=4321, ip=10.20.0.7) INFO 12-03 10:00:01 [w.py:1] x")
    assert (worker.process, worker.pid, worker.engine, worker.body) == (
        "RayWorkerWrapper",
        4321,
        "vllm",
        "x",
    )
    task = split_line("(pid=77) ERROR something broke")
    assert (task.process, task.pid, task.engine, task.body) == (
        None,
        77,
        None,
        "ERROR something broke",
    )


def test_what_begins_a_line() -> None:
    starts = [
        "Dec 03 10:00:01 gpu-node-3 vllm[48211]: x",
        "2026-12-03T10:00:01.123456789Z x",
        "[  12.345678] NVRM: Xid",
        "(EngineCore_DP0 pid=1) INFO 12-03 10:00:01 [x.py:1] y",
        "INFO 12-03 10:00:01 [x.py:1] y",
        "INFO:     Started server process [1]",
        "[2026-12-03 10:00:01 TP0] Load weight begin.",
        '  File "x.py", line 1, in f',
        "Traceback (most recent call last):",
        "torch.OutOfMemoryError: CUDA out of memory.",
        "llama_model_load: error loading model",
        "● vllm.service - vLLM",
        "vllm-1  | continues a row of its own",
    ]
    assert [t for t in starts if not starts_a_record(t)] == []
    cut = [
        "ory: 78.62 GiB",
        " memory: 78.62 GiB",
        "*'], allowed_methods=['*']",
        "[00:04<00:00]",
        "len': 65536}",
    ]
    assert [t for t in cut if starts_a_record(t)] == []


def test_lines_from_texts_is_left_as_the_texts() -> None:
    """The plain helper does not unpaste: only the readers of pasted text do."""
    assert [line.text for line in lines_from_texts(["a | b", "```"])] == ["a | b", "```"]
