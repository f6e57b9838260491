"""What one engine's registry entry holds (`advisor.core.engines`): how it is recognised, the
lines it prints when it is ready and when it echoes its arguments, the flags a plan may
change with their spellings, environment variables and safe bounds, and its remedies.

Data only: the stages read it (discovery and the executor the recognition, readiness and echo;
diagnosis the readiness; planning the flags and remedies), none of them lists engines itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# What a flag controls, in the planner's words: a remedy asks for a role ("lower the
# context"), each engine says which of its flags plays it.
Role = Literal[
    "concurrency",  # requests served at once (sampler warm-up, runtime memory)
    "context",  # the longest request, in tokens (KV cache for one request)
    "memory_fraction",  # the share of GPU memory the engine takes
    "kv_bytes",  # the KV cache's size, in bytes (instead of a fraction)
    "prefill",  # tokens in one prefill batch (warm-up, activations)
    "graph_batch",  # the largest batch captured as a CUDA graph
    "eager",  # no CUDA graphs at all (a switch)
    "parallel",  # GPUs one model is split over
    "gpu_layers",  # layers offloaded to the GPU
    "batch",  # tokens per decode batch
    "input",  # the longest prompt, in tokens
]


@dataclass(frozen=True)
class Range:
    """A safe range for a value a plan sets, whatever a log or a policy says."""

    low: float
    high: float
    integer: bool = True

    def holds(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not float(value).is_integer():
            return False
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Flag:
    """One command-line option of an engine.

    `name` is the spelling advisor writes (a long option); `aliases` are the other spellings
    the engine accepts and advisor must find (`-c`, `--max_num_seqs`); `env` the environment
    variable the engine reads the value from when the option is not given (TGI, llama.cpp);
    `echo` the name the engine's echo of its arguments prints it under; `fact` the fact a log
    states its value as; `bound` the range a plan may set it to (None: advisor never sets it).
    """

    name: str
    role: Role
    aliases: tuple[str, ...] = ()
    bound: Range | None = None
    env: str | None = None
    echo: str | None = None
    fact: str | None = None
    switch: bool = False  # takes no value

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class Recognition:
    """How a command line, a container or a log line names the engine.

    `programs`: the command's program has this file name (`/opt/venv/bin/vllm`; anywhere as
    a path, after a launcher such as `numactl`); `words`: a name distinct enough to be the
    engine wherever it stands (`numactl -N0 text-generation-launcher`);
    `serve`: a word with this file name followed by `serve` (`uv run vllm serve …`);
    `modules`: `python -m` this module or one inside it; `scripts`: a word whose path contains
    this; `images`: container image repositories whose entry point is the engine (the args
    after the image are its flags) — an image whose command is given after it is recognised
    by that command; `log_cues`: substrings only its own log lines carry (a unit logging one
    runs the engine); `mentions`: substrings that name it in any line (a traceback's path)."""

    programs: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    serve: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()
    images: tuple[str, ...] = ()
    log_cues: tuple[str, ...] = ()
    mentions: tuple[str, ...] = ()  # what names it in a line that has none of its prefixes


@dataclass(frozen=True)
class Cue:
    """A line the engine prints, as it prints it: `text` found in the line's body (after its
    log prefix is peeled off), or the whole body when `whole`."""

    text: str
    whole: bool = False

    def seen(self, body: str) -> bool:
        return body.strip() == self.text if self.whole else self.text in body


@dataclass(frozen=True)
class Echo:
    """The line in which the engine prints the arguments it runs with (`cue` in it), and how
    one argument's value is read from it (`pattern`, with `{key}` for the flag's echo name;
    group 1 is the value as printed)."""

    cue: str
    pattern: str

    def value(self, body: str, key: str) -> str | None:
        if self.cue not in body or len(body) > 200_000:
            return None
        m = re.search(self.pattern.replace("{key}", re.escape(key)), body)
        return None if m is None else m.group(1).strip("'\"")


@dataclass(frozen=True)
class Engine:
    """One inference engine: everything advisor knows of it, in one place."""

    name: str  # as facts, rules and events name it: "vllm"
    title: str  # as people write it: "vLLM"
    recognition: Recognition
    ready: tuple[Cue, ...]
    echo: tuple[Echo, ...] = ()
    flags: tuple[Flag, ...] = ()
    # label → the remedies (`advisor.planning` names them) tried in order; a label without
    # one gets the advice below and a `notify`.
    remedies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    advice: Mapping[str, str] = field(default_factory=dict)
    source: str = ""  # where its lines and flags were read from
    # Its version series, oldest first (the lowest version of each, its name): how the
    # learned model's hold-out groups its examples (`advisor.diagnosis.holdout`).
    eras: tuple[tuple[tuple[int, int], str], ...] = ()
    # The lines it prints for every request, or every few seconds, while it serves and all
    # is well (access logs, throughput): a host keeps them and ships only their digest
    # (`advisor.fleet.selection`). Only a line that can say nothing else belongs here.
    routine: tuple[Cue, ...] = ()

    def flag(self, name: str) -> Flag | None:
        """The flag spelled `name` (its name or an alias), None if the engine has none."""
        for flag in self.flags:
            if name in flag.spellings:
                return flag
        return None

    def role(self, role: Role) -> Flag | None:
        """The engine's flag for `role` (the first one settable), None if it has none."""
        for flag in self.flags:
            if flag.role == role and (flag.bound is not None or flag.switch):
                return flag
        return None

    def named(self, role: Role) -> Flag | None:
        """The engine's flag for `role`, settable or not (for advice in words)."""
        return next((f for f in self.flags if f.role == role), None)

    def say(self, template: str) -> str:
        """`template` with `{role}` replaced by the engine's flag for that role."""
        return re.sub(
            r"\{(\w+)\}",
            lambda m: f.name if (f := self.named(m.group(1))) is not None else m.group(0),  # type: ignore[arg-type]
            template,
        )

    def is_ready(self, body: str) -> bool:
        return any(cue.seen(body) for cue in self.ready)

    def echoed(self, body: str, flag: Flag) -> str | None:
        """The value the echo line `body` states for `flag`, None if it does not."""
        if flag.echo is None:
            return None
        for echo in self.echo:
            found = echo.value(body, flag.echo)
            if found is not None:
                return found
        return None
