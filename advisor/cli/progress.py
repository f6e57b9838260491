"""Progress bars for long work: rich on a terminal, silent when piped (rich is then not even
imported: a piped command, and every command's start-up, does without it)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import ProgressColumn


@contextmanager
def byte_progress(
    description: str, enabled: bool | None = None
) -> Iterator[Callable[[int, int], None] | None]:
    """Yield a callback taking (bytes done, bytes in all), or None when output is not a
    terminal."""
    with _progress(description, None, _bytes_column, enabled) as callback:
        if callback is None:
            yield None
        else:
            yield lambda done, total: callback(done, total)


@contextmanager
def count_progress(
    description: str, total: int | None, enabled: bool | None = None
) -> Iterator[Callable[[int], None] | None]:
    """Yield a callback taking items done so far, or None when output is not a terminal."""
    with _progress(description, total, _count_column, enabled) as callback:
        yield None if callback is None else (lambda done: callback(done, total))


def _bytes_column() -> ProgressColumn:
    from rich.progress import DownloadColumn

    return DownloadColumn()


def _count_column() -> ProgressColumn:
    from rich.progress import MofNCompleteColumn

    return MofNCompleteColumn()


@contextmanager
def _progress(
    description: str,
    total: int | None,
    amount: Callable[[], ProgressColumn],
    enabled: bool | None,
) -> Iterator[Callable[[int, int | None], None] | None]:
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), amount(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done, all_: bar.update(task, completed=done, total=all_)
