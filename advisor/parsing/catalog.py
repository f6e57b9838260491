"""The message catalogue: the producers' own format strings as data (`rules/catalog/*.toml`).

Each message is a template — the text as printed, with `{fact:kind}` placeholders — that
compiles to a regular expression whose groups are facts, read in their units (sizes as GiB,
signs kept) and range-checked like every other number read from a log. `Catalog.match(body)`
finds the messages a line is (a word index picks the few templates worth trying; a template
is compiled when first tried), and a message with a label is also a rule
(`advisor.diagnosis.rules`). docs/catalog.md describes the format;
`python -m advisor.parsing.catalog FILE…` checks files.

Every message's examples are matched against its template when its file is loaded, except in
the files advisor ships (`SHIPPED_FILES`, by name): the test suite checks theirs
(tests/parsing/test_catalog.py), and start-up does not pay for it again.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from advisor.core.engines import ENGINES
from advisor.core.errors import InputError
from advisor.core.taxonomy import CatalogLabel, Phase
from advisor.core.toml import load_toml, validate_tables
from advisor.parsing.templates import (
    PLACEHOLDER,
    WORD,
    Condition,
    ConditionText,
    Template,
    compile_template,
    parse_condition,
)

# Who writes a catalogued message: an engine of the registry, or a program beside it.
OTHER_WRITERS: Final = (
    "systemd",
    "kernel",
    "docker",
    "torch",
    "nccl",
    "gloo",
    "transformers",
    "candle-vllm",
    "python",
)
if TYPE_CHECKING:
    Writer = str
else:
    Writer = Literal[(*ENGINES, *OTHER_WRITERS)]
DEFAULT_CONFIDENCE: Final = 0.9
# The catalogue files advisor ships: the test suite matches their examples against their
# templates, so loading them does not. Any other file in the folder (an operator's own, or a
# new engine's until it is listed here) has its examples checked when it is loaded, and a
# broken one stops the load with a one-line error.
SHIPPED_FILES: Final = frozenset(
    {
        "candle-vllm.toml",
        "docker.toml",
        "gloo.toml",
        "kernel.toml",
        "llamacpp.toml",
        "nccl.toml",
        "sglang.toml",
        "systemd.toml",
        "tgi.toml",
        "torch.toml",
        "transformers.toml",
        "vllm.toml",
    }
)
__all__ = [
    "OTHER_WRITERS",
    "SHIPPED_FILES",
    "Catalog",
    "Message",
    "MessageSpec",
    "ProducerSpec",
    "Writer",
    "build_catalog",
    "load_catalog_file",
    "shipped_catalog",
]


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
    when: tuple[ConditionText, ...] = ()
    confidence: float | None = Field(default=None, gt=0, le=1)
    phase: Phase | None = None
    meaning: str = Field(min_length=1)
    examples: tuple[str, ...] = Field(min_length=1)

    @field_validator("versions")
    @classmethod
    def _specifier(cls, value: str) -> str:
        if not _is_specifier_set(value):
            raise ValueError(f"versions {value!r} is not a PEP 440 specifier set")
        return value


@cache
def _is_specifier_set(value: str) -> bool:
    """Whether `value` is a PEP 440 specifier set (the catalogue repeats a few hundred)."""
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return False
    return True


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

        return PLACEHOLDER.sub(fill, self.spec.template)

    def placeholders(self) -> list[tuple[str, str]]:
        """(name, kind) of each placeholder in order; anonymous ones named `_0`, `_1`, …"""
        out, n = [], 0
        for m in PLACEHOLDER.finditer(self.spec.template):
            name, kind = m.group(1), m.group(2) or "text"
            if name == "_":
                name, n = f"_{n}", n + 1
            out.append((name, kind))
        return out


def _build(spec: MessageSpec, producer: ProducerSpec, origin: str, check_examples: bool) -> Message:
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
    if not check_examples:
        return message
    for n, example in enumerate(spec.examples, start=1):
        if message.read(example) is None:
            raise InputError(f"{where}: example {n} does not match the template")
    return message


def load_catalog_file(
    path: Path, text: str | None = None, *, check_examples: bool = True
) -> list[Message]:
    """The messages of one file; InputError naming the file, the message and the field.
    `check_examples=False` leaves the examples unmatched (a shipped file: the tests match
    them)."""
    data = load_toml(path, "catalogue file", text)
    try:
        container = _CatalogFile.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise InputError(f"{path}: {_where(err['loc'])}: {err['msg']}") from e
    specs = validate_tables(path, "message", container.message, MessageSpec)
    return [_build(spec, container.producer, str(path), check_examples) for spec in specs]


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
        for word in WORD.findall(body):
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
    """The catalogue in advisor's folder, loaded once: the examples of a file advisor does
    not ship (`SHIPPED_FILES`) are checked."""
    messages: list[Message] = []
    for name, text in shipped_catalog_files():
        path = Path("rules/catalog") / name
        messages.extend(load_catalog_file(path, text, check_examples=name not in SHIPPED_FILES))
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
