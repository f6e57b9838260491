"""`quick_init`: the same objects as the dataclass's own `__init__` makes, faster."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

import pytest

from advisor.core.slots import quick_init
from advisor.parsing.lines import LogLine, Split
from advisor.parsing.parsed import Parsed


@dataclass(frozen=True, slots=True)
class _Plain:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()
    d: list[int] = field(default_factory=list)


@quick_init
@dataclass(frozen=True, slots=True)
class _Quick:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()
    d: list[int] = field(default_factory=list)


def _values(obj: object) -> tuple[object, ...]:
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, "x"), {}), ((1,), {"c": (2,)}), ((), {"a": 3, "d": [4], "b": "y"})],
)
def test_same_values_as_the_dataclass_init(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    assert _values(_Quick(*args, **kwargs)) == _values(_Plain(*args, **kwargs))  # type: ignore[arg-type]


def test_still_frozen_compared_and_hashed_by_value() -> None:
    one, two = _Quick(1, c=(1,)), _Quick(a=1, c=(1,))
    assert one == two and one is not two
    assert dataclasses.replace(one, b="z").b == "z"
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.a = 2  # type: ignore[misc]
    assert hash(Split("x", level="INFO")) == hash(Split(body="x", level="INFO"))


def test_a_default_factory_makes_a_new_value_each_time() -> None:
    one, two = _Quick(1), _Quick(1)
    assert one.d == [] and one.d is not two.d


def test_errors_as_the_dataclass_init() -> None:
    with pytest.raises(TypeError):
        _Quick()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Quick(1, e=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        quick_init(dataclass(frozen=True)(type("NoSlots", (), {"__annotations__": {"a": int}})))


@pytest.mark.parametrize("cls", [LogLine, Split, Parsed])
def test_the_line_classes_take_their_fields(cls: type) -> None:
    names = [f.name for f in dataclasses.fields(cls)]
    assert list(inspect.signature(cls).parameters) == names
