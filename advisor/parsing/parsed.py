"""A log line read: its prefix split off, the facts it states, the engine that wrote it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from advisor.parsing.facts import LineFacts, engine_hint, read_facts
from advisor.parsing.lines import LogLine, Split, clean_text, split_line


@dataclass(frozen=True, slots=True)
class Parsed:
    line: LogLine
    split: Split
    facts: LineFacts
    engine: str | None

    @property
    def body(self) -> str:
        return self.split.body

    @property
    def writer(self) -> object:
        s = self.split
        if s.pid is not None:
            return s.pid
        # SGLang's [time TP0] heads a record whose further lines carry no prefix.
        if s.process is not None and self.engine == "vllm":
            return s.process
        return self.line.pid


def parse(lines: Iterable[LogLine]) -> list[Parsed]:
    out = []
    for line in lines:
        split = split_line(
            clean_text(line.text), journal_identifier=line.identifier, transport=line.transport
        )
        engine = split.engine
        if engine is None and line.pid == 1 and line.identifier == "systemd":
            engine = "systemd"
        facts = read_facts(split.body, engine)
        if engine is None:
            engine = (
                engine_hint(split.body)
                if (
                    "vllm" in split.body.lower()
                    or "text_generation" in split.body
                    or "sglang" in split.body
                )
                else None
            )
        out.append(Parsed(line, split, facts, engine))
    return out


def own_pids(parsed: Iterable[Parsed]) -> set[int]:
    """The process ids the lines name as their writers (pid 1, systemd, aside)."""
    return {
        pid for p in parsed for pid in (p.split.pid, p.line.pid) if pid is not None and pid != 1
    }
