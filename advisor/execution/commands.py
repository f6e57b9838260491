"""Which engine a command line runs, and where in it the engine's own arguments begin.

A command names an engine the ways the registry (`advisor.core.engines`) lists: its program
(`text-generation-launcher`, `/opt/venv/bin/vllm serve`), `python -m` its module, a path into
its package, or — in `docker run` / `podman run` — an image whose entry point is the engine,
the engine's flags then following the image. Words before it are a launcher's (`taskset -c
0-31`, `numactl -N0`, `uv run`, `env VAR=x`, `exec`). A shell (`sh -c SCRIPT`, `bash -lc …`)
runs the commands of its script, and a wrapper script those of its file: both are read by
the caller with `advisor.execution.shellwords`; this module judges one list of words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from advisor.core.engines import ALL
from advisor.core.engines.model import Engine
from advisor.execution.containers import ContainerRun, image_engine, parse_run

SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})
# A word that is an option whose value may be the next word (`--name vllm`, `-n vllm`): a
# program name after it is that value, not a program.
_OPTION_WANTING_VALUE: Final = re.compile(r"^(?:--[^=]+|-[A-Za-z])$")
IMAGES: Final = {image: engine.name for engine in ALL for image in engine.recognition.images}


def base(word: str) -> str:
    """A word's file name (`/opt/venv/bin/vllm` → `vllm`)."""
    return word.rstrip("/").rpartition("/")[2]


@dataclass(frozen=True)
class EngineAt:
    """An engine found in a list of words: `args` is the index of its first argument (what
    follows its program, `serve`, its module, or the image); `container` the `docker run`
    around it, if any."""

    engine: Engine
    start: int  # the word that names it (program, python, image)
    args: int
    container: ContainerRun | None = None


def _module(words: Sequence[str], i: int) -> tuple[str, int] | None:
    """(`python -m MODULE`'s module, index after it) when word `i` is `-m`/`-mMODULE`."""
    word = words[i]
    if word == "-m":
        return (words[i + 1], i + 2) if i + 1 < len(words) else None
    if word.startswith("-m") and not word.startswith("--") and len(word) > 2:
        return word[2:], i + 1
    return None


def program_index(words: Sequence[str]) -> int:
    """Where the command's program is, after `VAR=value`, `exec` and `env [-i] [VAR=value]`."""
    i = 0
    while i < len(words):
        word = words[i]
        if (
            _assignment(word)
            or base(word) in ("exec", "env")
            or (i > 0 and base(words[0]) == "env" and word.startswith("-"))
        ):
            i += 1
        else:
            return i
    return len(words)


def _at(engine: Engine, words: Sequence[str], i: int, program: int) -> EngineAt | None:
    """`engine` named by word `i` of `words` (whose program is word `program`), if it is."""
    r = engine.recognition
    word = words[i]
    name = base(word)
    if name in r.serve and i + 1 < len(words) and words[i + 1] == "serve":
        return EngineAt(engine, i, i + 2)
    after_option = i > 0 and bool(_OPTION_WANTING_VALUE.match(words[i - 1]))
    if name in r.programs and (i == program or ("/" in word and not after_option)):
        return EngineAt(engine, i, i + 1)
    if name in r.words and not after_option:
        return EngineAt(engine, i, i + 1)
    module = _module(words, i)
    if module is not None and any(
        module[0] == m or module[0].startswith(m + ".") for m in r.modules
    ):
        return EngineAt(engine, max(0, i - 1), module[1])
    if any(s in word for s in r.scripts):
        return EngineAt(engine, i, i + 1)
    return None


def engine_in(words: Sequence[str]) -> EngineAt | None:
    """The engine `words` run (directly, after a launcher, or in a container), else None."""
    run = parse_run(words)
    if run is not None:
        return _in_container(words, run)
    program = program_index(words)
    if program < len(words) and base(words[program]) in SHELLS:
        return None  # a shell runs its script (`-c`) or file: the caller reads those
    for i in range(program, len(words)):
        for engine in ALL:
            found = _at(engine, words, i, program)
            if found is not None:
                return found
    return None


def _in_container(words: Sequence[str], run: ContainerRun) -> EngineAt | None:
    name = image_engine(run.image, IMAGES)
    if name is not None and run.entrypoint is None:
        engine = next(e for e in ALL if e.name == name)
        # An image whose entry point is the engine: a command after the image that names
        # the engine itself (`… vllm/vllm-openai vllm serve …`) is its argv as well.
        inner = engine_in(words[run.command_start :]) if run.command_start < len(words) else None
        if inner is not None and inner.engine is engine:
            return EngineAt(engine, run.image_index, run.command_start + inner.args, run)
        return EngineAt(engine, run.image_index, run.command_start, run)
    inner = engine_in(words[run.command_start :])
    if inner is None:
        return None
    offset = run.command_start
    return EngineAt(inner.engine, inner.start + offset, inner.args + offset, run)


def shell_script(words: Sequence[str]) -> tuple[int, str] | None:
    """`sh -c SCRIPT …` (also `-lc`, `-e -c`, `-o pipefail -c`, after `exec`/`env`): the
    index of the script word and the script; None when `words` is no such command."""
    i = 0
    while i < len(words) and (base(words[i]) in ("exec", "env") or _assignment(words[i])):
        i += 1
    if i >= len(words) or base(words[i]) not in SHELLS:
        return None
    has_c = False
    i += 1
    while i < len(words) and words[i][:1] in ("-", "+") and words[i] not in ("-", "--"):
        word = words[i]
        if word in ("-o", "+o"):
            i += 1
        elif not word.startswith("--") and "c" in word[1:]:
            has_c = True
        i += 1
    return (i, words[i]) if has_c and i < len(words) else None


def _assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and name.isidentifier()


def script_of(path: str, *, limit: int = 256 * 1024) -> str | None:
    """The text of `path` if it is a shell script (a `#!` line naming a shell), else None;
    a file that cannot be read, is not text or is larger than `limit` is None too."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit or not data.startswith(b"#!") or b"\0" in data:
        return None
    first = data.split(b"\n", 1)[0][2:].decode("utf-8", "replace").split()
    if not first:
        return None
    interpreter = base(first[0])
    if interpreter == "env" and len(first) > 1:
        interpreter = base(first[-1])
    if interpreter not in SHELLS:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
