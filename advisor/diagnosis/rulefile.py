"""Rule files: the `[[rule]]` tables of `rules/*.toml` (and `--rules DIR`) validated into
`Rule`s, and the rules the message catalogue adds (`catalog.<message id>`). Matching them
against a run is `advisor.diagnosis.rules`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from advisor.core.engines import ENGINES
from advisor.core.errors import InputError
from advisor.core.taxonomy import OOM, TAXONOMY, Phase, RuleLabel
from advisor.core.toml import load_toml, validate_tables
from advisor.parsing.catalog import Catalog
from advisor.parsing.templates import Condition, ConditionText, Template, parse_condition
from advisor.parsing.values import FACT_KEYS, FACT_TYPES

Tier = Literal["failure", "fallback", "healthy"]  # tiers of rules, not a label
TIERS: Final = get_args(Tier)


def _an_engine(name: str) -> str:
    if name not in ENGINES:
        raise ValueError(f"{name!r} is not an engine advisor knows ({', '.join(ENGINES)})")
    return name


EngineName = Annotated[str, AfterValidator(_an_engine)]  # a name of the engine registry


class RuleSpec(BaseModel):
    """One rule as written in a file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,80}$")
    label: RuleLabel
    confidence: float = Field(gt=0, le=1)
    tier: Tier = "failure"
    description: str = ""
    engines: tuple[EngineName, ...] | None = None
    match: tuple[str, ...] = Field(min_length=1)
    also: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    phases: tuple[Phase, ...] | None = None
    after_ready: bool | None = None
    after_stop: bool | None = None
    died: bool | None = None
    facts: dict[str, bool | int | float | str] = Field(default_factory=dict)
    # `FACT OP NUMBER`: on the evidence line's facts and the run's (`kv_budget_gib < 0`).
    when: tuple[ConditionText, ...] = ()

    @field_validator("match", "also", "absent")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if info.context is _TEMPLATE and info.field_name == "match":
            return patterns  # a catalogue template's: compiled when a line first needs it
        for pattern in patterns:
            try:
                compiled = re.compile(pattern)
            except re.error as e:
                raise ValueError(f"pattern {pattern!r} does not compile: {e}") from e
            for name in compiled.groupindex:
                if name not in FACT_TYPES:
                    raise ValueError(
                        f"named group {name!r} is not a fact (one of {', '.join(FACT_KEYS)})"
                    )
        return patterns

    @field_validator("facts")
    @classmethod
    def _known_facts(cls, facts: dict[str, Any]) -> dict[str, Any]:
        for name in facts:
            if name not in FACT_TYPES:
                raise ValueError(f"{name!r} is not a fact")
        return facts


# Validation context of a catalogue message's rule: its pattern is the template's, valid by
# construction (advisor.parsing.templates) and compiled only when a line needs it.
_TEMPLATE: Final = {"pattern": "catalogue template"}


class _RuleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rule: list[dict[str, Any]] = Field(default_factory=list)


Reader = Callable[[re.Match[str]], dict[str, Any]]


@dataclass(frozen=True)
class Rule:
    spec: RuleSpec
    origin: str
    match: tuple[re.Pattern[str], ...]
    also: tuple[re.Pattern[str], ...]
    absent: tuple[re.Pattern[str], ...]
    when: tuple[Condition, ...] = ()
    # A rule made from a catalogue message: it looks only at lines parsing tagged with that
    # message, and reads its facts the message's way (units, signs). Its pattern is the
    # message's template (`match` is empty): compiled when a line first needs it.
    message: str | None = None
    reader: Reader | None = None
    template: Template | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        """The `match` patterns compiled (a catalogue rule's: its template's)."""
        return self.match if self.template is None else (self.template.regex,)


def compile_rule(spec: RuleSpec, origin: str) -> Rule:
    return Rule(
        spec,
        origin,
        tuple(re.compile(p) for p in spec.match),
        tuple(re.compile(p) for p in spec.also),
        tuple(re.compile(p) for p in spec.absent),
        tuple(parse_condition(t) for t in spec.when),
    )


def load_file(path: Path, text: str | None = None) -> list[Rule]:
    """Rules of one file; InputError naming the file, the rule and the field when bad."""
    data = load_toml(path, "rule file", text)
    try:
        container = _RuleFile.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{path}: expected only [[rule]] tables: {e.errors()[0]['msg']}") from e
    specs = validate_tables(path, "rule", container.rule, RuleSpec)
    return [compile_rule(spec, str(path)) for spec in specs]


def shipped_rule_files() -> list[tuple[str, str]]:
    """(name, text) of the rule files that ship with advisor."""
    folder = resources.files("advisor.rules")
    return sorted(
        (entry.name, entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    )


# An out-of-memory message means what the phase it happened in makes of it: one variant per
# phase it may hit, as the taxonomy ranks them (`OomWhen`).
_OOM_BY_PHASE: Final = tuple(
    (when.suffix, spec.name, when.cap, dict(when.conditions))
    for spec in TAXONOMY.values()
    for when in spec.oom
)


def catalog_rules(catalog: Catalog) -> list[Rule]:
    """A rule for each catalogue message with a label (`oom`: one per phase it may hit)."""
    out = []
    for message in catalog.messages:
        spec = message.spec
        if spec.label is None:
            continue
        origin = f"{message.origin} (catalogue)"
        base = {
            "description": spec.meaning,
            "match": (message.template.pattern,),
            "when": spec.when,
        }
        if spec.label == OOM:
            variants = [
                (
                    f"catalog.{spec.id}.{suffix}",
                    label,
                    min(message.confidence, cap),
                    extra,
                )
                for suffix, label, cap, extra in _OOM_BY_PHASE
            ]
        else:
            variants = [
                (
                    f"catalog.{spec.id}",
                    spec.label,
                    min(message.confidence, TAXONOMY[spec.label].cap or 1.0),
                    dict(TAXONOMY[spec.label].catalogue),
                )
            ]
        for rule_id, label, confidence, extra in variants:
            rule_spec = RuleSpec.model_validate(
                {**base, **extra, "id": rule_id, "label": label, "confidence": confidence},
                context=_TEMPLATE,
            )
            out.append(
                Rule(
                    rule_spec,
                    origin,
                    (),
                    (),
                    (),
                    tuple(parse_condition(t) for t in rule_spec.when),
                    message.id,
                    message.template.read,
                    message.template,
                )
            )
    return out
