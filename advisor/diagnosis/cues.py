"""Literal cues of a regular expression: strings one of which every match of the pattern
contains, so that a substring test can spare a line the pattern itself (the rules' prefilter).

Read from the pattern's text with the public `re` syntax only, conservatively: a character is
part of a literal run only when the scanner is sure every match holds it there — a plain
character (or an escaped punctuation mark) at the pattern's top level, not made optional or
repeated by a quantifier; a group is read through only when it holds nothing but such
characters. Anything else (a class, an escape such as `\\d`, an anchor, a group with an
alternation or a quantifier inside, a repeated item) ends the run. A pattern with flags that
change what a literal finds (`(?i)`, `(?x)`) has no cues."""

from __future__ import annotations

import functools
import re
from typing import Final

MIN_CUE: Final = 3  # a shorter literal spares too few lines to be worth a test
_META: Final = frozenset(".^$*+?{}[]\\|()")
_FLAGS: Final = re.compile(r"\(\?([aiLmsux]+)\)")
_QUANTIFIER: Final = re.compile(r"[*+?]|\{\d*(?:,\d*)?\}")
_GROUP_HEAD: Final = re.compile(r"\(\?:|\(\?P<\w+>|\((?!\?)")
_ESCAPE_WIDTH: Final = {"x": 4, "u": 6, "U": 10}

Item = str | None  # a literal character, or anything else (it ends a literal run)


def _escape(pattern: str, i: int) -> tuple[Item, int]:
    """The item of the escape at `pattern[i]` (a backslash) and where the next one starts."""
    if i + 1 >= len(pattern):
        raise ValueError("a pattern ends in a backslash")
    char = pattern[i + 1]
    if char.isascii() and not char.isalnum():
        return char, i + 2  # \. \( \+ \- \/ and the like: the character itself
    if char == "N":  # \N{NAME}
        end = pattern.find("}", i)
        return None, (end + 1 if end >= 0 else len(pattern))
    if char.isdigit():  # a back reference or an octal escape
        end = i + 2
        while end < len(pattern) and end < i + 4 and pattern[end].isdigit():
            end += 1
        return None, end
    return None, i + _ESCAPE_WIDTH.get(char, 2)


def _class_end(pattern: str, i: int) -> int:
    """Where the character class opened at `pattern[i]` ('[') ends (after its ']')."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":  # a ']' first is one of the class
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    if j >= len(pattern):
        raise ValueError("an unterminated character class")
    return j + 1


def _group_end(pattern: str, i: int) -> int:
    """Where the group opened at `pattern[i]` ('(') ends (after its ')')."""
    depth, j = 0, i
    while j < len(pattern):
        char = pattern[j]
        if char == "\\":
            j += 2
            continue
        if char == "[":
            j = _class_end(pattern, j)
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        j += 1
        if depth == 0:
            return j
    raise ValueError("an unbalanced parenthesis")


def _group_items(pattern: str, start: int, end: int) -> list[Item]:
    """A group's characters when it holds only plain ones (a capturing, non-capturing or
    named group), else one item that ends a run."""
    head = _GROUP_HEAD.match(pattern, start)
    if head is None:  # a look-around, a conditional, scoped flags: read through none
        return [None]
    items: list[Item] = []
    i = head.end()
    while i < end - 1:
        if pattern[i] == "\\":
            item, i = _escape(pattern, i)
        elif pattern[i] in _META:
            return [None]
        else:
            item, i = pattern[i], i + 1
        if item is None:
            return [None]
        items.append(item)
    return items


@functools.lru_cache(maxsize=4096)  # worked out once per pattern: searches ask for each line
def _branches(pattern: str) -> tuple[tuple[Item, ...], ...] | None:
    """The pattern's top-level alternatives, each as its items in order; None when its
    flags make literals unreliable (or the scanner cannot read it: then no cue is safe)."""
    try:
        branches = _scan(pattern)
    except ValueError:
        return None
    return None if branches is None else tuple(tuple(b) for b in branches)


def _scan(pattern: str) -> list[list[Item]] | None:
    flags = _FLAGS.match(pattern)
    if flags and {"i", "x"} & set(flags.group(1)):
        return None
    branches: list[list[Item]] = [[]]
    i = flags.end() if flags else 0
    while i < len(pattern):
        char = pattern[i]
        items: list[Item]
        if char == "\\":
            item, i = _escape(pattern, i)
            items = [item]
        elif char == "[":
            items, i = [None], _class_end(pattern, i)
        elif char == "(":
            end = _group_end(pattern, i)
            items, i = _group_items(pattern, i, end), end
        elif char == "|":
            branches.append([])
            i += 1
            continue
        else:
            items, i = [None if char in _META else char], i + 1
        quantified = _QUANTIFIER.match(pattern, i)
        if quantified:  # optional or repeated: no run goes through it
            items, i = [None], quantified.end()
            if i < len(pattern) and pattern[i] in "?+":  # lazy or possessive
                i += 1
        branches[-1].extend(items)
    return branches


def _longest(items: tuple[Item, ...]) -> str | None:
    best, run = "", ""
    for item in [*items, None]:
        if item is None:
            best, run = max(best, run, key=len), ""
        else:
            run += item
    return best if len(best) >= MIN_CUE else None


def literal_cue(pattern: str) -> str | None:
    """The longest run of literal characters that every match of `pattern` contains, if
    `MIN_CUE` or longer (None for a pattern with a top-level alternation: see
    `literal_cues`)."""
    branches = _branches(pattern)
    if branches is None or len(branches) != 1:
        return None
    return _longest(branches[0])


def literal_cues(pattern: str) -> tuple[str, ...] | None:
    """Literals one of which every match of `pattern` contains: one per top-level
    alternative, when every alternative has one; else None."""
    branches = _branches(pattern)
    if branches is None:
        return None
    cues = [_longest(branch) for branch in branches]
    if None in cues:
        return None
    return tuple(c for c in cues if c is not None)
