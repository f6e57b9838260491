"""The parser process: batches come back in order; a crash becomes one clear error."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

from advisor.core.errors import InputError
from advisor.store import EventStore
from ingest.parallel import ingest_parallel
from tests.parse_fixtures import crashing, numbered

Opener = Callable[[str], EventStore]


def test_batches_are_appended_in_order_with_their_checkpoints(
    sqlite_url: str, opener: Opener
) -> None:
    store = opener(sqlite_url)
    done: list[int] = []
    report = ingest_parallel(
        store,
        "numbered",
        functools.partial(numbered, 5000),
        checkpoint="cp",
        batch_size=700,
        progress=done.append,
    )
    assert (report.read, report.appended, report.malformed_count) == (5001, 5000, 1)
    assert report.malformed[0].reason == "not a log line"
    assert [e.key for e in store.read()] == list(range(1, 5001))
    assert store.checkpoint("cp") == {"offset": 5001}
    assert done == sorted(done) and done[-1] == 50010


def test_a_crashing_parser_is_one_clear_error(sqlite_url: str, opener: Opener) -> None:
    store = opener(sqlite_url)
    with pytest.raises(
        InputError,
        match=r"crashing: the parser process ended unexpectedly "
        r"\(exit 1\): RuntimeError: boom in the parser",
    ):
        ingest_parallel(store, "crashing", crashing)
    assert list(store.read()) == []  # the batch in flight never committed
