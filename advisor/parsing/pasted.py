"""A pasted log put back into the lines its programs wrote.

People paste logs through whatever showed them: `docker compose logs` (`vllm-1  | `),
`kubectl logs --prefix` (`[pod/NAME/CONTAINER] `), a terminal or tmux window that cut long
lines into rows of its width (tmux's copy keeps the rows, sometimes padded with spaces), a
Markdown quote (`> `) or code fence, Windows line ends, or the whole log as one string with
literal `\\n` between lines (a JSON value printed). `unpaste` undoes each of these on the text
input of `classify` and of training, before `lines.split_line` peels the programs' own
prefixes (journal, container timestamps, vLLM, Ray, SGLang, TGI). Journal entries never come
through here: each is a line already.

What is decided for the whole paste (a quote, a width) is decided on its first `HEAD` lines,
so that a long file is still read a line at a time.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import chain, islice
from typing import Final

from advisor.parsing.lines import LogLine, lines_from_texts, starts_a_record, without_collector

HEAD: Final = 5000  # lines read ahead to decide the paste's quote and width
MIN_WIDTH, MAX_WIDTH = 40, 512  # a terminal narrower or wider is not told apart from a log
MIN_CUT_ROWS = 3  # rows of the width's length before the paste is taken as cut
# Terminal widths people use (tmux and terminal defaults, half and full screens): at one of
# these, a single row of the longest length is enough.
TERMINAL_WIDTHS: Final = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240, 256})
MAX_JOINED_ROWS = 256  # rows joined into one line at most (a cut paste never needs more)
JOINED_MAX_LINES = 3  # a paste of so few lines may be a log joined into one string
JOINED_MIN_BREAKS = 3  # literal "\n"s in a line before it is taken as a joined log
_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+.-]*\s*$")
_QUOTE = re.compile(r"^ {0,3}> ?")


@dataclass(frozen=True)
class Paste:
    """What the head of a paste says about all of it."""

    quoted: bool  # every line is a Markdown quote
    width: int | None  # the terminal's width that cut long lines, if any
    padded: bool  # tmux's copy: every row padded with spaces to the width
    joined: bool  # a few lines, one holding the log with literal "\n"s

    @classmethod
    def of(cls, texts: list[str], whole: bool) -> Paste:
        real = [t for t in texts if t.strip() and not _FENCE.match(t)]
        quoted = bool(real) and all(_QUOTE.match(t) for t in real)
        if quoted:
            real = [_QUOTE.sub("", t, count=1) for t in real]
        width = _cut_width(real)
        return cls(
            quoted=quoted,
            width=width,
            padded=width is not None and sum(len(t) == width for t in real) >= 0.8 * len(real),
            joined=whole
            and len(real) <= JOINED_MAX_LINES
            and any(t.count("\\n") >= JOINED_MIN_BREAKS for t in real),
        )


def _cut_width(texts: list[str]) -> int | None:
    """The width a terminal cut these rows at: the longest rows' length, when it is also the
    commonest long length and at least `MIN_CUT_ROWS` rows have it (one long line seldom
    repeats; a cut log has a full row for each line longer than the terminal), or when it is
    a usual terminal width."""
    lengths = Counter(len(t) for t in texts if MIN_WIDTH <= len(t) <= MAX_WIDTH)
    if not lengths or max(len(t) for t in texts) > MAX_WIDTH:
        return None
    longest = max(lengths)
    width, rows = max(lengths.items(), key=lambda item: (item[1], item[0]))
    if width == longest and rows >= MIN_CUT_ROWS:
        return width
    return longest if longest in TERMINAL_WIDTHS else None


def unpaste(lines: Iterable[LogLine]) -> Iterator[LogLine]:
    """`lines` (plain text, numbered as read) as the programs wrote them: a joined row keeps
    its first row's number, lines split out of one row keep that row's."""
    it = iter(lines)
    head = list(islice(it, HEAD))
    paste = Paste.of([line.text for line in head], whole=len(head) < HEAD)
    rows = _rows(chain(head, it), paste)
    if paste.width is not None:
        rows = _rejoined(rows, paste.width, paste.padded)
    for line in rows:
        yield from _lines_of(line, paste)


def _rows(lines: Iterable[LogLine], paste: Paste) -> Iterator[LogLine]:
    """The rows without fences, and without the quote's `> ` when every row has one."""
    for line in lines:
        text = line.text
        if _FENCE.match(text):
            continue
        if paste.quoted:
            text = _QUOTE.sub("", text, count=1)
            if not text.strip():
                continue
        yield line if text is line.text else replace(line, text=text)


def _rejoined(rows: Iterable[LogLine], width: int, padded: bool) -> Iterator[LogLine]:
    """Rows cut at `width` joined again: a full row (`width` long; when every row is padded,
    one with at most the cut's one space at its end) is continued by the next one unless that
    one begins a line of its own. At most `MAX_JOINED_ROWS` rows make one line, so that a
    hostile input of endless full rows is never held whole."""
    held: LogLine | None = None
    parts: list[str] = []
    for row in rows:
        text = row.text
        if held is not None and len(parts) < MAX_JOINED_ROWS and not starts_a_record(text):
            parts.append(text)
        else:
            if held is not None:
                yield _joined_row(held, parts)
            held, parts = row, [text]
        if len(text) != width or (padded and len(text.rstrip(" ")) < width - 1):
            yield _joined_row(held, parts)
            held, parts = None, []
    if held is not None:
        yield _joined_row(held, parts)


def _joined_row(first: LogLine, parts: list[str]) -> LogLine:
    text = "".join(parts).rstrip(" ")
    return first if text == first.text else replace(first, text=text)


def _lines_of(line: LogLine, paste: Paste) -> Iterator[LogLine]:
    """One row's lines: split at literal `\\n`s when the paste is a joined log."""
    if not paste.joined:
        yield line
        return
    for text in line.text.split("\\n"):
        if without_collector(text).strip():
            yield replace(line, text=text)


def lines_from_paste(texts: Iterable[str]) -> list[LogLine]:
    """Plain text lines as `classify` reads a pasted file (the training corpus's examples)."""
    return list(unpaste(lines_from_texts(texts)))
