"""Reading a TOML file (a policy, a rule file, a catalogue file) and validating its tables,
with the errors as InputError."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import rtoml
from pydantic import BaseModel, ValidationError

from advisor.core.errors import InputError

M = TypeVar("M", bound=BaseModel)


def load_toml(path: Path, what: str, text: str | None = None) -> dict[str, Any]:
    """The TOML of `path` (or `text`, read from it already); InputError naming the file, and
    for a file that does not parse the line and column, when it cannot be read or is not
    TOML. `what` says what the file is, for the message (`policy`, `rule file`).

    Parsed by rtoml (a Rust parser: the shipped rule and catalogue files, ~290 KB read at
    every `classify`, in a tenth of the time; tests/core/test_toml.py checks both read them
    alike); a file rtoml refuses is read again by tomllib, whose error says where."""
    try:
        source = text if text is not None else path.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot read {what}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not valid TOML: {e}") from e
    try:
        return rtoml.loads(source)
    except (rtoml.TomlParsingError, ValueError):
        pass  # tomllib decides, as it always did
    import tomllib  # only to say where a file is wrong: not imported at start-up

    try:
        return tomllib.loads(source)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML: {e}") from e


def validate_tables(path: Path, what: str, tables: list[dict[str, Any]], model: type[M]) -> list[M]:
    """Each table of a file's array (`[[rule]]`, `[[message]]`) validated as `model`, in order;
    InputError naming the file, the table (its `id`, else `#n`) and the field that is wrong.
    `what` names a table for the message (`rule`, `message`)."""
    out = []
    for n, raw in enumerate(tables, start=1):
        name = raw.get("id") if isinstance(raw.get("id"), str) else f"#{n}"
        try:
            out.append(model.model_validate(raw))
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(part) for part in err["loc"]) or f"({what})"
            raise InputError(f"{path}: {what} {name}: field {field}: {err['msg']}") from e
    return out
