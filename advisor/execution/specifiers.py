"""ExecStart= written back with its specifiers kept: an instance of a template (`vllm@.service`
run as `vllm@qwen.service`) says `%i` where systemd's loaded argv already holds `qwen`;
writing the loaded argv into the instance's drop-in would freeze the instance name, and later
edits of the template would never reach the instance.

When the ExecStart= line in force (the unit file's, or the last drop-in's that sets it) has
specifiers, the flag is located in its words as written (`raw`), and the new line is that
line with only the changed words rewritten (specifiers kept) and new ones added; what systemd
will load from it — its words with the specifiers expanded — is the argv the change is read
back against. A line whose expansion advisor cannot reproduce exactly is refused, never
frozen. Without specifiers the line is rendered from systemd's own argv, as loaded.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from advisor.execution.invocation import Reader
from advisor.execution.locate import Refusal, read_text
from advisor.execution.state import ExecCommand, UnitSnapshot
from advisor.execution.unitfile import (
    ExecLine,
    ExecSyntaxError,
    SpecifierError,
    UnitSyntaxError,
    exec_start,
    expand_specifiers,
    replace_token,
    token_text,
)

_SPECIFIER = re.compile(r"%[A-Za-z0-9]")


@dataclass(frozen=True)
class RawExec:
    """The ExecStart= line in force as written: its words' values with specifiers unexpanded
    (`argv`, as systemd's argv is laid out), and the line itself."""

    line: ExecLine
    argv: tuple[str, ...]

    @property
    def argv0(self) -> int:
        return self.line.argv0

    def as_unit(self, unit: UnitSnapshot) -> UnitSnapshot:
        """`unit` with ExecStart's words as written (for locating the flag in them)."""
        command = unit.exec_start[0]
        return dataclasses.replace(
            unit, exec_start=(ExecCommand(command.path, self.argv, command.flags),)
        )


def raw_exec(unit: UnitSnapshot, read: Reader = read_text) -> RawExec | None:
    """The ExecStart= line in force, when it has specifiers (None: it has none, so systemd's
    argv is the command as written). Refusal when it has some and advisor cannot read the
    files back to exactly what systemd loaded."""
    files = [p for p in (unit.fragment_path, *unit.drop_in_paths) if p]
    texts = [(p, read(p)) for p in files]
    unread = [p for p, t in texts if t is None]
    try:
        lines = exec_start([(p, t) for p, t in texts if t is not None])
    except (ExecSyntaxError, UnitSyntaxError) as e:
        return _unreadable(unit, str(e)) if "@" in unit.name else None
    if unread and "@" in unit.name:
        return _unreadable(unit, f"cannot read {', '.join(unread)}")
    if len(lines) != 1 or not any(_SPECIFIER.search(t.raw) for t in lines[0].tokens):
        return None
    line = lines[0]
    values = tuple(t.value for t in line.tokens[line.argv0 :])
    try:
        expanded = tuple(expand_specifiers(v, unit.name) for v in values)
    except SpecifierError as e:
        raise Refusal(
            f"ExecStart= of {unit.name} ({line.path} line {line.line}) uses a specifier advisor "
            f"cannot expand exactly ({e}): rewriting it would freeze its value"
        ) from e
    if not unit.exec_start or expanded != unit.exec_start[0].argv:
        return _unreadable(unit, f"{line.path} line {line.line} reads otherwise than systemd's")
    return RawExec(line, values)


def _unreadable(unit: UnitSnapshot, why: str) -> RawExec | None:
    """A command advisor cannot rewrite without freezing what systemd expands: refused."""
    raise Refusal(
        f"ExecStart= of {unit.name} has specifiers and advisor cannot read it back as systemd "
        f"loaded it ({why}): nothing is changed"
    )


def exec_change(
    unit: UnitSnapshot, argv: Sequence[str], raw: RawExec | None = None
) -> tuple[ExecCommand, str | None]:
    """The new command systemd must load, and the line to write (None: render it from the
    argv). With `raw`, `argv` is in written form (specifiers unexpanded)."""
    command = unit.exec_start[0]
    if raw is None:
        return ExecCommand(command.path, tuple(argv), command.flags), None
    line = raw.line
    text = line.raw
    shift = raw.argv0
    for i in reversed(range(min(len(argv), len(raw.argv)))):
        if argv[i] != raw.argv[i]:
            text = replace_token(
                dataclasses.replace(line, raw=text), i + shift, token_text(argv[i])
            )
    extra = [token_text(a) for a in argv[len(raw.argv) :]]
    if extra:
        text = text.rstrip() + " " + " ".join(extra)
    expanded = tuple(expand_specifiers(a, unit.name) for a in argv)
    return ExecCommand(command.path, expanded, command.flags), text
