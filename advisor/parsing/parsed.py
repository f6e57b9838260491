"""A log line read: its prefix split off, the facts it states, the engine that wrote it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from advisor.core.engines import ALL, ENGINES
from advisor.core.slots import quick_init
from advisor.parsing.catalog import Catalog, shipped_catalog
from advisor.parsing.facts import LineFacts, read_facts, states_nothing
from advisor.parsing.lines import VLLM, LogLine, Split, clean_text, split_line
from advisor.parsing.phases import engine_hint
from advisor.parsing.values import CONFIG_FACTS


@quick_init
@dataclass(frozen=True, slots=True)
class Parsed:
    line: LogLine
    split: Split
    facts: LineFacts
    engine: str | None
    # The catalogue messages the line is (ids), most specific first.
    messages: tuple[str, ...] = ()

    @property
    def body(self) -> str:
        return self.split.body

    @property
    def writer(self) -> object:
        s = self.split
        if s.pid is not None:
            return s.pid
        # SGLang's [time TP0] heads a record whose further lines carry no prefix.
        if s.process is not None and self.engine == VLLM:
            return s.process
        return self.line.pid


def parse(lines: Iterable[LogLine], catalog: Catalog | None = None) -> list[Parsed]:
    """Each line read: prefix, facts (the catalogue's messages add theirs), writer."""
    catalog = catalog if catalog is not None else shipped_catalog()
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
            engine = engine_hint(split.body)
        messages, writer = _tag(catalog, split.body, facts) if not facts.noise else ((), None)
        if engine is None and writer in _KNOWN_BY_MESSAGES:
            engine = writer  # an engine whose lines carry no name of it: its messages do
        out.append(Parsed(line, split, facts, engine, messages))
    return out


# `starting` is every run's first phase and `shutdown` is the stop's own bookkeeping: a message
# of either says nothing the lifecycle lines do not.
_UNMARKED: Final = frozenset({None, "starting", "shutdown"})
# Engines whose lines neither carry a prefix nor a name of theirs (llama.cpp's server): their
# catalogue's messages say whose a line is.
_KNOWN_BY_MESSAGES: Final = frozenset(e.name for e in ALL if not e.recognition.mentions)
_ENGINE_WRITERS: Final = frozenset({*ENGINES, "candle-vllm", "transformers"})


def _tag(catalog: Catalog, body: str, facts: LineFacts) -> tuple[tuple[str, ...], str | None]:
    """The catalogue messages `body` is, and who wrote the first. A message that supports a
    label adds the facts it states to the line's (what the engine-specific readers found
    first stands); any message adds config facts; an engine's message marks the start-up
    phase it belongs to."""
    found = catalog.match(body)
    for message, stated in found:
        spec = message.spec
        for key, value in stated.items():
            if spec.label is not None or key in CONFIG_FACTS:
                facts.facts.setdefault(key, value)
        if (
            facts.phase is None
            and spec.phase not in _UNMARKED
            and spec.label is None
            and message.producer.writes in _ENGINE_WRITERS
        ):
            facts.phase = spec.phase
    writer = found[0][0].producer.writes if found else None
    return tuple(message.id for message, _ in found), writer


def routine(text: str, identifier: str | None = None, transport: str | None = None) -> bool:
    """Would `parse` call this line noise (a request's, an access log's, a throughput line)?
    Such a line changes no diagnosis: whatever reads it can wait. Cheaper than `parse`."""
    split = split_line(clean_text(text), journal_identifier=identifier, transport=transport)
    return states_nothing(split.body)


def own_pids(parsed: Iterable[Parsed]) -> set[int]:
    """The process ids the lines name as their writers (pid 1, systemd, aside)."""
    return {
        pid for p in parsed for pid in (p.split.pid, p.line.pid) if pid is not None and pid != 1
    }
