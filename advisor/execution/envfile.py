"""systemd's environment syntaxes, read and written exactly as systemd 252 does.

Advisor must find where a server's flag value lives; often that is a variable of an
``EnvironmentFile=`` used in ``ExecStart=`` as ``$VAR`` (split into words) or ``${VAR}`` (one
word). The rule this module keeps: every function answers as systemd 252 itself does, so what
advisor reads is what the service gets and what it writes is read back unchanged. Sources read
(tag v252 of systemd, the RHEL 9 tree): ``src/basic/env-file.c`` (``parse_env_file_internal``,
``load_env_file``), ``src/basic/env-util.c`` (``replace_env_argv``, ``replace_env_n``,
``strv_env_clean_with_callback``, ``env_name_is_valid``), ``src/basic/extract-word.c``,
``src/core/execute.c`` (``exec_context_load_environment``, the merge in ``exec_child``).

* An ``EnvironmentFile=`` line is ``KEY=VALUE``; ``#``/``;`` start a comment only where a key
  could start; quotes are honoured only at the start of the value (or right after a closing
  quote), a backslash escapes the next character outside quotes and ``" \\ ` $`` (else it is
  kept) inside double quotes; a backslash-newline joins lines; a comment ending in a backslash
  swallows the next line too (v252; v254 changed this). ``export`` is not understood: the key
  ``export A`` is invalid, and invalid keys are dropped when the service starts.
* ``$VAR`` alone as an ExecStart word becomes the value split at whitespace, with quotes and
  backslashes honoured (``EXTRACT_RELAX|EXTRACT_UNQUOTE``, no C escapes); unset, it vanishes.
  ``${VAR}`` (anywhere in a word) becomes the value as one piece; ``$$`` is ``$``; ``$VAR``
  inside a larger word and ``${VAR:-x}`` are left as written.
* Variables of ``EnvironmentFile=`` override ``Environment=``; later files override earlier.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

WHITESPACE: Final = " \t\n\r"
_NEWLINE: Final = "\n\r"
_NEED_ESCAPE: Final = '"\\`$'
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BARE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


class EnvFileError(ValueError):
    """A value systemd cannot hold (a NUL, invalid UTF-8) or a key it drops."""


@dataclass(frozen=True)
class Assignment:
    """One ``KEY=value`` of an environment file: its value as systemd reads it, and the
    1-based line (counting ``\\n``) where the key starts."""

    key: str
    value: str
    line: int


def valid_name(key: str) -> bool:
    """systemd's ``env_name_is_valid``: ASCII letters, digits, ``_``, not a digit first."""
    return _NAME.fullmatch(key) is not None


class _EnvParser:
    """``parse_env_file_internal`` of v252, one method per state."""

    def __init__(self) -> None:
        self.state: Callable[[str], None] = self.pre_key
        self.key: list[str] = []
        self.value: list[str] = []
        self.key_ws: int | None = None  # where the key's trailing whitespace starts
        self.value_ws: int | None = None  # likewise for an unquoted value
        self.line = 1
        self.key_line = 1
        self.out: list[Assignment] = []

    def push(self, chomp: bool) -> None:
        key = "".join(self.key[: self.key_ws] if self.key_ws is not None else self.key)
        value = self.value[: self.value_ws] if chomp and self.value_ws is not None else self.value
        text = "".join(value)
        if _SURROGATE.search(key + text):
            raise EnvFileError(f"line {self.key_line}: invalid UTF-8: systemd refuses the file")
        if valid_name(key):  # systemd drops the others when the service starts
            self.out.append(Assignment(key, text, self.key_line))
        self.key, self.value = [], []

    def pre_key(self, c: str) -> None:
        if c in "#;":
            self.state = self.comment
        elif c not in WHITESPACE:
            self.state, self.key_ws, self.key, self.key_line = self.in_key, None, [c], self.line

    def in_key(self, c: str) -> None:
        if c in _NEWLINE:  # no "=": the line is ignored
            self.state, self.key = self.pre_key, []
        elif c == "=":
            self.state, self.value_ws = self.pre_value, None
        else:
            if c not in WHITESPACE:
                self.key_ws = None
            elif self.key_ws is None:
                self.key_ws = len(self.key)
            self.key.append(c)

    def pre_value(self, c: str) -> None:
        if c in _NEWLINE:
            self.push(chomp=False)
            self.state = self.pre_key
        elif c == "'":
            self.state = self.single
        elif c == '"':
            self.state = self.double
        elif c == "\\":
            self.state = self.escape
        elif c not in WHITESPACE:
            self.state = self.in_value
            self.value.append(c)

    def in_value(self, c: str) -> None:
        if c in _NEWLINE:
            self.push(chomp=True)
            self.state = self.pre_key
        elif c == "\\":
            self.state, self.value_ws = self.escape, None
        else:
            if c not in WHITESPACE:
                self.value_ws = None
            elif self.value_ws is None:
                self.value_ws = len(self.value)
            self.value.append(c)

    def escape(self, c: str) -> None:
        self.state = self.in_value
        if c not in _NEWLINE:  # an escaped newline is eaten up
            self.value.append(c)

    def single(self, c: str) -> None:
        if c == "'":
            self.state = self.pre_value
        else:
            self.value.append(c)

    def double(self, c: str) -> None:
        if c == '"':
            self.state = self.pre_value
        elif c == "\\":
            self.state = self.double_escape
        else:
            self.value.append(c)

    def double_escape(self, c: str) -> None:
        self.state = self.double
        if c in _NEED_ESCAPE:
            self.value.append(c)
        elif c != "\n":
            self.value += ["\\", c]

    def comment(self, c: str) -> None:
        if c == "\\":
            self.state = self.comment_escape
        elif c in _NEWLINE:
            self.state = self.pre_key

    def comment_escape(self, c: str) -> None:
        self.state = self.comment  # v252: even a newline is swallowed

    def finish(self) -> list[Assignment]:
        if self.state not in (self.pre_key, self.in_key, self.comment, self.comment_escape):
            self.push(chomp=self.state == self.in_value)
        return self.out


def parse_env_file(text: str) -> list[Assignment]:
    """The assignments systemd 252 loads from an ``EnvironmentFile=`` holding `text`, in
    file order, keys with an invalid name dropped (as the service sees them). A key set twice
    appears twice: the later one wins. Reading stops at a NUL, as systemd's does. Raises
    EnvFileError for invalid UTF-8 (surrogate escapes), which makes systemd refuse the file."""
    parser = _EnvParser()
    for c in text.split("\0", 1)[0]:
        parser.state(c)
        if c == "\n":
            parser.line += 1
    return parser.finish()


def env_value_text(value: str) -> str:
    """`value` as an environment-file value: bare when plainly safe, else double-quoted with
    ``" \\ ` $`` escaped (also a valid POSIX shell word with the same value)."""
    if "\0" in value or _SURROGATE.search(value):
        raise EnvFileError(f"{value!r}: systemd cannot hold a NUL or invalid UTF-8")
    if _BARE.fullmatch(value):
        return value
    return '"' + re.sub(r'(["\\`$])', r"\\\1", value) + '"'


def env_file_text(values: Mapping[str, str], header: str = "") -> str:
    """A file that systemd (and parse_env_file) reads back as exactly `values`. `header`
    becomes comment lines (a trailing backslash, which would swallow the next line in v252,
    is followed by a space)."""
    lines = []
    for raw in header.splitlines() if header else ():
        line = "# " + raw.replace("\r", " ").replace("\0", " ")
        lines.append(line + " " if line.endswith("\\") else line)
    for key, value in values.items():
        if not valid_name(key):
            raise EnvFileError(f"{key!r} is not a variable name systemd accepts")
        lines.append(f"{key}={env_value_text(value)}")
    return "".join(line + "\n" for line in lines)


def _one_word(value: str, i: int) -> tuple[str, int]:
    """extract_first_word(EXTRACT_RELAX|EXTRACT_UNQUOTE) from a non-blank `i`."""
    out: list[str] = []
    quote = ""
    n = len(value)
    while i < n:
        c = value[i]
        if c == "\\":
            if i + 1 >= n:  # a trailing backslash is dropped (relaxed)
                return "".join(out), n
            out.append(value[i + 1])
            i += 2
            continue
        if quote:
            if c == quote:
                quote = ""
            else:
                out.append(c)
        elif c in "'\"":
            quote = c
        elif c in WHITESPACE:
            return "".join(out), i
        else:
            out.append(c)
        i += 1
    return "".join(out), n  # an unterminated quote ends the word (relaxed)


def split_words(value: str) -> list[str]:
    """The arguments `$VAR` alone as an ExecStart word becomes when VAR is `value`: split at
    whitespace, single and double quotes removed, a backslash taking the next character
    literally (inside quotes too, single ones included; no C escapes), unbalanced quotes and a
    trailing backslash tolerated. An empty or blank value gives no argument."""
    words: list[str] = []
    i, n = 0, len(value)
    while True:
        while i < n and value[i] in WHITESPACE:
            i += 1
        if i >= n:
            return words
        word, i = _one_word(value, i)
        words.append(word)


def join_words(words: Sequence[str]) -> str:
    """A value that split_words gives back as exactly `words` (bare words where safe, else
    double quotes with ``\\`` and ``"`` escaped)."""
    out = []
    for word in words:
        if "\0" in word:
            raise EnvFileError(f"{word!r}: an argument cannot hold a NUL")
        if word and not any(c in WHITESPACE + "'\"\\" for c in word):
            out.append(word)
        else:
            out.append('"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return " ".join(out)


def expand(word: str, env: Mapping[str, str]) -> str:
    """systemd's expansion of one ExecStart word that is not `$VAR` alone (``replace_env``
    with no flags): ``${NAME}`` becomes NAME's value (empty when unset), ``$$`` becomes ``$``;
    ``$NAME`` and ``${NAME:-x}`` stay as written, an unterminated ``${`` too."""
    out: list[str] = []
    state, start = "word", 0
    for i, c in enumerate(word):
        if state == "word":
            if c == "$":
                state = "dollar"
        elif state == "dollar":
            if c == "{":
                out.append(word[start : i - 1])
                start, state = i - 1, "name"
            elif c == "$":
                out.append(word[start:i])
                start, state = i + 1, "word"
            else:
                state = "word"
        elif c == "}":
            name = word[start + 2 : i]
            out.append(env.get(name, "") if name else "")
            start, state = i + 1, "word"
        elif c == ":":  # ${NAME:-…}: not supported here, left as written
            state = "word"
    out.append(word[start:])
    return "".join(out)


def expand_argv(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The argv a process gets from an ExecStart argv (as D-Bus shows it, specifiers already
    resolved) and its environment: ``replace_env_argv``. A word that is ``$NAME`` alone (not
    ``$$…``, not ``${…``) becomes split_words of NAME's value, or nothing when NAME is unset;
    every other word goes through expand. Not applied by systemd to ``:``-prefixed commands."""
    out: list[str] = []
    for arg in argv:
        if arg.startswith("$") and arg[1:2] not in ("{", "$"):
            name = arg[1:]
            value = env.get(name) if name else None
            out += split_words(value) if value is not None else []
        else:
            out.append(expand(arg, env))
    return out


def effective(
    environment: Sequence[str], files: Sequence[tuple[str, list[Assignment] | None]]
) -> dict[str, tuple[str, str]]:
    """The variables a service gets from its ``Environment=`` (the D-Bus ``Environment``
    property: ``KEY=value`` strings in order) and its ``EnvironmentFile=`` files in order (None:
    missing or ignored), each as (value, where): ``"Environment="`` or the file's path. Files
    override Environment=, later files earlier ones, later assignments earlier ones; invalid
    names are dropped. (Variables systemd sets itself, PassEnvironment= and PAM are not
    here.)"""
    result: dict[str, tuple[str, str]] = {}
    for entry in environment:
        key, sep, value = entry.partition("=")
        if sep and valid_name(key):
            result[key] = (value, "Environment=")
    for path, assignments in files:
        for a in assignments or ():
            if valid_name(a.key):
                result[a.key] = (a.value, path)
    return result
