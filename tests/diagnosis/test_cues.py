"""A pattern's literal cues (`advisor.diagnosis.cues`) are sound: every string the pattern
finds holds one of them — checked on hand-picked corners of the syntax and, with hypothesis,
on strings drawn from every pattern the shipped rules use."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.diagnosis.cues import literal_cue, literal_cues
from advisor.diagnosis.rules import load_rules


def _patterns() -> list[str]:
    found: set[str] = set()
    for rule in load_rules().rules:
        for name in ("match", "also", "absent"):
            for pattern in getattr(rule.spec, name, None) or ():
                found.add(pattern if isinstance(pattern, str) else pattern.pattern)
    return sorted(found)


PATTERNS = _patterns()


@pytest.mark.parametrize(
    ("pattern", "cues"),
    [
        (r"CUDA (?P<what>out) of memory", ("CUDA out of memory",)),  # a plain group read through
        (r"foo\.bar", ("foo.bar",)),
        (r"abcd?e", ("abc",)),  # 'd' is optional: the run stops before it
        (r"ab+cdef", ("cdef",)),  # 'b' repeats: "abbcdef" does not hold "abcdef"
        (r"x{2}yzw", ("yzw",)),
        (r"[abc]def", ("def",)),
        (r"\bword\b", ("word",)),
        (r"\x41bcde", ("bcde",)),  # the escape's digits are not literals
        (r"\d+ GiB free", (" GiB free",)),
        (r"(?:ab|cd)efg", ("efg",)),
        (r"(?=abc)abcd", ("abcd",)),
        (r"abc|defg", ("abc", "defg")),
        (r"abc|d", None),
        (r"(?i)out of memory", None),
        (r"(?x)out of memory", None),
        (r"[]abc]def", ("def",)),
        (r"\N{BULLET}abc", ("abc",)),
        (r"a{b", None),  # '{' not a quantifier: a literal in Python, read conservatively
        (r"(abc)+", None),
    ],
)
def test_cues_of_corners_of_the_syntax(pattern: str, cues: tuple[str, ...] | None) -> None:
    re.compile(pattern)  # each case is a real pattern
    assert literal_cues(pattern) == cues
    single = literal_cue(pattern)
    assert single == (cues[0] if cues and len(cues) == 1 else None)


def test_the_shipped_rules_have_patterns_to_check() -> None:
    assert len(PATTERNS) > 100 and sum(literal_cues(p) is not None for p in PATTERNS) > 100


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_every_string_a_shipped_pattern_finds_holds_one_of_its_cues(data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from(PATTERNS))
    cues = literal_cues(pattern)
    if cues is None:
        return
    text = data.draw(st.from_regex(pattern))
    assert re.search(pattern, text), (pattern, text)
    assert any(cue in text for cue in cues), (pattern, cues, text)
