"""NVIDIA's Xid catalogue as data (`xid_catalog.toml` beside this module): each Xid's meaning,
severity and recommended action, validated by a pydantic model when first read.

`lookup(code)` is what the GPU fault events (`gpu.fault`) take their severity and action from;
an Xid the catalogue does not list gets severity "unlisted" (`unlisted`).
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.core.errors import InputError
from advisor.core.toml import load_toml, validate_tables

Severity = Literal["application", "hardware", "driver", "info", "unlisted"]
HARDWARE: Final = "hardware"  # the severity of a fault of the GPU itself
Action = Literal[
    "IGNORE", "RESTART_APP", "RESET_GPU", "RESTART_BM", "DRAIN_AND_RESET", "CONTACT_SUPPORT"
]
Investigation = Literal["CHECK_APP", "CHECK_MEMORY", "CHECK_NVLINK", "CONTACT_SUPPORT", "RMA"]

MAX_XID: Final = 1023  # the driver prints Xids as small integers; anything larger is not one
CATALOG_FILE: Final = "xid_catalog.toml"


class Xid(BaseModel):
    """One catalogue entry (its fields are described in the file's header)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    code: int = Field(ge=1, le=MAX_XID)
    mnemonic: str = Field(min_length=1, max_length=80, pattern=r"^[A-Z0-9_]+$")
    meaning: str = Field(min_length=1, max_length=300)
    severity: Severity
    action: Action
    investigate: Investigation | None = None


def unlisted(code: int) -> Xid:
    """What is said of an Xid the catalogue does not list."""
    return Xid(
        code=code,
        mnemonic="UNLISTED",
        meaning="an Xid this catalogue does not list",
        severity="unlisted",
        action="CONTACT_SUPPORT",
    )


def load_catalog(path: Path | None = None) -> dict[int, Xid]:
    """The catalogue of `path` (default: the shipped one), by code; InputError naming the file
    and the entry for a bad entry or a code listed twice."""
    if path is None:
        source = resources.files("advisor.core").joinpath(CATALOG_FILE)
        text = source.read_text(encoding="utf-8")
        path = Path(str(source))
        data = load_toml(path, "Xid catalogue", text)
    else:
        data = load_toml(path, "Xid catalogue")
    tables = data.get("xid")
    if not isinstance(tables, list) or set(data) != {"xid"}:
        raise InputError(f"{path}: an Xid catalogue holds [[xid]] tables and nothing else")
    out: dict[int, Xid] = {}
    for entry in validate_tables(path, "xid", tables, Xid):
        if entry.code in out:
            raise InputError(f"{path}: Xid {entry.code} is listed twice")
        out[entry.code] = entry
    return out


@functools.cache
def catalog() -> dict[int, Xid]:
    """The shipped catalogue (read once)."""
    return load_catalog()


def lookup(code: int) -> Xid:
    """The catalogue's entry for `code`, or `unknown(code)`."""
    found = catalog().get(code)
    return found if found is not None else unlisted(code)
