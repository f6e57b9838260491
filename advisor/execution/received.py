"""Did the engine get the value? Read from what runs, never from what was written.

A flag change counts only when the engine of the new invocation received the intended value:
its process's argv (`/proc/PID/cmdline`, after every shell, wrapper and variable expansion;
the last occurrence of the flag wins, as in the engines' parsers), else — for an engine that
reads the flag from its environment — `/proc/PID/environ`, else the engine's own echo of its
arguments in the journal (vLLM's `non-default args: {…}`, SGLang's `server_args=…`, TGI's
`Args { … }`). The engine process is found in the unit's control group, or, for a
container, through the runtime (`docker inspect`: the container's processes are not the
unit's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from advisor.core.engines.model import Engine, Flag
from advisor.execution.commands import engine_in
from advisor.execution.locate import same_value
from advisor.execution.primitives import BackendError, Expected

PROC: Final = Path("/proc")


@dataclass(frozen=True)
class Seen:
    """What the engine received for one flag, and how we know (`argv of PID 123`)."""

    value: str | None
    how: str


def argv_value(argv: Sequence[str], flag: Flag) -> str | bool | None:
    """The value `flag` has in an engine's argv (its last occurrence), False when absent."""
    found: str | bool | None = False
    for i, word in enumerate(argv):
        if word in flag.spellings:
            found = True if flag.switch else (argv[i + 1] if i + 1 < len(argv) else None)
        else:
            for spelling in flag.spellings:
                if word.startswith(spelling + "="):
                    found = word[len(spelling) + 1 :]
    return found


def read_argv(pid: int, proc: Path = PROC) -> list[str] | None:
    try:
        data = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    if not data:
        return None
    return [a.decode("utf-8", "surrogateescape") for a in data.rstrip(b"\0").split(b"\0")]


def read_environ(pid: int, proc: Path = PROC) -> dict[str, str]:
    try:
        data = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for item in data.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq:
            out[name.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
    return out


def engine_process(
    pids: Iterable[int], engine: Engine, proc: Path = PROC
) -> tuple[int, list[str]] | None:
    """The first of `pids` whose argv runs `engine` (its workers, renamed by setproctitle, are
    not), with that argv."""
    for pid in sorted(pids):
        argv = read_argv(pid, proc)
        if argv is None:
            continue
        found = engine_in(argv)
        if found is not None and found.engine is engine:
            return pid, argv
    return None


def received(
    pid: int, argv: Sequence[str], environ: Mapping[str, str], engine: Engine, flag: Flag
) -> Seen:
    """What the engine process `pid` received for `flag`."""
    found = engine_in(argv)
    args = argv[found.args :] if found is not None else argv
    value = argv_value(args, flag)
    if value is not False:
        return Seen(None if value is True else value, f"its command line (PID {pid})")
    if flag.env is not None and flag.env in environ:
        return Seen(environ[flag.env], f"{flag.env} in its environment (PID {pid})")
    return Seen(None, f"not on its command line (PID {pid}): the engine's default")


def mismatch(expected: Expected, seen: Seen) -> str | None:
    """Why `seen` is not the expected value, None when it is."""
    if same_value(seen.value, expected.value):
        return None
    got = "no value" if seen.value is None else seen.value
    return f"the engine received {expected.flag} {got} ({seen.how}), not {expected.value}"


class NotReceived(BackendError):
    """The new invocation's engine did not get a value the plan set."""

    def __init__(self, message: str, expected: Sequence[Expected]) -> None:
        super().__init__(message)
        self.expected = tuple(expected)


class Effects:
    """Checks, while a restarted unit comes up, that its engine received `expected`: from the
    engine process as soon as it runs (`check`, polled), from its echo lines (`echoes`)."""

    def __init__(
        self,
        engine: Engine | None,
        expected: Sequence[Expected],
        pids: Callable[[], Iterable[int]],
        proc: Path = PROC,
    ) -> None:
        self.engine = engine
        self.expected = tuple(expected)
        self.pids = pids
        self.proc = proc
        self.confirmed: dict[str, str] = {}

    def _flag(self, expected: Expected) -> Flag | None:
        return None if self.engine is None else self.engine.flag(expected.flag)

    def check(self) -> str | None:
        """Why the running engine has a wrong value, None (so far so good, or no engine
        process yet)."""
        if self.engine is None or not self.pending():
            return None
        found = engine_process(self.pids(), self.engine, self.proc)
        if found is None:
            return None
        pid, argv = found
        environ = read_environ(pid, self.proc)
        for expected in self.pending():
            flag = self._flag(expected)
            if flag is None:
                continue
            seen = received(pid, argv, environ, self.engine, flag)
            why = mismatch(expected, seen)
            if why is not None:
                return why
            self.confirmed[expected.flag] = seen.how
        return None

    def echoes(self, lines: Iterable[str]) -> str | None:
        """Why the engine's own echo of its arguments shows a wrong value, else None."""
        if self.engine is None:
            return None
        for expected in self.pending():
            flag = self._flag(expected)
            for line in lines:
                value = None if flag is None else self.engine.echoed(line, flag)
                if value is None:
                    continue
                seen = Seen(value, "its own echo of its arguments in the journal")
                why = mismatch(expected, seen)
                if why is not None:
                    return why
                self.confirmed[expected.flag] = seen.how
        return None

    def pending(self) -> list[Expected]:
        return [e for e in self.expected if e.flag not in self.confirmed]

    def proof(self) -> str:
        """What was confirmed, in words."""
        return "; ".join(
            f"{e.flag} {e.value} received ({self.confirmed[e.flag]})"
            for e in self.expected
            if e.flag in self.confirmed
        )
