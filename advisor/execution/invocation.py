"""How a unit starts its engine: the layers between systemd and the engine's argv, and every
word of the engine's arguments with the place it is written.

systemd holds one command (D-Bus: the argv, variables unexpanded). It may run the engine
itself (after launchers, or in a container after the image), a shell whose `-c` string runs
it, or a wrapper script that runs it (passing its own arguments on with `"$@"`, or not).
`invocation` finds the engine through those layers and lists the engine's arguments as
`Slot`s: each knows its text, its literal value or the variable it expands, and how a new
value is written there — into ExecStart (advisor's drop-in replaces the command), into the
shell string (re-quoted for the shell, then for systemd), or nowhere (a file advisor does not
own). Variables are placed (`VarPlace`): the unit's environment (advisor may override it in
its own environment file), a script's own assignment, or a file the script sources.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from advisor.core.engines.model import Engine
from advisor.execution import shellwords
from advisor.execution._shelllex import Word
from advisor.execution.commands import EngineAt, engine_in, script_of, shell_script
from advisor.execution.containers import ContainerRun
from advisor.execution.state import UnitSnapshot

Reader = Callable[[str], str | None]
Splitter = Literal["systemd", "shell"]
_MAX_DEPTH: Final = 3


class NotFound(Exception):
    """No engine found in the unit's command (the message says what was looked at)."""


@dataclass(frozen=True)
class VarPlace:
    """Where a variable the engine's command reads gets its value."""

    name: str
    value: str | None
    where: str
    override: bool  # from the unit's environment: advisor may override it there
    write: Callable[[str], None] | None = None  # a script assignment advisor may rewrite


@dataclass
class Slot:
    """One word of the engine's arguments, wherever it is written."""

    text: str
    value: str | None  # its literal value (None when it expands something)
    ref: tuple[str, str | None] | None  # the whole word is this variable (name, default)
    split: str | None  # a variable whose value is split into several words here
    splitter: Splitter
    layer: str  # where it is written, for messages
    write: Callable[[str], None] | None  # set a new literal value here (None: not advisor's)
    placed: Callable[[str], VarPlace]  # where a variable read here lives


@dataclass
class Edits:
    """The changes to ExecStart collected while a flag is set: words replaced, words added at
    the end of the engine's arguments, splices inside the shell string of one word."""

    argv: list[str]
    replaced: dict[int, str] = field(default_factory=dict)
    appended: list[str] = field(default_factory=list)
    splices: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)

    def result(self) -> tuple[str, ...] | None:
        if not (self.replaced or self.appended or self.splices):
            return None
        out = list(self.argv)
        for i, text in self.replaced.items():
            out[i] = text
        for i, cuts in self.splices.items():
            script = out[i]
            for start, end, text in sorted(cuts, reverse=True):
                script = script[:start] + text + script[end:]
            out[i] = script
        return (*out, *self.appended)


@dataclass
class Invocation:
    """The engine a unit runs and its arguments' slots, with where new words go."""

    engine: Engine
    runs: str
    slots: list[Slot]
    edits: Edits
    append: Callable[[list[str]], None] | None
    no_append: str = ""
    unit_place: Callable[[str], VarPlace] = field(
        default=lambda name: VarPlace(name, None, name, True)
    )
    container: ContainerRun | None = None
    # Where a variable of the engine process's own environment lives (a container's
    # process gets only what its `-e` options give it: None).
    engine_env: Callable[[str], VarPlace] | None = None


def _environment_place(env: Callable[[str], tuple[str | None, str]]) -> Callable[[str], VarPlace]:
    def placed(name: str) -> VarPlace:
        value, where = env(name)
        return VarPlace(name, value, f"{name} in {where}", override=True)

    return placed


def invocation(
    unit: UnitSnapshot, env: Callable[[str], tuple[str | None, str]], read: Reader
) -> Invocation:
    """The engine `unit` runs and its arguments; NotFound when none can be found."""
    commands = [c for c in unit.exec_start if c.argv]
    if len(commands) != 1:
        raise NotFound(f"{unit.name} has {len(commands)} ExecStart= commands")
    argv = list(commands[0].argv)
    edits = Edits(argv)
    placed = _environment_place(env)
    path = commands[0].path
    found = engine_in(argv)
    if found is None and path != argv[0]:  # `@/opt/venv/bin/vllm my-server serve …`
        found = engine_in([path, *argv[1:]])
    if found is not None:
        return _direct(found, argv, edits, placed)
    script = shell_script(argv)
    if script is not None:
        return _in_shell(script[0], script[1], edits, placed, read)
    wrapper = path if script_of(path) is not None else None
    if wrapper is None and len(argv) > 1 and script_of(argv[1]) is not None:
        wrapper = argv[1]  # `bash /usr/local/bin/start.sh …`
    if wrapper is not None:
        return _in_wrapper(wrapper, argv, edits, placed, read)
    raise NotFound(
        f"ExecStart= of {unit.name} ({' '.join(argv)[:200]}) runs no engine advisor knows"
    )


# ------------------------------------------------------------------ ExecStart itself
def _exec_slot(edits: Edits, i: int, placed: Callable[[str], VarPlace], layer: str) -> Slot:
    word = edits.argv[i]

    def write(value: str) -> None:
        edits.replaced[i] = value

    ref = _systemd_ref(word)
    split = word[1:] if word.startswith("$") and word[1:].isidentifier() else None
    literal = None if "$" in word else word
    return Slot(word, literal, ref, split, "systemd", layer, write, placed)


def _systemd_ref(word: str) -> tuple[str, str | None] | None:
    if word.startswith("${") and word.endswith("}") and word[2:-1].isidentifier():
        return word[2:-1], None
    if word.startswith("$") and word[1:].isidentifier():
        return word[1:], None
    return None


def _direct(
    found: EngineAt, argv: list[str], edits: Edits, placed: Callable[[str], VarPlace]
) -> Invocation:
    layer = "ExecStart="
    runs = f"{found.engine.title} in ExecStart="
    if found.container is not None:
        runs = f"{found.engine.title} in `{found.container.runtime} run` of {found.container.image}"
    slots = [_exec_slot(edits, i, placed, layer) for i in range(found.args, len(argv))]
    return Invocation(
        found.engine,
        runs,
        slots,
        edits,
        append=edits.appended.extend,
        unit_place=placed,
        container=found.container,
        engine_env=None if found.container is not None else placed,
    )


# ------------------------------------------------------------------ shells and scripts
def _shell_slot(
    word: Word,
    layer: str,
    write: Callable[[str], None] | None,
    placed: Callable[[str], VarPlace],
) -> Slot:
    ref = _shell_ref(word.text)
    split = word.refs[0] if word.splits and len(word.refs) == 1 and ref is not None else None
    if split is not None:
        ref = None
    return Slot(word.text, word.value, ref, split, "shell", layer, write, placed)


def _shell_ref(text: str) -> tuple[str, str | None] | None:
    """`$X`, `${X}`, `"$X"`, `"${X}"`, `${X:-default}`, `${X-default}` → (X, default)."""
    t = text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
    if t.startswith("${") and t.endswith("}"):
        inner = t[2:-1]
        for sep in (":-", "-"):
            name, found, default = inner.partition(sep)
            if found and name.isidentifier() and "$" not in default and "`" not in default:
                return name, default
        return (inner, None) if inner.isidentifier() else None
    if t.startswith("$") and t[1:].isidentifier():
        return t[1:], None
    return None


def _script_vars(
    commands: list[shellwords.Command],
    outer: Callable[[str], VarPlace],
    where: str,
    read: Reader,
    splice: Callable[[Word, str], None] | None,
) -> Callable[[str], VarPlace]:
    """Where a variable a script reads lives: its own last assignment (rewritable only in a
    script advisor writes back), a file it sources that assigns it, else the unit."""
    assigned = shellwords.assignments(commands)
    sourced = shellwords.sourced(commands)

    def placed(name: str) -> VarPlace:
        words = assigned.get(name)
        if words:
            last = words[-1]
            value = last.value.partition("=")[2] if last.value is not None else None
            here = f"{where} line {last.line} (`{last.text[:80]}`)"
            write = None
            if splice is not None and last.value is not None:
                prefix = last.value.partition("=")[0] + "="

                def write(v: str, w: Word = last, p: str = prefix) -> None:
                    splice(w, p + shellwords.quote(v))

            return VarPlace(name, value, f"{name} set in {here}", False, write)
        for file_word in sourced:
            path = file_word.value
            text = read(path) if path else None
            if text is None or _assigns(text, name):
                what = path or file_word.text
                return VarPlace(
                    name,
                    None,
                    f"{name}, which {what} (sourced by {where} line {file_word.line}) "
                    + ("sets" if text is not None else "may set: advisor cannot read it"),
                    False,
                )
        return outer(name)

    return placed


def _assigns(text: str, name: str) -> bool:
    try:
        return name in shellwords.assignments(shellwords.commands(text))
    except ValueError:
        return f"{name}=" in text


def _engine_command(
    commands: list[shellwords.Command],
) -> tuple[shellwords.Command, EngineAt] | None:
    for command in commands:
        values = [w.value if w.value is not None else w.text for w in command.words]
        found = engine_in(values)
        if found is not None:
            return command, found
    return None


def _in_shell(
    k: int, script: str, edits: Edits, placed: Callable[[str], VarPlace], read: Reader
) -> Invocation:
    layer = f"the shell string of ExecStart= (word {k})"
    try:
        commands = shellwords.commands(script)
    except ValueError as e:
        raise NotFound(f"{layer} does not parse as a shell script: {e}") from e
    hit = _engine_command(commands)
    if hit is None:
        raise NotFound(f"{layer} runs no engine advisor knows")
    command, found = hit

    def splice(word: Word, text: str) -> None:
        edits.splices.setdefault(k, []).append((word.start, word.end, text))

    def writer(word: Word) -> Callable[[str], None]:
        return lambda value: splice(word, shellwords.quote(value))

    variables = _script_vars(commands, placed, layer, read, splice)

    def where(word: Word) -> Callable[[str], VarPlace]:
        # systemd expands `${NAME}` in the string before the shell runs: the unit's, whatever
        # the script assigns; `$NAME` (and `${NAME:-x}`) is the shell's.
        return placed if re.search(r"\$\{\w+\}", word.text) else variables

    slots = [_shell_slot(w, layer, writer(w), where(w)) for w in command.words[found.args :]]
    last = command.words[-1]

    def append(new: list[str]) -> None:
        text = " ".join(shellwords.quote(n) for n in new)
        edits.splices.setdefault(k, []).append((last.end, last.end, " " + text))

    runs = f"{found.engine.title} in the shell string of ExecStart="
    return Invocation(
        found.engine, runs, slots, edits, append, unit_place=placed, engine_env=variables
    )


def _in_wrapper(
    path: str, argv: list[str], edits: Edits, placed: Callable[[str], VarPlace], read: Reader
) -> Invocation:
    text = read(path)
    if text is None:
        raise NotFound(f"the wrapper script {path} cannot be read")
    try:
        commands = shellwords.commands(text)
    except ValueError as e:
        raise NotFound(f"the wrapper script {path} does not parse: {e}") from e
    hit = _engine_command(commands)
    if hit is None:
        raise NotFound(f"the wrapper script {path} runs no engine advisor knows")
    command, found = hit
    variables = _script_vars(commands, placed, path, read, None)
    first_arg = argv.index(path) + 1 if path in argv else 1
    slots: list[Slot] = []
    forwards = False
    for w in command.words[found.args :]:
        if "@" in w.refs or "*" in w.refs:  # "$@": ExecStart's own arguments go here
            forwards = True
            slots += [
                _exec_slot(edits, i, placed, "ExecStart=") for i in range(first_arg, len(argv))
            ]
        else:
            slots.append(_shell_slot(w, f"{path} line {w.line}", None, variables))
    runs = f"{found.engine.title} from the wrapper script {path} (line {command.line})"
    why = (
        f"{path} line {command.line} starts the engine without passing its own arguments on "
        '("$@"), so a flag added to ExecStart= would not reach it'
    )
    return Invocation(
        found.engine,
        runs,
        slots,
        edits,
        append=edits.appended.extend if forwards else None,
        no_append=why,
        unit_place=placed,
        engine_env=variables,
    )
