"""Short ids for people, and ids taken by prefix.

An incident id names its unit and its first run's start (`HOST/UNIT@TIME`, 60 characters and
more); a plan is its incident's id (`~N` after a replan) and a step is `PLAN#N`. People see a
short id instead: the first 12 hex digits of the SHA-256 of the incident part, with the
`~N` and `#N` kept (`3f9a1c2b7d4e`, `3f9a1c2b7d4e~1#2`). Wherever an id is taken, the whole
id, a prefix of it, or a prefix of its short id is accepted; a prefix that fits more than one
id is refused, naming them. A sentence for people names ids by their short ids
(`shorten_ids`); `--json`, URLs and the pages' data attributes keep the whole ids.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final

from advisor.core.errors import InputError

SHORT_LEN: Final = 12
_SUFFIX = re.compile(r"(~\d+)?(#\d+)?$")
_SHOWN: Final = 5  # ids named in an "ambiguous" error
# A whole id in a sentence: HOST/UNIT@TIME (ISO 8601 to the microsecond), then ~N and #M.
_WHOLE = re.compile(
    r"[^\s,;()'\"]+/[^\s,;()'\"]+@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z(?:~\d+)?(?:#\d+)?"
)


_WORD: Final = re.compile(r"\S+")
_LONGEST_WORD: Final = 600  # a host, a unit and a time: a whole id is far shorter


def _split(ident: str) -> tuple[str, str]:
    """(the incident part, the `~N#M` suffix) of an id."""
    match = _SUFFIX.search(ident)
    cut = match.start() if match else len(ident)
    return ident[:cut], ident[cut:]


def short_id(ident: str) -> str:
    """The short id people see for `ident` (an incident, plan or step id)."""
    base, suffix = _split(ident)
    return hashlib.sha256(base.encode()).hexdigest()[:SHORT_LEN] + suffix


def shorten_ids(text: str) -> str:
    """`text` with every whole incident, plan or step id in it written as its short id. The
    text may be hostile (a form's field, a log line in an error): the pattern is tried word
    by word, on words of at most `_LONGEST_WORD` characters, so its cost stays linear."""

    def word(m: re.Match[str]) -> str:
        found = m.group(0)
        if len(found) > _LONGEST_WORD or "@" not in found:
            return found
        return _WHOLE.sub(lambda w: short_id(w.group(0)), found)

    return _WORD.sub(word, text)


def _fits(given: str, ident: str) -> bool:
    if ident.startswith(given):
        return True
    base, suffix = _split(given)
    whole_base, whole_suffix = _split(ident)
    if not base or suffix != whole_suffix:
        return False
    return hashlib.sha256(whole_base.encode()).hexdigest().startswith(base)


def matching(given: str, ids: Iterable[str]) -> list[str]:
    """The ids of `ids` that `given` may name (itself, a prefix, a prefix of a short id)."""
    return sorted(i for i in set(ids) if given and _fits(given, i))


def resolve_id(given: str, ids: Iterable[str], what: str) -> str:
    """The one id of `ids` that `given` names: the id itself, a prefix of it, or a prefix of
    its short id (the `~N#M` suffix written out). InputError naming `given` when none fits,
    or when several do (with the first few of them)."""
    known = sorted(set(ids))
    if given in known:
        return given
    fitting = matching(given, known)
    if len(fitting) == 1:
        return fitting[0]
    if not fitting:
        raise InputError(f"{what} {given!r}: no such {what}")
    shown = ", ".join(short_id(i) for i in fitting[:_SHOWN])
    more = f" and {len(fitting) - _SHOWN} more" if len(fitting) > _SHOWN else ""
    raise InputError(
        f"{what} {given!r} is ambiguous: it fits {len(fitting)} ({shown}{more}); give more of it"
    )
