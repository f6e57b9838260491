"""Reading TOML (advisor.core.toml): rtoml reads what tomllib reads, the same way, and a file
neither accepts is one InputError naming the file and, as tomllib says it, where."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
import rtoml

from advisor.core.errors import InputError
from advisor.core.toml import load_toml

ROOT = Path(__file__).parents[2]
SHIPPED = sorted(
    [*ROOT.joinpath("rules").glob("**/*.toml"), ROOT / "advisor" / "core" / "xid_catalog.toml"]
)

VALID = {
    "strings": (
        'a = "tab\\there \\u00e9 \\U0001F600"\nb = \'C:\\raw\'\nc = """\nmulti\\\n  line"""\n'
    ),
    "numbers": "a = 1_000\nb = 0x1f\nc = 0o17\nd = 0b11\ne = 6.02e23\nf = -0.0\ng = inf\n",
    "tables": '[x.y]\nz = 1\n[[t]]\nn = 1\n[[t]]\nn = 2\ni = { k = "v", l = [1, 2] }\n',
    "dotted": 'site."google.com" = true\na.b.c = [[1], ["x"]]\n',
    "dates": (
        "d = 2026-12-04\nt = 07:32:00.5\nl = 2026-12-04T07:32:00\no = 2026-12-04T07:32:00-05:00\n"
    ),
}
INVALID = {
    "unterminated": 'a = "open\n',
    "no value": "a = \n",
    "duplicate key": "a = 1\na = 2\n",
    "bad escape": 'a = "\\q"\n',
    "table twice": "[x]\na = 1\n[x]\nb = 2\n",
    "bare key with space": "a b = 1\n",
    "leading zero": "a = 012\n",
}


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same types (nan equal to nan)."""
    if type(a) is not type(b) and not (hasattr(a, "isoformat") and hasattr(b, "isoformat")):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b) and str(a) == str(b)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_shipped_files_read_alike(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _same(rtoml.loads(text), tomllib.loads(text))
    assert _same(load_toml(path, "file"), tomllib.loads(text))


@pytest.mark.parametrize("text", VALID.values(), ids=list(VALID))
def test_valid_toml_reads_alike(text: str) -> None:
    assert _same(load_toml(Path("x.toml"), "file", text), tomllib.loads(text))


@pytest.mark.parametrize("text", INVALID.values(), ids=list(INVALID))
def test_invalid_toml_is_one_line_saying_where(text: str) -> None:
    with pytest.raises(tomllib.TOMLDecodeError) as expected:
        tomllib.loads(text)
    with pytest.raises(InputError) as info:
        load_toml(Path("x.toml"), "rule file", text)
    assert str(info.value) == f"x.toml: not valid TOML: {expected.value}"
