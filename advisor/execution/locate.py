"""Where a flag's value lives in a unit, and how advisor changes it there.

Operators start engines in many ways, and a value can live in each: a word of `ExecStart=`; a
`${VAR}` / `$VAR` from `Environment=` or an `EnvironmentFile=`; a word inside a
`bash -c '…'` string; a wrapper script (its own literal, its own variable, a file it
sources, or the unit's variable it reads); a container's arguments after the image, or its
`-e NAME=V`; an engine's own environment variable (TGI's `MAX_BATCH_PREFILL_TOKENS`,
llama.cpp's `LLAMA_ARG_*`). `resolve` follows the command systemd holds through those layers
(`advisor.execution.invocation`) to every place the flag is set, with the value in force
there; given a new value it works out the change:

* a word of ExecStart (or inside its shell string) → ExecStart rewritten in advisor's drop-in;
* a variable the unit provides → the variable overridden in advisor's own environment file
  (an `EnvironmentFile=` listed last, so it wins over `Environment=` and earlier files);
* nowhere → the flag added where the engine's arguments end (through a wrapper only when it
  passes `"$@"` on to the engine);
* a place advisor does not own (a wrapper's literal or its own variable, a file it sources,
  a container's `--env-file`) → refused, naming the file, the line and the setting.

A duplicate flag is never a fix: every place the flag is set gets the new value, or nothing
is changed. Nothing here writes; the `set_flag` handler puts the change into advisor's
drop-in and its environment file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from advisor.core.engines.model import Engine, Flag
from advisor.core.errors import InputError
from advisor.execution import envfile
from advisor.execution.containers import ContainerRun
from advisor.execution.invocation import Invocation, NotFound, Reader, Slot, VarPlace, invocation
from advisor.execution.state import UnitSnapshot

_MAX_FILE: Final = 1024 * 1024


def read_text(path: str) -> str | None:
    """A configuration file's text (None when it cannot be read, or is over 1 MiB)."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_FILE + 1)
    except OSError:
        return None
    if len(data) > _MAX_FILE:
        return None
    return data.decode("utf-8", "replace")


class Refusal(InputError):
    """advisor cannot change the value safely: nothing is written; the message names the
    file and the setting to change by hand."""


@dataclass
class Resolution:
    """What `resolve` found: the engine, where the flag is set and its value in force, and —
    with a new value — the change (`argv`: ExecStart's new words; `variables`: variables to
    override; `refused`: why advisor cannot change it, naming the place)."""

    unit: str
    engine: Engine
    flag: Flag
    runs: str  # how the engine is started, in words
    current: str | None = None  # the value in force (None: the engine's default)
    where: str = ""  # where that value is set
    places: list[str] = field(default_factory=list)
    argv: tuple[str, ...] | None = None
    variables: dict[str, str] = field(default_factory=dict)
    refused: str | None = None

    @property
    def changes(self) -> bool:
        return self.argv is not None or bool(self.variables)


def environment_of(unit: UnitSnapshot, read: Reader = read_text) -> dict[str, tuple[str, str]]:
    """The variables the unit's processes get (value, where it is set), as systemd builds
    them: `Environment=`, then each `EnvironmentFile=` in order, later ones winning."""
    files: list[tuple[str, list[envfile.Assignment] | None]] = []
    for path, _ignore in unit.environment_files:
        text = read(path)
        files.append((path, None if text is None else envfile.parse_env_file(text)))
    return envfile.effective(unit.environment, files)


def _nowhere(name: str) -> tuple[str | None, str]:
    return None, "the unit's environment"


def engine_of(unit: UnitSnapshot, read: Reader = read_text) -> Engine | None:
    """The engine `unit` runs (through shells, wrappers and containers), None if none."""
    try:
        return invocation(unit, _nowhere, read).engine
    except NotFound:
        return None


def container_of(unit: UnitSnapshot, read: Reader = read_text) -> ContainerRun | None:
    """The `docker run` / `podman run` the unit's engine runs in, if it does."""
    try:
        return invocation(unit, _nowhere, read).container
    except NotFound:
        return None


def resolve(
    unit: UnitSnapshot,
    flag_name: str,
    value: str | None = None,
    *,
    read: Reader = read_text,
) -> Resolution:
    """Where `flag_name` is set in `unit` and its value in force; with `value`, the change
    that sets it there (`refused` when advisor cannot). Refusal when no engine is found, or
    the engine has no such flag."""
    if unit.need_daemon_reload:
        raise Refusal(
            f"{unit.name}'s unit files changed on disk and systemd has not reloaded them: "
            "run `systemctl daemon-reload` first (advisor acts on what systemd loaded)"
        )
    env = environment_of(unit, read)

    def lookup(name: str) -> tuple[str | None, str]:
        found = env.get(name)
        return (found[0], found[1]) if found else (None, "the unit's environment (unset)")

    try:
        inv = invocation(unit, lookup, read)
    except NotFound as e:
        raise Refusal(f"cannot tell where {flag_name} lives: {e}") from e
    flag = inv.engine.flag(flag_name)
    if flag is None:
        raise Refusal(f"{flag_name} is not a flag of {inv.engine.title}, which {unit.name} runs")
    result = Resolution(unit.name, inv.engine, flag, inv.runs)
    _Search(inv, flag, result, value, read).run()
    if value is not None and result.refused is None:
        result.argv = inv.edits.result()
    return result


@dataclass
class _Search:
    inv: Invocation
    flag: Flag
    result: Resolution
    value: str | None
    read: Reader
    found: bool = False

    def run(self) -> None:
        slots = self.inv.slots
        spellings = self.flag.spellings
        i = 0
        while i < len(slots):
            slot = slots[i]
            if slot.value in spellings and not self.flag.switch:
                if i + 1 < len(slots):
                    self._at_value(slots[i + 1], f"{slot.value} {slots[i + 1].text}")
                i += 2
                continue
            prefix = next((s + "=" for s in spellings if slot.text.startswith(s + "=")), None)
            if prefix is not None:
                self._equals(slot, prefix)
            elif slot.split is not None:
                self._in_variable(slot)
            i += 1
        if not self.found:
            self._from_environment()
        if not self.found:
            self._absent()

    # -- one place the flag is set ----------------------------------------------------------
    def _seen(self, current: str | None, where: str) -> None:
        self.found = True
        self.result.current, self.result.where = current, where
        self.result.places.append(where)

    def _refuse(self, where: str) -> None:
        if self.value is not None and self.result.refused is None:
            self.result.refused = (
                f"{self.flag.name} is set in {where}, which advisor does not change"
            )

    def _at_value(self, slot: Slot, shown: str) -> None:
        """The flag's value is the word `slot` (`--flag VALUE`)."""
        if slot.value is not None:
            self._seen(slot.value, f"{slot.layer}: `{shown}`")
            if self.value is not None:
                if slot.write is None:
                    self._refuse(f"{slot.layer}: `{shown}`")
                else:
                    slot.write(self.value)
            return
        if slot.ref is not None:
            self._variable(slot.placed(slot.ref[0]), slot.ref[1], shown)
            return
        if slot.split is not None:
            self._in_variable(slot, alone=True)
            return
        self._seen(None, f"{slot.layer}: `{shown}`")
        self._refuse(f"{slot.layer}: `{shown}`, a value built from several parts")

    def _equals(self, slot: Slot, prefix: str) -> None:
        """`--flag=VALUE` in one word."""
        if slot.value is not None:
            self._seen(slot.value[len(prefix) :], f"{slot.layer}: `{slot.text}`")
            if self.value is not None:
                if slot.write is None:
                    self._refuse(f"{slot.layer}: `{slot.text}`")
                else:
                    slot.write(prefix + self.value)
            return
        rest = slot.text[len(prefix) :]
        from advisor.execution.invocation import _shell_ref, _systemd_ref

        ref = _systemd_ref(rest) if slot.splitter == "systemd" else _shell_ref(rest)
        if ref is not None:
            self._variable(slot.placed(ref[0]), ref[1], slot.text)
            return
        self._seen(None, f"{slot.layer}: `{slot.text}`")
        self._refuse(f"{slot.layer}: `{slot.text}`, a value built from several parts")

    def _variable(self, place: VarPlace, default: str | None, shown: str) -> None:
        """The flag's value is variable `place.name` (`--flag ${NAME}`)."""
        current = place.value if place.value is not None else default
        self._seen(current, f"{place.where}: `{shown}`")
        if self.value is None:
            return
        if place.override:
            self.result.variables[place.name] = self.value
        elif place.write is not None:
            place.write(self.value)
        else:
            self._refuse(place.where)

    def _in_variable(self, slot: Slot, *, alone: bool = False) -> None:
        """`$ARGS`: a variable whose value is split into several of the engine's words."""
        assert slot.split is not None
        place = slot.placed(slot.split)
        if place.value is None:
            return
        words = _split(place.value, slot.splitter)
        if words is None:
            if any(s in place.value for s in self.flag.spellings):
                self._seen(None, place.where)
                self._refuse(f"{place.where} (a value advisor cannot split into words)")
            return
        if alone:  # `--flag $V`: V's first word is the value
            self._seen(words[0] if words else None, f"{place.where}: `{slot.text}`")
            new = [self.value, *words[1:]] if self.value is not None else None
        else:
            new = self._within(words, place)
        if new is None or self.value is None:
            return
        if place.override:
            self.result.variables[place.name] = _join(new, slot.splitter)
        elif place.write is not None:
            place.write(_join(new, "shell"))  # the script's own assignment, in its own syntax
        else:
            self._refuse(place.where)

    def _within(self, words: list[str], place: VarPlace) -> list[str] | None:
        """`words` (a variable's) with the flag's value set; None when it is not there."""
        out = list(words)
        hit = False
        for i, word in enumerate(words):
            if word in self.flag.spellings and i + 1 < len(words):
                self._seen(words[i + 1], f"{place.where}: `{word} {words[i + 1]}`")
                if self.value is not None:
                    out[i + 1] = self.value
                hit = True
            for s in self.flag.spellings:
                if word.startswith(s + "="):
                    self._seen(word[len(s) + 1 :], f"{place.where}: `{word}`")
                    if self.value is not None:
                        out[i] = f"{s}={self.value}"
                    hit = True
        return out if hit else None

    # -- not on the command line ------------------------------------------------------------
    def _from_environment(self) -> None:
        """An engine that reads the flag from its environment (TGI, llama.cpp)."""
        name = self.flag.env
        if name is None:
            return
        run = self.inv.container
        if run is not None:
            for option in run.env:
                if option.name == name:
                    self._container_env(option.index, option.prefix, option.value)
            if not self.found and name in _env_file_names(run.env_files, self.read):
                self._seen(None, f"{name} in the container's --env-file")
                self._refuse(f"{name} in the container's --env-file ({', '.join(run.env_files)})")
            return
        if self.inv.engine_env is not None:
            place = self.inv.engine_env(name)
            if place.value is not None:
                self._variable(place, None, f"{name}={place.value}")

    def _container_env(self, index: int, prefix: str, value: str | None) -> None:
        name = self.flag.env
        assert name is not None
        if value is None:  # `-e NAME`: the client's own, from the unit
            self._variable(self.inv.unit_place(name), None, f"-e {name}")
            return
        self._seen(value, f"ExecStart=: `-e {name}={value}`")
        if self.value is not None:
            self.inv.edits.replaced[index] = f"{prefix}{name}={self.value}"

    def _absent(self) -> None:
        if self.value is None:
            return
        if self.inv.append is None:
            self.result.refused = (
                f"{self.flag.name} is not set anywhere advisor can see, and {self.inv.no_append}"
            )
            return
        self.inv.append([self.flag.name, self.value])


def _env_file_names(paths: tuple[str, ...], read: Reader) -> set[str]:
    """The variables a container's `--env-file`s set (docker's format: NAME=VALUE lines)."""
    names: set[str] = set()
    for path in paths:
        text = read(path)
        for line in (text or "").splitlines():
            key = line.strip().partition("=")[0].strip()
            if key and not key.startswith("#"):
                names.add(key)
    return names


def _split(value: str, splitter: str) -> list[str] | None:
    """A variable's value as the words its consumer makes of it; None when advisor cannot
    tell (a shell's split of a value with quotes or globs)."""
    if splitter == "systemd":
        try:
            return envfile.split_words(value)
        except ValueError:
            return None
    if any(c in value for c in "'\"\\*?[$`"):
        return None
    return value.split()


def _join(words: list[str], splitter: str) -> str:
    return envfile.join_words(words) if splitter == "systemd" else " ".join(words)


def same_value(a: str | None, b: str | None) -> bool:
    """Two values as the engine reads them (`0.90` is `0.9`); None is the engine's default."""
    if a is None or b is None:
        return a is b
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False
