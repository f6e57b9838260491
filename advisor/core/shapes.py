"""Events validated in bulk without building models: each payload model mirrored as a
`TypedDict` shape, made from the model's own fields and constraints.

Validating a batch of raw event dicts against the models builds a `NewEvent` and a payload
model per event only to throw them away (`prepare` serialises the dicts themselves); the same
schema over TypedDicts validates them about three times as fast. The models stay the
contract: a shape is made only for a model whose every field this module can mirror exactly
(plain types, `Literal`, optional, `dict` of plain values, constraints given in `Field`; no
nested model, no validator), and `prepare` falls back to the models for any other payload.
tests/core/test_shapes.py checks, field by field over hostile values, that each shape and its
model accept and refuse the same dicts.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from typing_extensions import TypedDict

__all__ = ["batch_adapter", "shape_of"]

_PLAIN = frozenset({str, int, float, bool, type(None)})
_CONFIG = ConfigDict(extra="forbid", strict=True)


def _mirrorable(annotation: Any) -> bool:
    """Whether `annotation` is made of plain types only (no model, no tuple of models)."""
    if annotation in _PLAIN:
        return True
    origin = get_origin(annotation)
    if origin is Literal:
        return all(type(a) in _PLAIN for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        return all(_mirrorable(a) for a in get_args(annotation))
    if origin is dict:
        key, value = get_args(annotation)
        return key is str and _mirrorable(value)
    return False


def shape_of(model: type[BaseModel]) -> Any:
    """The TypedDict shape of `model`, or None where it cannot be mirrored exactly."""
    if model.model_config.get("extra") != "forbid" or _has_validators(model):
        return None
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if info.alias not in (None, name) or not _mirrorable(info.annotation):
            return None
        annotation = _annotated(info.annotation, info.metadata)
        # The discriminator is required in a union of payloads, default or not.
        required = info.is_required() or name == "type"
        fields[name] = Required[annotation] if required else NotRequired[annotation]
    return _typed_dict(f"{model.__name__}Shape", fields)


def _typed_dict(name: str, fields: dict[str, Any]) -> Any:
    """A TypedDict class made at run time, validated strictly, extra keys refused."""
    make: Any = TypedDict
    shape = make(name, fields)
    shape.__pydantic_config__ = _CONFIG
    return shape


def _annotated(annotation: Any, metadata: list[Any]) -> Any:
    """The field's type with its constraints (`Field(min_length=…)` and the like)."""
    return Annotated[(annotation, *metadata)] if metadata else annotation


def _has_validators(model: type[BaseModel]) -> bool:
    decorators = model.__pydantic_decorators__
    return any(
        (
            decorators.validators,
            decorators.field_validators,
            decorators.root_validators,
            decorators.model_validators,
        )
    )


def batch_adapter(
    envelope: type[BaseModel], payloads: dict[str, type[BaseModel]]
) -> tuple[TypeAdapter[Any], frozenset[str]] | None:
    """A validator of lists of raw `envelope` dicts whose payloads are of the shaped types,
    and those types' names; None when the envelope itself cannot be mirrored."""
    shapes = {t: s for t, m in payloads.items() if (s := shape_of(m)) is not None}
    if not shapes:
        return None
    members = tuple(shapes.values())
    payload: Any = members[0]
    if len(members) > 1:
        payload = Annotated[Union[members], Field(discriminator="type")]  # noqa: UP007
    fields: dict[str, Any] = {}
    for name, info in envelope.model_fields.items():
        if name == "payload":
            fields[name] = Required[payload]
            continue
        if not _mirrorable(info.annotation) or not info.is_required():
            return None
        fields[name] = Required[_annotated(info.annotation, info.metadata)]
    shape = _typed_dict(f"{envelope.__name__}Shape", fields)
    return TypeAdapter(list[shape]), frozenset(shapes)  # type: ignore[valid-type]
