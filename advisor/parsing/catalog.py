"""The message catalogue: the producers' own format strings as data (`rules/catalog/*.toml`).

Each message is a template — the text as printed, with `{fact:kind}` placeholders — that
compiles to a regular expression whose groups are facts, read in their units (sizes as GiB,
signs kept) and range-checked like every other number read from a log. `Catalog.match(body)`
finds the messages a line is (a word index picks the few templates worth trying), and a
message with a label is also a rule (`advisor.diagnosis.rules`). docs/catalog.md describes
the format; `python -m advisor.parsing.catalog FILE…` checks files.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from advisor.core.errors import InputError
from advisor.core.toml import load_toml
from advisor.parsing.phases import Phase
from advisor.parsing.values import FACT_TYPES, NUMBER_DOMAINS, in_domain, read_value

CatalogLabel = Literal[
    "sampler_warmup_oom",
    "kv_cache_oom",
    "weights_load_oom",
    "cuda_graph_oom",
    "runtime_oom",
    "gpu_memory_held",
    "wedged_stop",
    "nccl_error",
    "gpu_hardware_fault",
    "other_crash",
    "healthy",
    "oom",
]
Writer = Literal[
    "vllm",
    "sglang",
    "tgi",
    "systemd",
    "kernel",
    "docker",
    "torch",
    "nccl",
    "gloo",
    "transformers",
    "llamacpp",
    "candle-vllm",
    "python",
]
DEFAULT_CONFIDENCE: Final = 0.9
MIN_LITERAL: Final = 8  # characters of literal text a template needs (else it matches anything)

_NUM = r"[+-]?(?:[0-9][0-9,]*(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?"
_SIZE_UNITS: Final = {
    "bytes": 0,
    "B": 0,
    "KiB": 1,
    "MiB": 2,
    "GiB": 3,
    "TiB": 4,
    "KB": 1,
    "MB": 2,
    "GB": 3,
    "TB": 4,
}
_UNIT_ALT = "|".join(sorted(_SIZE_UNITS, key=len, reverse=True))
# kind → (pattern, GiB per stated unit for the size kinds)
KINDS: Final[dict[str, tuple[str, float | None]]] = {
    "int": (r"[+-]?[0-9][0-9,]*", None),
    "num": (_NUM, None),
    "gib": (_NUM, 1.0),
    "mib": (_NUM, 1 / 1024),
    "kib": (_NUM, 1 / 1024**2),
    "bytes": (_NUM, 1 / 1024**3),
    "gb": (_NUM, 1e9 / 1024**3),
    "mb": (_NUM, 1e6 / 1024**3),
    "size": (rf"{_NUM} ?(?:{_UNIT_ALT})\b", None),
    "word": (r"\S+", None),
    "text": (r".*?", None),
    "unit": (r"[\w:@.\\-]+\.(?:service|scope|socket|target|mount|slice|timer|swap|path)", None),
    "hex": (r"(?:0x)?[0-9a-fA-F]+", None),
}
_SIZE_KINDS: Final = frozenset({"gib", "mib", "kib", "bytes", "gb", "mb", "size"})
_PLACEHOLDER = re.compile(r"\{(\w+)(?::(\w+))?\}")
_CONDITION = re.compile(r"^\s*(\w+)\s*(<=|>=|==|!=|<|>)\s*([+-]?[0-9]+(?:\.[0-9]+)?)\s*$")
_WORD = re.compile(r"[A-Za-z]{4,}")
_OPS: Final = {
    "<": float.__lt__,
    "<=": float.__le__,
    ">": float.__gt__,
    ">=": float.__ge__,
    "==": float.__eq__,
    "!=": float.__ne__,
}


# ------------------------------------------------------------------ templates
@dataclass(frozen=True)
class Template:
    """A template compiled: its regular expression, the kind of each fact group, its literal
    text (for the word index) and its placeholders in order."""

    regex: re.Pattern[str]
    kinds: dict[str, str]
    literal: str
    words: tuple[str, ...]

    def read(self, m: re.Match[str]) -> dict[str, Any]:
        """The facts of a match, each in its fact's type and domain (others left out)."""
        out: dict[str, Any] = {}
        for name, raw in m.groupdict().items():
            if raw is None:
                continue
            value = read_placeholder(name, self.kinds[name], raw)
            if value is not None:
                out[name] = value
        return out


def compile_template(template: str) -> Template:
    """The template as a regular expression; ValueError naming what is wrong."""
    parts: list[str] = []
    literal: list[str] = []
    kinds: dict[str, str] = {}
    words: list[str] = []
    pos = 0
    items = list(_PLACEHOLDER.finditer(template))
    for n, m in enumerate(items):
        text = template[pos : m.start()]
        parts.append(_literal(text))
        literal.append(text)
        words.extend(_inner_words(text))
        name, kind = m.group(1), m.group(2) or "text"
        if kind not in KINDS:
            raise ValueError(
                f"placeholder {{{name}:{kind}}}: unknown kind (one of {', '.join(KINDS)})"
            )
        pattern = KINDS[kind][0]
        if kind == "text" and n == len(items) - 1 and not template[m.end() :].strip():
            pattern = r".*"  # a trailing text placeholder takes the rest of the line
        if name == "_":
            parts.append(f"(?:{pattern})")
        else:
            _check_fact(name, kind)
            if name in kinds:
                raise ValueError(f"placeholder {name!r} appears twice")
            kinds[name] = kind
            parts.append(f"(?P<{name}>{pattern})")
        pos = m.end()
    tail = template[pos:]
    parts.append(_literal(tail))
    literal.append(tail)
    words.extend(_inner_words(tail))
    joined = "".join(literal)
    if len(joined.strip()) < MIN_LITERAL:
        raise ValueError(
            f"template has {len(joined.strip())} literal characters, fewer than {MIN_LITERAL}"
        )
    return Template(re.compile("".join(parts)), kinds, joined, tuple(words))


def _literal(text: str) -> str:
    return " +".join(re.escape(chunk) for chunk in re.split(r" +", text))


def _inner_words(text: str) -> list[str]:
    """Words of a literal chunk that are whole words in any line the template matches: those
    not touching the chunk's ends (a placeholder, or the open end of the template, where a
    line may glue letters on)."""
    return [m.group() for m in _WORD.finditer(text) if m.start() > 0 and m.end() < len(text)]


def _check_fact(name: str, kind: str) -> None:
    if name not in FACT_TYPES:
        raise ValueError(f"placeholder {name!r} is not a fact (see FACT_TYPES)")
    if name.endswith("_gib") != (kind in _SIZE_KINDS):
        raise ValueError(f"placeholder {name!r}: *_gib facts and only they take a size kind")
    if FACT_TYPES[name] is int and kind not in ("int", "hex"):
        raise ValueError(f"placeholder {name!r} is an integer fact: kind int or hex")
    if FACT_TYPES[name] is float and kind not in _SIZE_KINDS | {"num", "int"}:
        raise ValueError(f"placeholder {name!r} is a number fact: a number kind")


def read_placeholder(name: str, kind: str, raw: str) -> Any:
    """The value a placeholder states as its fact's type; None when it is not one (out of
    its domain, not finite, too long)."""
    if len(raw) > 60:
        return None
    kind_type = FACT_TYPES[name]
    if kind in _SIZE_KINDS:
        value: Any = _gib_of(kind, raw)
    elif kind == "hex":
        try:
            value = int(raw.removeprefix("0x"), 16)
        except ValueError:
            return None
    elif kind_type is int:
        digits = raw.replace(",", "")
        value = int(digits) if re.fullmatch(r"[+-]?[0-9]+", digits) else None
    elif kind_type is float:
        value = _decimal(raw)
    else:
        text = read_value(name, raw)  # `None`, `auto`, `torch.` prefixes: as everywhere
        return text if isinstance(text, str) and text else None
    if value is None:
        return None
    if name in NUMBER_DOMAINS and not in_domain(name, value):
        return None
    return value


def _decimal(raw: str) -> float | None:
    try:
        value = float(Decimal(raw.replace(",", "")))
    except (InvalidOperation, ValueError):
        return None
    return value if math.isfinite(value) else None


def _gib_of(kind: str, raw: str) -> float | None:
    if kind == "size":
        m = re.fullmatch(rf"({_NUM}) ?({_UNIT_ALT})", raw.strip())
        if m is None:
            return None
        number = _decimal(m.group(1))
        if number is None:
            return None
        return number * 1024.0 ** (_SIZE_UNITS[m.group(2)] - 3)
    number = _decimal(raw)
    factor = KINDS[kind][1]
    assert factor is not None
    return None if number is None else number * factor


# ------------------------------------------------------------------ conditions
@dataclass(frozen=True)
class Condition:
    fact: str
    op: str
    value: float

    def holds(self, facts: Mapping[str, Any]) -> bool:
        got = facts.get(self.fact)
        if isinstance(got, bool) or not isinstance(got, int | float):
            return False
        return _OPS[self.op](float(got), self.value)

    def __str__(self) -> str:
        return f"{self.fact} {self.op} {self.value:g}"


def parse_condition(text: str) -> Condition:
    m = _CONDITION.match(text)
    if m is None:
        raise ValueError(f"condition {text!r} is not `FACT OP NUMBER`")
    fact, op, value = m.groups()
    if fact not in FACT_TYPES or FACT_TYPES[fact] not in (int, float):
        raise ValueError(f"condition {text!r}: {fact!r} is not a number fact")
    return Condition(fact, op, float(value))


# ------------------------------------------------------------------ the file format
class ProducerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,40}$")
    repository: str = Field(min_length=3)
    writes: Writer


class MessageSpec(BaseModel):
    """One message as written in a catalogue file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,80}$")
    source: str = Field(min_length=1)
    versions: str = ""
    format: str = Field(min_length=1)
    template: str = Field(min_length=1)
    label: CatalogLabel | None = None
    when: tuple[str, ...] = ()
    confidence: float | None = Field(default=None, gt=0, le=1)
    phase: Phase | None = None
    meaning: str = Field(min_length=1)
    examples: tuple[str, ...] = Field(min_length=1)

    @field_validator("versions")
    @classmethod
    def _specifier(cls, value: str) -> str:
        try:
            SpecifierSet(value)
        except InvalidSpecifier as e:
            raise ValueError(f"versions {value!r} is not a PEP 440 specifier set") from e
        return value

    @field_validator("when")
    @classmethod
    def _conditions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            parse_condition(text)
        return value


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    producer: ProducerSpec
    message: list[dict[str, Any]] = Field(default_factory=list)


@dataclass(frozen=True)
class Message:
    spec: MessageSpec
    producer: ProducerSpec
    origin: str
    template: Template
    when: tuple[Condition, ...]

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def confidence(self) -> float:
        return self.spec.confidence or DEFAULT_CONFIDENCE

    def read(self, body: str) -> dict[str, Any] | None:
        """The message's facts if `body` is this message, else None."""
        m = self.template.regex.search(body)
        return None if m is None else self.template.read(m)

    def conditions_hold(self, facts: Mapping[str, Any]) -> bool:
        return all(c.holds(facts) for c in self.when)

    def render(self, values: Mapping[str, str]) -> str:
        """The template with its placeholders filled: `values` by fact name (or `_N` for
        the N-th anonymous placeholder, counted from 0). ValueError for one left empty."""
        anonymous = iter(range(1_000))

        def fill(m: re.Match[str]) -> str:
            name = m.group(1)
            key = f"_{next(anonymous)}" if name == "_" else name
            if key not in values:
                raise ValueError(f"message {self.id}: no value for placeholder {key}")
            return values[key]

        return _PLACEHOLDER.sub(fill, self.spec.template)

    def placeholders(self) -> list[tuple[str, str]]:
        """(name, kind) of each placeholder in order; anonymous ones named `_0`, `_1`, …"""
        out, n = [], 0
        for m in _PLACEHOLDER.finditer(self.spec.template):
            name, kind = m.group(1), m.group(2) or "text"
            if name == "_":
                name, n = f"_{n}", n + 1
            out.append((name, kind))
        return out


def _build(spec: MessageSpec, producer: ProducerSpec, origin: str) -> Message:
    try:
        template = compile_template(spec.template)
    except (ValueError, re.error) as e:
        raise InputError(f"{origin}: message {spec.id}: field template: {e}") from e
    when = tuple(parse_condition(t) for t in spec.when)
    where = f"{origin}: message {spec.id}"
    if when and spec.label is None:
        raise InputError(f"{where}: `when` needs a label")
    for condition in when:
        if condition.fact not in template.kinds:
            raise InputError(f"{where}: condition on {condition.fact!r}, not a placeholder")
    if spec.confidence is not None and spec.label is None:
        raise InputError(f"{where}: `confidence` needs a label")
    message = Message(spec, producer, origin, template, when)
    for n, example in enumerate(spec.examples, start=1):
        if message.read(example) is None:
            raise InputError(f"{where}: example {n} does not match the template")
    return message


def load_catalog_file(path: Path, text: str | None = None) -> list[Message]:
    """The messages of one file; InputError naming the file, the message and the field."""
    data = load_toml(path, "catalogue file", text)
    try:
        container = _CatalogFile.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise InputError(f"{path}: {_where(err['loc'])}: {err['msg']}") from e
    out = []
    for n, raw in enumerate(container.message, start=1):
        name = raw.get("id") if isinstance(raw.get("id"), str) else f"#{n}"
        try:
            spec = MessageSpec.model_validate(raw)
        except ValidationError as e:
            err = e.errors()[0]
            raise InputError(
                f"{path}: message {name}: field {_where(err['loc'])}: {err['msg']}"
            ) from e
        out.append(_build(spec, container.producer, str(path)))
    return out


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(file)"


# ------------------------------------------------------------------ the catalogue
@dataclass(frozen=True)
class Catalog:
    """Every message, with a word index: a line's words pick the templates worth trying."""

    messages: tuple[Message, ...]
    index: Mapping[str, tuple[Message, ...]]
    unindexed: tuple[Message, ...]

    def by_id(self, message_id: str) -> Message | None:
        return next((m for m in self.messages if m.id == message_id), None)

    def candidates(self, body: str) -> list[Message]:
        seen: dict[str, Message] = {}
        for word in _WORD.findall(body):
            for message in self.index.get(word, ()):
                seen.setdefault(message.id, message)
        for message in self.unindexed:
            seen.setdefault(message.id, message)
        return list(seen.values())

    def match(self, body: str) -> list[tuple[Message, dict[str, Any]]]:
        """The messages `body` is, longest literal text first, with the facts each states."""
        found = []
        for message in self.candidates(body):
            facts = message.read(body)
            if facts is not None:
                found.append((message, facts))
        found.sort(key=lambda pair: -len(pair[0].template.literal))
        return found


def build_catalog(messages: Sequence[Message]) -> Catalog:
    ids: dict[str, str] = {}
    for message in messages:
        if message.id in ids:
            raise InputError(
                f"{message.origin}: message {message.id}: id already used in {ids[message.id]}"
            )
        ids[message.id] = message.origin
    counts: dict[str, int] = {}
    for message in messages:
        for word in set(message.template.words):
            counts[word] = counts.get(word, 0) + 1
    index: dict[str, list[Message]] = {}
    unindexed = []
    for message in messages:
        words = message.template.words
        if not words:
            unindexed.append(message)
            continue
        # The word fewest templates share, the longest of those: the sharpest key.
        key = min(words, key=lambda w: (counts[w], -len(w)))
        index.setdefault(key, []).append(message)
    return Catalog(tuple(messages), {k: tuple(v) for k, v in index.items()}, tuple(unindexed))


def shipped_catalog_files() -> list[tuple[str, str]]:
    """(name, text) of the catalogue files that ship with advisor."""
    folder = resources.files("advisor.rules").joinpath("catalog")
    if not folder.is_dir():
        return []
    return sorted(
        (entry.name, entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    )


@cache
def shipped_catalog() -> Catalog:
    """The shipped catalogue, loaded once."""
    messages: list[Message] = []
    for name, text in shipped_catalog_files():
        messages.extend(load_catalog_file(Path("rules/catalog") / name, text))
    return build_catalog(messages)


def check_files(paths: Iterable[Path]) -> list[str]:
    """One line per problem in the files (an empty list: they are valid together with the
    shipped files they do not replace)."""
    problems = []
    loaded: list[Message] = []
    names = set()
    for path in paths:
        names.add(path.name)
        try:
            loaded.extend(load_catalog_file(path))
        except InputError as e:
            problems.append(str(e))
    for name, text in shipped_catalog_files():
        if name not in names:
            try:
                loaded.extend(load_catalog_file(Path("rules/catalog") / name, text))
            except InputError as e:
                problems.append(f"(shipped) {e}")
    if not problems:
        try:
            build_catalog(loaded)
        except InputError as e:
            problems.append(str(e))
    return problems


def main(argv: Sequence[str]) -> int:
    paths = [Path(a) for a in argv]
    problems = check_files(paths)
    for line in problems:
        print(line, file=sys.stderr)
    if not problems:
        total = sum(len(load_catalog_file(p)) for p in paths)
        print(f"ok: {total} messages in {len(paths)} file(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
