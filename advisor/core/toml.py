"""Reading a TOML file (a policy, a rule file) with its errors as InputError."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from advisor.core.errors import InputError


def load_toml(path: Path, what: str, text: str | None = None) -> dict[str, Any]:
    """The TOML of `path` (or `text`, read from it already); InputError naming the file, and
    for a file that does not parse the line and column, when it cannot be read or is not
    TOML. `what` says what the file is, for the message (`policy`, `rule file`)."""
    try:
        source = text if text is not None else path.read_text(encoding="utf-8")
        return tomllib.loads(source)
    except OSError as e:
        raise InputError(f"{path}: cannot read {what}: {e.strerror or e}") from e
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid TOML: {e}") from e
