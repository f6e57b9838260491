"""Message templates: the text as printed with `{fact:kind}` placeholders, compiled to a
regular expression whose groups are facts read in their units (sizes as GiB, signs kept) and
range-checked like every number read from a log; and `FACT OP NUMBER` conditions on facts.
The catalogue (`advisor.parsing.catalog`) is made of them."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cached_property
from typing import Annotated, Any, Final

from pydantic import AfterValidator

from advisor.parsing.values import FACT_TYPES, NUMBER_DOMAINS, SIZE_UNITS, in_domain, read_value

MIN_LITERAL: Final = 8  # characters of literal text a template needs (else it matches anything)

_NUM = r"[+-]?(?:[0-9][0-9,]*(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?"
_UNIT_ALT = "|".join(sorted(SIZE_UNITS, key=len, reverse=True))
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
PLACEHOLDER = re.compile(r"\{(\w+)(?::(\w+))?\}")
_CONDITION = re.compile(r"^\s*(\w+)\s*(<=|>=|==|!=|<|>)\s*([+-]?[0-9]+(?:\.[0-9]+)?)\s*$")
WORD = re.compile(r"[A-Za-z]{4,}")
_SPACES = re.compile(r" +")
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
    """A template read: its regular expression (compiled when first used: a catalogue's
    word index tries only a few templates per line), the kind of each fact group, its
    literal text and the words for the word index."""

    pattern: str
    kinds: dict[str, str]
    literal: str
    words: tuple[str, ...]

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

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
    """The template as a regular expression (its text: `Template.regex` compiles it when
    first used); ValueError naming what is wrong."""
    parts: list[str] = []
    literal: list[str] = []
    kinds: dict[str, str] = {}
    words: list[str] = []
    pos = 0
    items = list(PLACEHOLDER.finditer(template))
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
    return Template("".join(parts), kinds, joined, tuple(words))


def _literal(text: str) -> str:
    return " +".join(map(re.escape, _SPACES.split(text)))


def _inner_words(text: str) -> list[str]:
    """Words of a literal chunk that are whole words in any line the template matches: those
    not touching the chunk's ends (a placeholder, or the open end of the template, where a
    line may glue letters on)."""
    return [m.group() for m in WORD.finditer(text) if m.start() > 0 and m.end() < len(text)]


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
        return number * 1024.0 ** (SIZE_UNITS[m.group(2)] - 3)
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


def _checked_condition(text: str) -> str:
    parse_condition(text)
    return text


# A condition as written in a file (`kv_budget_gib < 0`), checked when the file is read.
ConditionText = Annotated[str, AfterValidator(_checked_condition)]
