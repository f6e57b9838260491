"""An example under construction: its processes, its events and the clock they share."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .catalog import Gpu, Model, VGroup


@dataclass
class Proc:
    role: str  # api | ec | worker | engine (V0 MQ engine process)
    pid: int
    rank: int = 0


@dataclass
class Ev:
    src: str  # app | sys | kern | pre | other
    text: str
    t: float
    key: bool = False
    tag: str = ""  # tbhead | tqdm | blank | noise
    pid: int = 0
    ident: str = ""


@dataclass
class Ctx:
    rng: random.Random
    label: str
    engine: str
    version: str
    group: VGroup | None
    model: Model
    gpu: Gpu
    tp: int
    host: str
    unit: str
    desc: str
    ident: str
    start: datetime
    site: str
    py: str
    torch: str
    sysd: int
    status_fmt: str
    reword: bool
    keep_ansi: bool
    api: Proc = field(default_factory=lambda: Proc("api", 0))
    ec: Proc = field(default_factory=lambda: Proc("ec", 0))
    workers: list[Proc] = field(default_factory=list)
    t: float = 0.0
    evs: list[Ev] = field(default_factory=list)
    needs_sys: bool = False
    needs_kern: bool = False
    v0: bool = False
    util: float = 0.9
    max_len: int = 8192
    max_seqs: int = 256
    batched: int = 8192
    enforce_eager: bool = False
    port: int = 8000
    linenos: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    cpu_s: float = 0.0
    pci: list[str] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)
    mem: dict[str, float] = field(default_factory=dict)
    kbase: float = 0.0  # kernel uptime at t=0, for dmesg timestamps
    run_start: float = 0.0
    rec_engine: str = ""  # the engine recorded for the example when not ``engine``
    rec_version: str = ""
    block: list[tuple[str, bool]] = field(default_factory=list)  # a status block shown alone

    # ---- clock
    def adv(self, lo: float, hi: float | None = None) -> float:
        self.t += lo if hi is None else self.rng.uniform(lo, hi)
        return self.t

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.t)

    # ---- events
    def add(
        self, src: str, text: str, key: bool = False, tag: str = "", pid: int = 0, ident: str = ""
    ) -> None:
        self.t += self.rng.uniform(0.00002, 0.002)
        self.evs.append(Ev(src, text, self.t, key, tag, pid or self.api.pid, ident or self.ident))

    def app(self, text: str, key: bool = False, tag: str = "") -> None:
        self.add("app", text, key, tag)

    def apps(self, lines: list[str], key: bool = False, tag: str = "") -> None:
        for line in lines:
            self.app(line, key, tag)

    def sys(self, text: str, key: bool = False) -> None:
        self.add("sys", text, key, pid=1, ident="systemd")

    def kern(self, text: str, key: bool = False) -> None:
        self.add("kern", text, key, pid=0, ident="kernel")

    # ---- helpers
    def lineno(self, site: str) -> int:
        k = re.sub(r"[\d.,]+", "#", site)
        if k not in self.linenos:
            self.linenos[k] = self.rng.randrange(40, 4200)
        return self.linenos[k]

    def pick(self, canonical: str, variants: tuple[str, ...] | list[str]) -> str:
        """The decisive sentence as the engine writes it, or a paraphrase when rewording."""
        if self.reword and variants:
            return self.rng.choice(variants)
        return canonical

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    @property
    def grank(self) -> int:
        return self.group.rank if self.group else 0

    @property
    def status(self) -> str:
        if self.status_fmt == "combined":
            return f"{self.unit} - {self.desc}"
        if self.status_fmt == "description":
            return self.desc
        return self.unit
