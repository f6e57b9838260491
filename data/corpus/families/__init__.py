"""The registry of failure families: every module here defines one ``FAMILY``.

A new label is one new module in this package (plus its rule in the classifier's rules).
"""

from __future__ import annotations

import importlib
import pkgutil

from ..family import Family


def registry() -> tuple[Family, ...]:
    """Every family of this package, in corpus order; labels and orders are unique."""
    found: list[Family] = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        family = getattr(module, "FAMILY", None)
        if not isinstance(family, Family):
            raise TypeError(f"{module.__name__} defines no FAMILY")
        found.append(family)
    for attr in ("label", "order"):
        values = [getattr(f, attr) for f in found]
        if len(set(values)) != len(values):
            raise ValueError(f"two families share a {attr}: {sorted(map(str, values))}")
    return tuple(sorted(found, key=lambda f: f.order))


def by_label() -> dict[str, Family]:
    """The registry keyed by label."""
    return {f.label: f for f in registry()}
