"""The Xid catalogue (advisor/core/xid_catalog.toml): validated on load, every entry complete,
and in step with the rules that call an Xid a hardware or an application fault."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from advisor.core.errors import InputError
from advisor.core.xids import catalog, load_catalog, lookup

RULES = Path(__file__).parents[2] / "rules" / "gpu.toml"


def _rule_xids(rule_id: str) -> set[int]:
    rules = tomllib.loads(RULES.read_text(encoding="utf-8"))["rule"]
    pattern = next(r for r in rules if r["id"] == rule_id)["match"][0]
    found = re.search(r"\(\?P<xid>([0-9|]+)\)", pattern)
    assert found is not None, pattern
    return {int(x) for x in found.group(1).split("|")}


def test_the_shipped_catalogue_covers_the_xids_the_brief_names() -> None:
    named = {13, 31, 32, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119, 120}
    named |= {121, 140, 143, *range(144, 151)}
    assert named <= set(catalog())
    assert (lookup(79).severity, lookup(79).action, lookup(79).investigate) == (
        "hardware",
        "RESTART_BM",
        "RMA",
    )


def test_the_catalogue_agrees_with_the_rules() -> None:
    hardware = _rule_xids("gpu.xid-hardware")
    application = _rule_xids("gpu.xid-application")
    assert {x for x in hardware if lookup(x).severity != "hardware"} == set()
    assert {x for x in application if lookup(x).severity == "hardware"} == set()


def _entry(code: int = 5, severity: str = "info", action: str = "IGNORE", more: str = "") -> str:
    return (
        f'[[xid]]\ncode = {code}\nmnemonic = "X"\nmeaning = "m"\n'
        f'severity = "{severity}"\naction = "{action}"\n{more}'
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (_entry(severity="bad"), "severity"),
        (_entry(code=0), "code"),
        (_entry(action="REBOOT"), "action"),
        (_entry(more="more = 1\n"), "more"),
        (_entry() * 2, "twice"),
        ("xid = 3\n", "[[xid]]"),
        ("[[xid]\n", "not valid TOML"),
    ],
)
def test_a_bad_catalogue_is_refused_with_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "xids.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(says)):
        load_catalog(path)


def test_an_unlisted_xid_is_said_so() -> None:
    assert 1000 not in catalog()
    assert (lookup(1000).severity, lookup(1000).action) == ("unlisted", "CONTACT_SUPPORT")
