"""Raw systemd unit files: assignments, ``ExecStart=`` words with positions, specifiers.

Advisor rewrites a flag where the operator wrote it, so it needs each ExecStart= word with its
exact span in the assignment and its value as systemd 252 reads it. The rule this module keeps:
every reader answers as systemd 252 does, and every writer produces text systemd reads back as
intended; what systemd would refuse raises (ExecSyntaxError, SpecifierError, UnitSyntaxError),
so a caller never rewrites what it cannot read exactly. Sources read (tag v252, the RHEL 9
tree): ``src/shared/conf-parser.c`` (``config_parse``, ``parse_line``),
``src/basic/fileio.c`` (``read_line_full``), ``src/core/load-fragment.c``
(``config_parse_exec``), ``src/basic/extract-word.c``, ``src/basic/escape.c``
(``cunescape_one``), ``src/shared/specifier.c``, ``src/core/unit-printf.c``,
``src/basic/unit-name.c``.

* Lines end at ``\\n``, ``\\r``, ``\\r\\n``, ``\\n\\r`` or NUL. A line whose first non-blank is
  ``#`` or ``;`` is a comment, skipped even inside a continuation. A line ending in an odd
  number of backslashes continues: that backslash becomes a space and the next line is
  appended as it is (its leading blanks kept); the joined line is then stripped.
* An ExecStart= word is split at blanks with quotes removed and C escapes (``\\n \\x41 \\s
  \\u00e9``…) decoded inside and outside quotes; any other backslash is kept verbatim with the
  character after it (systemd warns "Ignoring unknown escape sequences"), so ``a\\ b`` is one
  word ``a\\ b``.
  A bare ``;`` word separates commands, ``\\;`` is a literal ``;``. The first word's leading
  ``-@:+!`` (``!!``) are flags; with ``@`` the next word is argv[0].
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

_WS: Final = " \t\n\r"
_SIMPLE: Final = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "s": 32}
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./${}-]+")
_HEX = re.compile(r"[0-9a-fA-F]+")
_EOL = re.compile("(?:\n\r?|\r\n?)\0?|\0")
_UNIT = re.compile(r"[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]*)?\.[A-Za-z]+")


class UnitSyntaxError(ValueError):
    """A unit file systemd refuses to load (a bad section header)."""


class ExecSyntaxError(ValueError):
    """An ExecStart= value systemd ignores or refuses (an open quote, no path), or one advisor
    cannot represent (a `\\u` surrogate); for Environment=, any invalid escape too."""


class SpecifierError(ValueError):
    """A ``%`` specifier advisor cannot expand exactly (unknown, or not valid for the unit)."""


@dataclass(frozen=True)
class UnitLine:
    """One assignment: `line` is the physical line where it starts, `end_line` where its
    continuation ends (the number systemd's own messages give)."""

    key: str
    value: str
    line: int
    end_line: int


@dataclass(frozen=True)
class Token:
    """One ExecStart= word: ``raw == line.raw[start:end]``; `value` unquoted and unescaped,
    specifiers left as written."""

    raw: str
    start: int
    end: int
    value: str


@dataclass(frozen=True)
class ExecLine:
    """One command of an ExecStart= assignment (``;`` may give several from one value).

    ``tokens[0]`` is the executable path (its value without the prefix); with ``@`` in
    `prefix`, ``tokens[1]`` is argv[0] (`argv0` is that index). When the prefix was written
    inside the first word's quotes, ``prefix_in_token`` is set and tokens[0] spans it too."""

    path: str
    line: int
    raw: str
    prefix: str
    tokens: tuple[Token, ...]
    prefix_in_token: bool = False

    @property
    def argv0(self) -> int:
        return 1 if "@" in self.prefix else 0


def physical_lines(text: str) -> list[str]:
    """`text` split as systemd's read_line_full does (one of each of ``\\n \\r`` per line
    end, NUL ends a line)."""
    lines = _EOL.split(text)
    return lines[:-1] if lines[-1] == "" else lines


def _odd_backslash(p: str) -> bool:
    escaped = False
    for c in p:
        escaped = False if escaped else c == "\\"
    return escaped


def _logical_lines(text: str) -> list[tuple[str, int, int]]:
    """(joined line, first physical line, last physical line), comments dropped."""
    out: list[tuple[str, int, int]] = []
    pending: str | None = None
    first, bom_seen, number = 0, False, 0
    for number, buf in enumerate(physical_lines(text), 1):
        stripped = buf.lstrip(_WS)
        if stripped and stripped[0] in "#;":
            continue
        line = buf
        if not bom_seen and line.startswith("\ufeff"):
            line, bom_seen = line[1:], True
        joined = line if pending is None else pending + line
        if pending is None:
            first = number
        if _odd_backslash(joined):
            pending = joined[:-1] + " "
            continue
        out.append((joined, first, number))
        pending = None
    if pending is not None:
        out.append((pending, first, number))
    return out


def _safe(name: str) -> bool:
    return not any(ord(c) < 32 or c in "\"'\\\x7f" for c in name)


def assignments(text: str, section: str = "Service") -> list[UnitLine]:
    """The assignments of `section` in a unit file (or drop-in) holding `text`, in order:
    key and value stripped of blanks, continuation lines joined. Lines outside any section,
    without ``=`` or with nothing before it are skipped, as systemd does; a section header
    without its ``]`` or with quotes, backslashes or control characters raises
    UnitSyntaxError (systemd refuses the file)."""
    out: list[UnitLine] = []
    current: str | None = None
    for joined, first, last in _logical_lines(text):
        line = joined.strip(_WS)
        if not line:
            continue
        if line.startswith("["):
            if not line.endswith("]") or not _safe(line[1:-1]):
                raise UnitSyntaxError(f"line {first}: invalid section header {line!r}")
            current = line[1:-1]
            continue
        key, eq, value = line.partition("=")
        if current == section and eq and key:
            out.append(UnitLine(key.strip(_WS), value.strip(_WS), first, last))
    return out


def _cunescape(raw: str, j: int) -> tuple[bytes, int] | None:
    """cunescape_one at raw[j] (after a backslash): (bytes, characters used), None when it
    is no valid escape. A surrogate (``\\ud800``, which systemd takes) raises."""
    c = raw[j] if j < len(raw) else ""
    if c in _SIMPLE or (c and c in "\\\"'"):
        return bytes([_SIMPLE[c]]) if c in _SIMPLE else c.encode(), 1
    width = {"x": 2, "u": 4, "U": 8}.get(c)
    digits = raw[j + 1 : j + 1 + (width or 0)] if width else raw[j : j + 3]
    if width and len(digits) == width and _HEX.fullmatch(digits):
        code = int(digits, 16)
        if c != "x" and 0xD800 <= code < 0xE000:
            raise ExecSyntaxError(f"\\{c}{digits}: a surrogate advisor cannot represent")
        bad_u = code > 0x10FFFF or 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE
        if code == 0 or (c == "U" and bad_u):
            return None
        return (bytes([code]) if c == "x" else chr(code).encode()), 1 + width
    if not width and re.fullmatch(r"[0-7]{3}", digits) and 0 < int(digits, 8) <= 255:
        return bytes([int(digits, 8)]), 3
    return None


def _word(raw: str, i: int, relax: bool) -> tuple[str, int, int]:
    """extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) from a non-blank `i`:
    (value, end of the word, start of the next). `relax`: as extract_first_word_and_warn
    retries, an invalid escape (or a final backslash outside quotes) is kept verbatim."""
    out = bytearray()
    quote = ""
    n = len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            found = _cunescape(raw, i + 1)
            if found is None and (not relax or (quote and i + 1 >= n)):
                raise ExecSyntaxError(f"invalid escape at {i}: {raw[i : i + 4]!r}")
            piece, used = found or (
                b"\\" + raw[i + 1 : i + 2].encode("utf-8", "surrogateescape"),
                1,
            )
            out += piece
            i = min(i + 1 + used, n)
            continue
        if quote and c == quote:
            quote = ""
        elif not quote and c in "'\"":
            quote = c
        elif not quote and c in _WS:
            break
        else:
            out += c.encode("utf-8", "surrogateescape")
        i += 1
    if quote:
        raise ExecSyntaxError(f"an unterminated {quote} quote")
    return bytes(out).decode("utf-8", "surrogateescape"), i, _skip(raw, i)


def _prefix(value: str) -> str:
    """The flag characters config_parse_exec takes from the start of the first word."""
    seen = ""
    for c in value:
        privileged = bool(set(seen) & set("+!"))  # +, ! and !! exclude each other
        once = c in "-@:" and c not in seen
        if once or (c in "+!" and not privileged) or (c == "!" and seen.count("!") == 1):
            seen += c
        else:
            break
    return seen


def _skip(raw: str, i: int) -> int:
    while i < len(raw) and raw[i] in _WS:
        i += 1
    return i


def _first_token(raw: str, start: int, end: int, value: str) -> tuple[str, Token, bool]:
    prefix = _prefix(value)
    bare = raw.startswith(prefix, start)
    begin = start + len(prefix) if bare else start
    return prefix, Token(raw[begin:end], begin, end, value[len(prefix) :]), not bare


def parse_exec(raw: str, path: str = "", line: int = 0) -> list[ExecLine]:
    """The commands of one ExecStart= value (``;`` separates them). Raises ExecSyntaxError
    where systemd ignores the assignment or refuses the unit."""
    out: list[ExecLine] = []
    i, n = _skip(raw, 0), len(raw)
    while i < n:
        start = i
        value, end, i = _word(raw, i, relax=True)
        if value == ";":
            continue
        prefix, first, inside = _first_token(raw, start, end, value)
        if not first.value:
            raise ExecSyntaxError(f"{path}:{line}: no executable path in {raw!r}")
        tokens = [first]
        while i < n:
            if raw[i] == ";" and (i + 1 == n or raw[i + 1] in _WS):
                i = _skip(raw, i + 1)
                break
            if raw.startswith("\\;", i) and (i + 2 == n or raw[i + 2] in _WS):
                tokens.append(Token("\\;", i, i + 2, ";"))
                i = _skip(raw, i + 2)
                continue
            start = i
            value, end, i = _word(raw, i, relax=True)
            tokens.append(Token(raw[start:end], start, end, value))
        if "@" in prefix and len(tokens) < 2:
            raise ExecSyntaxError(f"{path}:{line}: '@' but no argv[0] in {raw!r}")
        out.append(ExecLine(path, line, raw, prefix, tuple(tokens), inside))
    return out


def exec_start(files: Sequence[tuple[str, str]]) -> list[ExecLine]:
    """The ExecStart= commands in force, given (path, text) of the fragment and then of each
    drop-in in the order systemd applies them: an empty ``ExecStart=`` resets the list, every
    other assignment appends its commands."""
    commands: list[ExecLine] = []
    for path, text in files:
        for assignment in assignments(text, "Service"):
            if assignment.key != "ExecStart":
                continue
            if not assignment.value:
                commands = []
            else:
                commands += parse_exec(assignment.value, path, assignment.line)
    return commands


def environment_tokens(value: str) -> list[Token]:
    """The words of an ``Environment=`` value (``KEY=value`` each; same quoting as ExecStart=,
    specifiers unexpanded). Raises ExecSyntaxError where systemd ignores the whole line."""
    tokens: list[Token] = []
    i = _skip(value, 0)
    while i < len(value):
        start = i
        word, end, i = _word(value, i, relax=False)
        tokens.append(Token(value[start:end], start, end, word))
    return tokens


def _unescape(text: str, what: str) -> str:
    """unit_name_unescape: ``-`` is ``/``, ``\\xNN`` a byte."""
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            digits = text[i + 2 : i + 4]
            if text[i + 1 : i + 2] != "x" or not re.fullmatch(r"[0-9a-fA-F]{2}", digits):
                raise SpecifierError(f"{what}: {text!r} is not a valid escaped name")
            out.append(int(digits, 16))
            i += 4
            continue
        out += b"/" if c == "-" else c.encode("utf-8", "surrogateescape")
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _path_unescape(text: str, what: str) -> str:
    if text == "-":
        return "/"
    path = _unescape(text, what) if text else ""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise SpecifierError(f"{what}: {text!r} is not an escaped path")
    return "/" + path


def _specifier(unit: str, letter: str) -> str | None:
    """The value of %`letter` for `unit` (None: not a specifier advisor expands)."""
    name = unit.rpartition(".")[0]
    prefix, at, instance = name.partition("@")
    if not _UNIT.fullmatch(unit):
        raise SpecifierError(f"{unit!r} is not a unit name")
    last = prefix.rsplit("-", 1)[-1]
    plain = {"i": instance, "n": unit, "N": name, "p": prefix, "j": last}
    if letter in plain:
        return plain[letter]
    escaped = {"I": instance, "P": prefix, "J": last}
    if letter in escaped:
        return _unescape(escaped[letter], f"%{letter}")
    if letter == "f":
        return _path_unescape(instance if at else prefix, "%f")
    return None


def expand_specifiers(value: str, unit: str) -> str:
    """`value` with ``%i %I %n %N %p %P %j %J %f %%`` expanded for `unit` (e.g.
    ``vllm@qwen3.service``), as specifier_printf does: ``%`` before a character that is not a
    letter, digit or ``%`` stays, as does a final ``%``. Any other letter or digit after ``%``
    raises SpecifierError (systemd knows some, e.g. %H, advisor does not resolve them)."""
    out: list[str] = []
    i, n = 0, len(value)
    while i < n:
        c = value[i]
        nxt = value[i + 1] if i + 1 < n else ""
        if c != "%" or not nxt or not (nxt.isascii() and (nxt.isalnum() or nxt == "%")):
            out.append(c)
            i += 1
            continue
        found = "%" if nxt == "%" else _specifier(unit, nxt)
        if found is None:
            raise SpecifierError(f"specifier %{nxt} in {value!r} is not one advisor expands")
        out.append(found)
        i += 2
    return "".join(out)


def replace_token(line: ExecLine, index: int, raw: str) -> str:
    """The ExecStart= value of `line` with token `index` replaced by `raw` (systemd syntax,
    e.g. from token_text); every other character is kept."""
    token = line.tokens[index]
    if index == 0 and line.prefix_in_token:
        raw = line.prefix + raw
    return line.raw[: token.start] + raw + line.raw[token.end :]


def token_text(value: str) -> str:
    """An ExecStart= word whose value is `value`, ``%`` specifiers and ``$`` variables kept
    as they are (so ``%i`` still expands, ``%%`` stays ``%%``): bare when plain, else double
    quotes with C escapes. Not for a word that must read as ``;``-separator or prefix."""
    if "\0" in value:
        raise ExecSyntaxError("systemd cannot hold a NUL in an argument")
    if _PLAIN.fullmatch(value):
        return value
    out = []
    for c in value:
        if c in '\\"':
            out.append("\\" + c)
        elif c in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        elif "\udc80" <= c <= "\udcff":  # a byte that is not UTF-8 (surrogate escape)
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'
