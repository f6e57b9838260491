"""A faster `__init__` for the frozen, slotted dataclasses made once per log line.

A frozen dataclass's generated `__init__` sets each field through `object.__setattr__`
(looked up anew each time), which for `LogLine`'s eleven fields costs more than decoding
the line's JSON. `quick_init` gives the class an `__init__` with the same parameters and
defaults that stores each value straight into its slot; the class stays what it was (frozen,
compared and hashed by value, `dataclasses.fields`, `replace`)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


class _Factory:
    """The default of a field with a default factory (as dataclasses shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def quick_init(cls: type[T]) -> type[T]:
    """Give the frozen slotted dataclass `cls` a slot-setting `__init__` (a decorator, put
    above `@dataclass(frozen=True, slots=True)`)."""
    if not (dataclasses.is_dataclass(cls) and "__slots__" in cls.__dict__):
        raise TypeError(f"{cls.__name__}: not a slotted dataclass")
    namespace: dict[str, Any] = {"_NO_VALUE": _FACTORY}
    params, body = [], []
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only or f.name.startswith("_"):
            raise TypeError(f"{cls.__name__}.{f.name}: quick_init takes plain fields only")
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_NO_VALUE")
            body.append(f"if {f.name} is _NO_VALUE: {f.name} = _factory_{f.name}()")
        else:
            params.append(f.name)
        body.append(f"_set_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(params)}):\n" + "".join(f"    {b}\n" for b in body)
    exec(source, namespace)  # built from the class's own field names, as dataclasses does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    setattr(cls, "__init__", init)  # noqa: B010 (typed as the dataclass's own signature)
    return cls
