"""Short ids and ids taken by prefix (`advisor.core.ids`)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.core.errors import InputError
from advisor.core.ids import SHORT_LEN, resolve_id, short_id, shorten_ids

A = "gpu-node-07/vllm.service@2026-02-21T00:32:55.000000Z"
B = "gpu-node-07/vllm.service@2026-02-21T00:33:27.400000Z"


def test_a_short_id_is_a_digest_of_the_incident_with_the_step_kept() -> None:
    digest = hashlib.sha256(A.encode()).hexdigest()[:SHORT_LEN]
    assert short_id(A) == digest and len(digest) == 12
    assert short_id(f"{A}#3") == f"{digest}#3"
    assert short_id(f"{A}~2#1") == f"{digest}~2#1"


def test_an_id_is_taken_whole_by_prefix_or_by_its_short_id() -> None:
    ids = [A, B, f"{A}#0", f"{A}#1"]
    assert resolve_id(A, ids, "action") == A
    assert resolve_id(short_id(A)[:6], [A, B], "incident") == A
    assert resolve_id(short_id(A)[:6] + "#1", ids, "action") == f"{A}#1"
    assert resolve_id("gpu-node-07/vllm.service@2026-02-21T00:33", [A, B], "incident") == B


def test_an_ambiguous_or_unknown_id_is_refused_by_name() -> None:
    with pytest.raises(InputError, match=r"incident 'gpu-node-07/' is ambiguous: it fits 2 \("):
        resolve_id("gpu-node-07/", [A, B], "incident")
    with pytest.raises(InputError, match="incident 'zz': no such incident"):
        resolve_id("zz", [A, B], "incident")
    with pytest.raises(InputError, match="no such"):
        resolve_id("", [A], "incident")


@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=20, unique=True))
def test_every_short_id_names_its_own_id_when_unique(ids: list[str]) -> None:
    shorts = [short_id(i) for i in ids]
    for ident, short in zip(ids, shorts, strict=True):
        if shorts.count(short) == 1 and not any(o != ident and o.startswith(short) for o in ids):
            assert resolve_id(short, ids, "incident") == ident


def test_ids_in_a_sentence_are_written_short() -> None:
    step, loop = f"{A}#0", "gpu-node-07/vllm@a.service@2026-02-21T00:32:55.000000Z~2#1"
    said = shorten_ids(f"approved 2 action(s): {step}, {loop} (see {B})")
    assert said == f"approved 2 action(s): {short_id(step)}, {short_id(loop)} (see {short_id(B)})"


def test_shortening_hostile_text_costs_little() -> None:
    """A form's field or a log line is hostile: 'a/a/a/…' made the old pattern backtrack for
    hours at 20 kB. Run apart, bounded: it must end (and leave the text as it was)."""
    code = (
        "from advisor.core.ids import shorten_ids\n"
        "text = 'a/' * 100_000 + 'x @2026-02-21T00:32:55.000000Z ' + 'b/c@' * 20_000\n"
        "assert shorten_ids(text) == text\n"
    )
    done = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
