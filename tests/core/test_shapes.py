"""The shapes (`advisor.core.shapes`) accept only what the models accept, exactly as given:
every field of every shaped payload type and of the envelope, set to each of a pool of
hostile values on top of a valid event, is either refused by the shapes (and then judged by
the models: `prepare` falls back to them) or accepted by both with no value coerced; a valid
event passes the shapes; and `prepare` stores the same rows through either path."""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from advisor.core import events
from advisor.core.errors import InvalidEventError
from advisor.core.events import PAYLOAD_TYPES, NewEvent, prepare
from advisor.core.shapes import batch_adapter, shape_of

MODELS = TypeAdapter(list[NewEvent], config=ConfigDict(strict=True))
SHAPED = events._SHAPED
assert SHAPED is not None
ADAPTER, SHAPED_TYPES = SHAPED

POOL: list[Any] = [
    None,
    "",
    "a",
    "h/u.service",
    "x" * 5000,
    "ab" * 32,  # what a hash field (hex, 64 digits) takes
    "tab\there",
    "nul\x00",
    "\x7f",
    "ünï",
    0,
    1,
    -1,
    2**63 - 1,
    2**63,
    2**70,
    1.5,
    float("nan"),
    True,
    False,
    [],
    ["a"],
    {},
    {"k": "v"},
    {"k": 1},
    {"k": None},
    {1: "v"},
    b"bytes",
    ("t",),
]


def _accepts_models(raw: list[dict[str, Any]]) -> bool:
    try:
        MODELS.validate_python(raw)
    except ValidationError:
        return False
    return True


def _disagrees(raw: list[dict[str, Any]]) -> bool:
    """The shapes accept what the models refuse, or what the models would change."""
    if not _accepts_shapes(raw):
        return False
    try:
        models = MODELS.validate_python(raw)
    except ValidationError:
        return True
    return any(
        not _same(m.model_dump(exclude_unset=True), r) for m, r in zip(models, raw, strict=True)
    )


def _same(held: Any, given: Any) -> bool:
    """The model holds what was given; an int given for a float field is the one coercion
    strict validation makes (a JSON number either way: `prepare` stores the given one)."""
    if isinstance(held, dict) and isinstance(given, dict):
        return held.keys() == given.keys() and all(_same(held[k], given[k]) for k in held)
    if isinstance(held, float) and type(given) is int:
        return True
    return type(held) is type(given) and (held == given or (held != held and given != given))


def _accepts_shapes(raw: list[dict[str, Any]]) -> bool:
    try:
        ADAPTER.validate_python(raw)
    except ValidationError:
        return False
    return True


def _candidates(annotation: Any) -> list[Any]:
    literals: list[Any] = []
    for arg in (annotation, *get_args(annotation)):
        if get_origin(arg) is Literal:
            literals.extend(get_args(arg))
    return literals + POOL


def _valid_payload(type_: str) -> dict[str, Any]:
    """A payload of `type_` the model accepts: each required field given the first candidate
    that the model takes."""
    model = PAYLOAD_TYPES[type_]
    payload: dict[str, Any] = {"type": type_}
    for name, info in model.model_fields.items():
        if name == "type" or not info.is_required():
            continue
        for value in _candidates(info.annotation):
            payload[name] = value
            if _accepts_models([_event(payload)]) or name != _first_missing(model, payload):
                break
    assert _accepts_models([_event(payload)]), payload
    return payload


def _first_missing(model: type[BaseModel], payload: dict[str, Any]) -> str | None:
    try:
        model.model_validate(payload, strict=True)
    except ValidationError as e:
        return str(e.errors()[0]["loc"][0])
    return None


def _event(payload: dict[str, Any], **envelope: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"stream": "h/u.service", "time_us": 1, "source": "s", "key": 2}
    return {**base, **envelope, "payload": payload}


@pytest.mark.parametrize("type_", sorted(SHAPED_TYPES))
def test_each_field_of_a_shaped_payload_is_judged_as_the_model_judges_it(type_: str) -> None:
    base = _valid_payload(type_)
    model = PAYLOAD_TYPES[type_]
    cases = [{**base, "unknown_field": "x"}, {k: v for k, v in base.items() if k != "type"}]
    for name, info in model.model_fields.items():
        cases.append({k: v for k, v in base.items() if k != name})  # missing
        cases.extend({**base, name: value} for value in _candidates(info.annotation))
    assert [case for case in cases if _disagrees([_event(case)])] == []
    assert _accepts_shapes([_event(base)])  # a valid payload takes the fast path


def test_each_envelope_field_is_judged_as_the_model_judges_it() -> None:
    payload = {"type": "log.recorded", "origin": "journald", "message": "m"}
    cases = [_event(payload, extra="x")]
    for name in ("stream", "time_us", "source", "key"):
        cases.append({k: v for k, v in _event(payload).items() if k != name})
        cases.extend(_event(payload, **{name: value}) for value in POOL)
    cases.extend({**_event(payload), "payload": value} for value in POOL)
    assert [c for c in cases if _disagrees([c])] == []
    assert _accepts_shapes([_event(payload)])  # a valid event takes the fast path
    refused = [c for c in cases if not _accepts_models([c])]
    assert refused and not any(_accepts_shapes([c]) for c in refused)


def test_prepare_stores_the_same_rows_through_shapes_and_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = [
        _event({"type": "log.recorded", "origin": "journald", "message": f"line {i}", "pid": i})
        for i in range(5)
    ] + [_event({**_valid_payload("run.classified"), "phase": None})]
    shaped = prepare(raw)
    monkeypatch.setattr(events, "_SHAPED", None)
    assert prepare(raw) == shaped


@pytest.mark.parametrize("kind", [["log.recorded"], {"t": 1}, None, 7, "no.such.type"])
def test_a_payload_type_that_names_no_shaped_type_is_refused_by_the_models(kind: Any) -> None:
    with pytest.raises(InvalidEventError):
        prepare([_event({"type": kind, "origin": "journald"})])


def test_a_model_with_a_nested_model_or_a_validator_has_no_shape() -> None:
    assert shape_of(PAYLOAD_TYPES["gpu.sampled"]) is None  # processes: tuple[GpuProcess, ...]
    assert "gpu.sampled" not in SHAPED_TYPES
    assert "log.recorded" in SHAPED_TYPES

    class Checked(BaseModel):
        model_config = ConfigDict(extra="forbid")
        n: int

        @classmethod
        def __get_validators__(cls) -> Any:  # pragma: no cover - not called
            yield from ()

    from pydantic import field_validator

    class Validated(Checked):
        @field_validator("n")
        @classmethod
        def positive(cls, v: int) -> int:
            return v

    assert shape_of(Checked) is not None
    assert shape_of(Validated) is None
    assert batch_adapter(NewEvent, {"gpu.sampled": PAYLOAD_TYPES["gpu.sampled"]}) is None
