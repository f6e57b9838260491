"""Progress bars for long work: rich on a terminal, silent when piped."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)


@contextmanager
def byte_progress(description: str, total: int | None,
                  enabled: bool | None = None) -> Iterator[Callable[[int], None] | None]:
    """Yield a callback taking bytes consumed so far, or None when output is not a terminal."""
    with _progress(description, total, DownloadColumn(), enabled) as callback:
        yield callback


@contextmanager
def count_progress(description: str, total: int | None,
                   enabled: bool | None = None) -> Iterator[Callable[[int], None] | None]:
    """Yield a callback taking items done so far, or None when output is not a terminal."""
    with _progress(description, total, MofNCompleteColumn(), enabled) as callback:
        yield callback


@contextmanager
def _progress(description: str, total: int | None, amount: ProgressColumn,
              enabled: bool | None) -> Iterator[Callable[[int], None] | None]:
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), amount, TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done: bar.update(task, completed=done)
